"""Where a case's time goes: named phases in the order they ran, for the gate's timeline.

A case's wall time hides what a user can act on: a kernel slow to start, a model slow to load, a bucket
that spends its time compiling. Comparing a cold run with a warm one phase by phase shows what caching
saves; the executor adds the phases only it can see (the kernel's start, the notebook's write-out).
"""

from __future__ import annotations

import time

KERNEL_START = "kernel start, imports"
WRITE_OUT = "notebook write-out"


class PhaseClock:
    """Seconds per phase: ``mark(name)`` closes the phase that began at the previous mark.

    A phase is in the timeline because its mark was called, however short it was: the caller marks only
    the phases its case has (no repeats, no decode: no mark). Deciding by duration instead would drop a
    real phase that took under a millisecond, and keep an absent one whenever the thread was preempted
    between two marks."""

    def __init__(self) -> None:
        self.started_epoch = time.time()
        self._last = time.perf_counter()
        self._total: dict[str, float] = {}  # unrounded, so that a phase marked again adds up exactly
        self.seconds: dict[str, float] = {}

    def mark(self, name: str) -> None:
        """End the phase running since the last mark and charge its time to ``name`` (added up where a phase recurs)."""
        now = time.perf_counter()
        self._total[name] = self._total.get(name, 0.0) + now - self._last
        self.seconds[name] = round(self._total[name], 3)
        self._last = now

    def span(self) -> list[float]:
        """When the kernel's part began and ends (epoch seconds), for the executor's own phases."""
        return [round(self.started_epoch, 3), round(time.time(), 3)]


def with_executor_phases(phases: dict[str, float], span: list[float], launched_epoch: float,
                         done_epoch: float) -> dict[str, float]:
    """The kernel's phases framed by what happened before it began (kernel start, imports) and after it
    ended (the notebook written, the kernel shut down), as the executor saw them."""
    if len(span) != 2:
        return dict(phases)
    return {KERNEL_START: round(max(0.0, span[0] - launched_epoch), 3), **phases,
            WRITE_OUT: round(max(0.0, done_epoch - span[1]), 3)}


_ORDER = (KERNEL_START, "inputs", "model load", "bucket", "repeats", "decode", "engine close, relaunches", "compare",
          WRITE_OUT)


def ordered(phases: dict[str, float]) -> list[tuple[str, float]]:
    """The phases in the order a case runs them (JSON keeps keys sorted), buckets by size; unknown names last."""
    def key(item: tuple[str, float]) -> tuple[int, int, str]:
        name = item[0]
        head, _, tail = name.partition(" ")
        if head == "bucket" and tail.isdigit():
            return _ORDER.index("bucket"), int(tail), name
        return (_ORDER.index(name) if name in _ORDER else len(_ORDER)), 0, name
    return sorted(phases.items(), key=key)
