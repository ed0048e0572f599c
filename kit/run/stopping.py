"""Stop a run cleanly on SIGINT, SIGTERM and SIGHUP, whatever disposition this process inherited.

A gate is stopped by more than Ctrl-C: a cancelled CI job, `timeout` and Kubernetes send SIGTERM, a
closed terminal sends SIGHUP, and a job started in the background (`nohup make test &`) inherits
SIGINT as *ignored*, so Python's own Ctrl-C handling never runs. Each of these, left to its default,
ends the gate and orphans its kernels with every server and worker under them (jupyter_client starts
kernels in sessions of their own, so no signal to the gate reaches them).

Inside ``on_signals()`` each of the three becomes a ``Stopped`` exception in the main thread. It is a
KeyboardInterrupt, so every path that already cleans up after Ctrl-C (kill the kernels' trees, record
the running cases as interrupted, write the JUnit of what finished) runs unchanged; it carries the exit
code the shell convention gives a process ended by that signal (128 + signal number; 130 for SIGINT).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

from kit.core.exitcodes import ExitCode

SIGNALS = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)

_depth = 0  # nested scopes (the CLI's around run_gate's) install once and restore once
_received: int | None = None


class Stopped(KeyboardInterrupt):
    """The run was stopped by ``signum``; ``exit_code`` is what the command exits with."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """130 for SIGINT (ExitCode.INTERRUPTED); 143 for SIGTERM, 129 for SIGHUP (TERMINATED, HANGUP)."""
        return ExitCode.INTERRUPTED if self.signum == signal.SIGINT else 128 + self.signum


def exit_code(exc: KeyboardInterrupt) -> int:
    """The exit code for an interruption: a plain KeyboardInterrupt is SIGINT's."""
    return exc.exit_code if isinstance(exc, Stopped) else ExitCode.INTERRUPTED


def stop_words(exc: KeyboardInterrupt) -> str:
    """What the CLI says when it stops: 'interrupted' for Ctrl-C, else the signal's name."""
    if isinstance(exc, Stopped) and exc.signum != signal.SIGINT:
        return f"stopped by {signal.Signals(exc.signum).name}"
    return "interrupted"


def _handle(signum: int, frame) -> None:
    global _received
    if _received is not None:
        return  # the cleanup of the first signal is under way; a second must not cut it short
    _received = signum
    raise Stopped(signum)


@contextlib.contextmanager
def on_signals() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into ``Stopped`` for the duration; a no-op off the main thread
    (only the main thread may set handlers, and it is the one that cleans up)."""
    global _depth, _received
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handle) for s in SIGNALS} if _depth == 0 else {}
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            for s, handler in previous.items():
                signal.signal(s, handler)
            _received = None
            from kit.run import notebook  # here, so that the CLI's --help loads no Jupyter client

            notebook.allow_starts()  # an in-process caller may run again after an interruption
