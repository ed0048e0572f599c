"""The drift column says why a case has no drift test: "no calibration" only where there is none; a calibrated
case says what skipped it (turned off, noise measured on other hardware, the case did not finish)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.core.records.records import CaseResult
from kit.core.records.results import RunView
from kit.views.summary import case_table

pytestmark = pytest.mark.unit

CALIBRATED = {"kind": "calibrated", "record": "a" * 64, "rule": "largest-plus-margin/3"}


def drift_cell(result: CaseResult) -> str:
    view = RunView(Path("run"), {"cases": [result.case]}, {result.case: result}, {result.case: "executor"})
    return case_table(view).loc[result.case]["drift"]


@pytest.mark.parametrize("kw, said", [
    ({"bound": 0.075}, "not run (no calibration)"),
    ({"bound_source": CALIBRATED, "drift_skipped": "turned off: drift = false"}, "not run (turned off: drift = false)"),
    ({"bound_source": CALIBRATED, "drift_skipped": "calibration measured on other hardware, cpu (x86-64-v9)"},
     "not run (calibration measured on other hardware, cpu (x86-64-v9))"),
    ({"bound_source": CALIBRATED, "status": "error", "error": "kernel died"}, "not run (case error)"),
])
def test_a_skipped_drift_test_says_why(kw, said):
    result = CaseResult(**{"case": "hf-bf16", "backend": "hf", "status": "passed", "golden_kind": "semantic", **kw})
    assert result.drift_text == said
    assert drift_cell(result) == said
