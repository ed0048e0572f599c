"""A descriptor's false-failure budget (kit.core.noise.falsefailure says why); a run states it in one line
(kit.descriptor.plan.Plan.false_failure_statement).

The budget is counted over the whole descriptor, whichever cases a run selects: a ``--case`` subset judges each
case with the alpha the full gate gives it, so one case never passes alone and fails beside the others.
"""

from __future__ import annotations

from typing import Mapping

from kit.core.baselines.baselinekind import of_golden
from kit.core.noise.falsefailure import Budget, budget
from kit.descriptor.schema import CaseBase, case_golden_kind


def drift_cases(cases: Mapping[str, CaseBase]) -> list[str]:
    """The cases that carry a drift test: calibrated, semantic, ``drift`` not turned off. (A host that uses a record
    of other hardware leaves its drift test out: the gate's rate is then below what is stated, never above.)"""
    return [n for n, c in cases.items()
            if c.calibration is not None and c.drift and of_golden(case_golden_kind(c)).bounded]


def descriptor_budget(rate: float | None, cases: Mapping[str, CaseBase]) -> Budget:
    """``[defaults] false_failure_rate`` (``rate``) split over the descriptor's drift cases."""
    return budget(rate, drift_cases(cases))
