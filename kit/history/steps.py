"""The one place the history asks whether a case's error stepped up: the flag of the margin table and the
marker of the plots.

A bound is crossed long after an engine's error moved: a release that takes a case from 0.068 to 0.0998 under a
bound of 0.1 passes every gate. The change-point test (kit.history.changepoint) finds such a step while every
run still passes; this module words what it found for a reader, naming the run (and its release) where the
error moved, and says whether the newest run is the one that made it significant (what a CI job alerts on once,
not at every later run). Only steps up are flagged: an error that fell is no threat to the bound. A decode case's
second series, its worst step, is tested on error / bound (the worst step and its bound may change from run to
run) and worded so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from kit.history.changepoint import Direction, completed_at_last, find_steps
from kit.history.queries import MarginRow
from kit.history.rows import Check

# The false-alarm rate per series: a table of tens of case-bucket series should raise one by chance rarely.
FALSE_ALARM = 0.01


@dataclass(frozen=True)
class Flag:
    """A step up in one series: the index of its first run after the step, the line a table shows, and whether
    the newest run is the one that completed it."""

    index: int
    text: str
    new: bool


# What a series' values are, in its flag's words.
MEASURED = {Check.DECODE: "worst decode step's error / bound"}


def step_up(values: Sequence[float], labels: Sequence[str], measured: str = "error") -> Flag | None:
    """The latest step up in ``values`` (a case and bucket's largest errors, oldest first), worded with ``labels``
    (each point's "release R / run X") and ``measured`` (what the values are); None when there is none."""
    if sum(1 for v in values if not math.isnan(v)) < 2:
        return None
    ups = [s for s in find_steps(list(values), false_alarm=FALSE_ALARM) if s.direction == Direction.UP]
    if not ups:
        return None
    step = ups[-1]
    label = labels[step.index] if 0 <= step.index < len(labels) else None
    newest = completed_at_last(list(values), false_alarm=FALSE_ALARM)
    return Flag(step.index, f"{measured} {step.describe(label)}", newest is not None
                and newest.direction == Direction.UP)


def flag_rows(rows: list[MarginRow]) -> list[MarginRow]:
    """``rows`` with each one's flag set from its series (largest errors; a decode series' error / bound)."""
    for row in rows:
        flag = step_up(row.values, row.labels, MEASURED.get(row.check, "error"))
        row.flag = flag.text if flag else None
        row.step_run = row.run_names[flag.index] if flag and flag.index < len(row.run_names) else None
        row.new_step = bool(flag and flag.new)
    return rows
