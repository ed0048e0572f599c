"""A descriptor's false-failure budget and the one line a run states it in (kit.core.noise.falsefailure says why).

The budget is counted over the whole descriptor, whichever cases a run selects: a ``--case`` subset judges each
case with the alpha the full gate gives it, so one case never passes alone and fails beside the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from kit.core.baselines.baselinekind import of_golden
from kit.core.noise.falsefailure import Budget, bounds_left_out, budget, statement
from kit.descriptor.schema import CaseBase, case_golden_kind

if TYPE_CHECKING:
    from kit.descriptor.plan import Plan


def drift_cases(cases: Mapping[str, CaseBase]) -> list[str]:
    """The cases that carry a drift test: calibrated, semantic, ``drift`` not turned off. (A host that uses a record
    of other hardware leaves its drift test out: the gate's rate is then below what is stated, never above.)"""
    return [n for n, c in cases.items()
            if c.calibration is not None and c.drift and of_golden(case_golden_kind(c)).bounded]


def descriptor_budget(rate: float | None, cases: Mapping[str, CaseBase]) -> Budget:
    """``[defaults] false_failure_rate`` (``rate``) split over the descriptor's drift cases."""
    return budget(rate, drift_cases(cases))


def plan_statement(plan: Plan) -> dict:
    """What a run states of its false-failure rate: the budget, the per-prompt bounds' leave-one-out count over the
    records the selected cases use, and the one line (``statement``) for result.json, evidence.md and the summary."""
    records = []
    for case in plan.cases.values():
        chosen = (case.spec.calibration or {}).get("sha256")
        records += [r for r in case.records if r.sha256 == chosen]
    failed, tried = bounds_left_out(records)
    b = plan.false_failure
    return {**b.to_dict(), "bounds_left_out": {"failed": failed, "variants": tried},
            "statement": statement(b, (failed, tried))}
