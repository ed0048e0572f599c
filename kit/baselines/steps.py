"""How long each step of a `baseline make` took, summed over every call that worked on it.

A GPU node's commands may be cut at ten minutes, so a make there finishes over several calls (``--resume``).
What a new class of hardware costs is then the sum, over every call, of every step's time: each step's time is
appended to the working directory's ``steps.jsonl`` when it ends, finished or stopped (Ctrl-C, SIGTERM), and a
heartbeat file (``step.json``, rewritten every ``HEARTBEAT_S`` while a step runs) lets the next call count the
time of a step whose call was killed outright (SIGKILL at a node's limit: no handler runs then), up to its last
beat. The steps are numbered as they run ("step 3 of 7"), each with its estimate where one is known.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Sequence

from kit.core.records.jsonio import read_json, write_json
from kit.core.records.results import now_iso
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

STEPS = "steps.jsonl"  # one line per step and call: its wall time, finished or not
CURRENT = "step.json"  # the step running now, with its time so far: what a killed call leaves
HEARTBEAT_S = 10.0


@dataclass(frozen=True)
class StepTime:
    """One step's time in one call: ``step`` the kind of work ("calibration", "power", "evidence gate"),
    ``subject`` the case or golden entry it was for ("" for a step of the whole make)."""

    step: str
    subject: str
    wall_s: float
    finished: bool
    estimate_s: float | None = None
    ended_at: str = ""
    call: int = 1  # which call of the make (the first, or the n-th --resume) it ran in

    def to_dict(self) -> dict:
        """One step's time as `baseline make`'s record keeps it."""
        return asdict(self)


@dataclass(frozen=True)
class StepTotal:
    """A step's time over every call that worked on it."""

    step: str
    subject: str
    wall_s: float
    calls: int
    finished: bool
    estimate_s: float | None

    def to_dict(self) -> dict:
        """A kind of step's total time as `baseline make`'s record keeps it."""
        return asdict(self)


def duration_text(seconds: float) -> str:
    """``42 s``, ``3 min 10 s``, ``1 h 05 min``: a step's time as a person reads it."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class StepClock:
    """Numbers, logs and times the steps of one call of a make in ``work_dir`` (``planned``: how many steps
    this call has, for "step 3 of 7")."""

    def __init__(self, work_dir: Path, planned: int) -> None:
        self.work_dir, self.planned, self.done = work_dir, planned, 0
        self._recover()
        self.call = 1 + max((t.call for t in self.times()), default=0)

    def _recover(self) -> None:
        """A step a killed call left running counts with the time it had at its last beat."""
        current = self.work_dir / CURRENT
        try:
            doc = read_json(current)
        except (OSError, ValueError):
            return
        if isinstance(doc, dict) and isinstance(doc.get("elapsed_s"), (int, float)):
            self._append(StepTime(str(doc.get("step", "")), str(doc.get("subject", "")), float(doc["elapsed_s"]),
                                  False, doc.get("estimate_s"), str(doc.get("beat_at", "")), int(doc.get("call", 1))))
        current.unlink(missing_ok=True)

    def _append(self, t: StepTime) -> None:
        with open(self.work_dir / STEPS, "a", encoding="utf-8") as f:
            f.write(json.dumps(t.to_dict(), sort_keys=True) + "\n")

    def _heading(self, what: str) -> str:
        self.done += 1
        return f"step {self.done} of {max(self.planned, self.done)}: {what}"

    def skip(self, what: str) -> None:
        """A step an earlier call finished: said, numbered, and not timed again."""
        log.log(NOTICE, f"{self._heading(what)}: done by an earlier call, reused", extra=MARKUP)

    @contextlib.contextmanager
    def step(self, step: str, subject: str, what: str, estimate_s: float | None = None) -> Iterator[None]:
        """Time the block as one step; its time is kept however the block is left."""
        about = f" (about {duration_text(estimate_s)})" if estimate_s else ""
        heading = self._heading(what)
        log.log(NOTICE, f"{heading}{about}", extra=MARKUP)
        t0 = time.monotonic()
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                self._beat(step, subject, time.monotonic() - t0, estimate_s)

        self._beat(step, subject, 0.0, estimate_s)
        beater = threading.Thread(target=beat, name="baseline-make-step", daemon=True)
        beater.start()
        finished = False
        try:
            yield
            finished = True
        finally:
            stop.set()
            beater.join()
            wall = time.monotonic() - t0
            self._append(StepTime(step, subject, round(wall, 1), finished, estimate_s, now_iso(), self.call))
            (self.work_dir / CURRENT).unlink(missing_ok=True)
            if finished:
                log.log(NOTICE, f"{heading}: done in {duration_text(wall)}", extra=MARKUP)

    def _beat(self, step: str, subject: str, elapsed: float, estimate_s: float | None) -> None:
        write_json(self.work_dir / CURRENT, {"step": step, "subject": subject, "elapsed_s": round(elapsed, 1),
                                             "estimate_s": estimate_s, "beat_at": now_iso(), "call": self.call})

    def times(self) -> list[StepTime]:
        """Every step time kept in the working directory, by every call, in the order they ended."""
        return read_times(self.work_dir)

    def finished(self, step: str, subject: str) -> list[float]:
        """The wall times of every finished run of one step for one subject, oldest first: a step is named by its
        label, the words ``step`` wrote to the steps file."""
        return [t.wall_s for t in self.times() if t.step == step and t.subject == subject and t.finished]


def read_times(work_dir: Path) -> list[StepTime]:
    """The step times a working directory keeps (none before its first step ends)."""
    path = work_dir / STEPS
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            d = json.loads(line)
            out.append(StepTime(str(d["step"]), str(d["subject"]), float(d["wall_s"]), bool(d["finished"]),
                                d.get("estimate_s"), str(d.get("ended_at", "")), int(d.get("call", 1))))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a kill: its step's time is the heartbeat's, or lost with the call
    return out


def totals(times: Sequence[StepTime]) -> list[StepTotal]:
    """Per step and subject, in the order they first ran: the time over every call, how many calls worked on it,
    whether one finished it, and its last estimate."""
    order: dict[tuple[str, str], list[StepTime]] = {}
    for t in times:
        order.setdefault((t.step, t.subject), []).append(t)
    return [StepTotal(step, subject, round(sum(t.wall_s for t in ts), 1), len(ts), any(t.finished for t in ts),
                      next((t.estimate_s for t in reversed(ts) if t.estimate_s), None))
            for (step, subject), ts in order.items()]


def steps_markdown(rows: Sequence[StepTotal], calls: int) -> list[str]:
    """The steps as evidence.md shows them: each step's time over every call, and the total over ``calls``."""
    if not rows:
        return []
    lines = ["| step | for | wall time | calls | estimate |", "| --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        state = "" if r.finished else " (not finished)"
        estimate = duration_text(r.estimate_s) if r.estimate_s else ""
        lines.append(f"| {r.step}{state} | {r.subject} | {duration_text(r.wall_s)} | {r.calls} | {estimate} |")
    total = sum(r.wall_s for r in rows)
    lines.append(f"| **total** | | **{duration_text(total)}** | {calls} | |")
    return lines
