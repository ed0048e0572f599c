"""The one place the history asks whether a case's error stepped up: the flag of the headroom table and the
marker of the plots.

A bound is crossed long after an engine's error moved: a release that takes a case from 0.068 to 0.0998 under a
bound of 0.1 passes every gate. The change-point test (kit.history.changepoint) finds such a step while every
run still passes; this module words what it found for a reader, naming the run (and its release) where the
error moved. Only steps up are flagged: an error that fell is no threat to the bound.
"""

from __future__ import annotations

import importlib
import logging
import math
from dataclasses import dataclass
from typing import Any, Sequence

from kit.history.queries import HeadroomRow

log = logging.getLogger(__name__)

# The false-alarm rate per series: a table of tens of case-bucket series should raise one by chance rarely.
FALSE_ALARM = 0.01


@dataclass(frozen=True)
class Flag:
    """A step up in one series: the index of its first run after the step, and the line a table shows."""

    index: int
    text: str


def step_up(values: Sequence[float], labels: Sequence[str]) -> Flag | None:
    """The step up in ``values`` (a case and bucket's largest errors, oldest first), worded with ``labels`` (each
    point's "release R / run X"); None when there is none, or no change-point test is installed."""
    finder = _find_step()
    if finder is None or sum(1 for v in values if not math.isnan(v)) < 2:
        return None
    step = finder(list(values), false_alarm=FALSE_ALARM)
    if step is None or not step.after > step.before:
        return None
    label = labels[step.index] if 0 <= step.index < len(labels) else f"point {step.index}"
    return Flag(step.index, f"error stepped up from {step.before:.3g} to {step.after:.3g} at {label}")


def flag_rows(rows: list[HeadroomRow]) -> list[HeadroomRow]:
    """``rows`` with each one's flag set from its series of largest errors."""
    for row in rows:
        flag = step_up(row.values, row.labels)
        row.flag = flag.text if flag else None
        row.step_run = row.run_names[flag.index] if flag and flag.index < len(row.run_names) else None
    return rows


def _find_step() -> Any:
    """kit.history.changepoint.find_step, or None until that module is part of this kit (it is written on its
    own; the history shows its tables without the flag meanwhile)."""
    try:
        return importlib.import_module("kit.history.changepoint").find_step
    except ImportError:
        log.debug("kit.history.changepoint is not installed: no step flags")
        return None
