"""Progress for a log that no terminal shows (CI): a heartbeat line and each case's finished buckets.

On a terminal the gate draws a rich progress bar; in a CI log that bar is invisible, and a case that
runs for an hour looks the same as one that hangs. There the gate prints, at a steady interval,

    [  62s] running: hf-bf16 (41 s), vllm-pp1 (12 s)

and relays each bucket a case's kernel reports as finished (kit.core.records.progress):

    hf-bf16: bucket 256 done (16 prompts, 3.1 s)
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kit.core.errors import BadInput
from kit.core.records.progress import BucketDone

HEARTBEAT_ENV = "PARITY_KIT_HEARTBEAT_S"  # seconds between heartbeat lines (tests shorten it)
DEFAULT_HEARTBEAT_S = 30.0
POLL_S = 1.0  # how soon a finished bucket is relayed


def heartbeat_interval() -> float:
    """Seconds between heartbeat lines: $PARITY_KIT_HEARTBEAT_S, else the default; a value that is not a number
    above 0 is bad input, not a silent default."""
    raw = os.environ.get(HEARTBEAT_ENV)
    if raw is None or raw == "":
        return DEFAULT_HEARTBEAT_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise BadInput(f"${HEARTBEAT_ENV}={raw!r}: expected a number of seconds above 0")
    return value


@dataclass
class _Case:
    started: float
    progress: Path
    offset: int  # bytes of the progress file already read (or left by an earlier attempt)
    buckets_done: int = 0
    buckets: int | None = None


class Heartbeat:
    """Relays progress while cases run; ``start`` and ``finish`` bracket each case. Used as a context
    manager, which runs the thread that polls and beats."""

    def __init__(self, emit: Callable[[str], None], interval: float, verbose: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.emit, self.interval, self.verbose, self.clock = emit, interval, verbose, clock
        self.t0 = clock()
        self._next_beat = self.t0 + interval
        self._running: dict[str, _Case] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gate-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def start(self, label: str, progress: Path) -> None:
        """Count a case as running from now, its progress file watched for finished buckets (said at once with -v)."""
        with self._lock:
            self._running[label] = _Case(self.clock(), progress, _size(progress))
            if self.verbose:
                self.emit(f"started {label}")

    def finish(self, label: str) -> None:
        """Relay what the case reported last, before its verdict line."""
        with self._lock:
            case = self._running.pop(label, None)
            if case is not None:
                self._relay(label, case)

    def tick(self) -> None:
        """One round of the thread: relay new buckets, and beat when it is time."""
        with self._lock:
            for label, case in self._running.items():
                self._relay(label, case)
            now = self.clock()
            if now >= self._next_beat:
                self._next_beat = now + self.interval
                if self._running:
                    self.emit(self.beat_line(now))

    def beat_line(self, now: float) -> str:
        """The heartbeat line at ``now``: time since the run started and each running case's time (with -v,
        its buckets done)."""
        parts = []
        for label, case in self._running.items():
            extra = f", {case.buckets_done} of {case.buckets} buckets" if self.verbose and case.buckets else ""
            parts.append(f"{label} ({now - case.started:.0f} s{extra})")
        return f"[{now - self.t0:>4.0f}s] running: {', '.join(parts)}"

    def _loop(self) -> None:
        while not self._stop.wait(min(POLL_S, self.interval)):
            self.tick()

    def _relay(self, label: str, case: _Case) -> None:
        for event in _read_new(case):
            case.buckets_done, case.buckets = event.index, event.total
            of = f"; {event.index} of {event.total} buckets" if self.verbose else ""
            prompts = f"{event.prompts} prompt{'' if event.prompts == 1 else 's'}"
            self.emit(f"{label}: bucket {event.bucket} done ({prompts}, {event.seconds:.1f} s{of})")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_new(case: _Case) -> list[BucketDone]:
    """The complete lines written since the last read; a line still being written waits for the next."""
    try:
        with open(case.progress, "rb") as f:
            f.seek(case.offset)
            data = f.read()
    except OSError:
        return []
    end = data.rfind(b"\n") + 1
    case.offset += end
    events = (BucketDone.from_line(line) for line in data[:end].decode("utf-8", "replace").splitlines())
    return [e for e in events if e is not None]
