"""The gate's false-failure rate: the Bonferroni split, the statement, the exact binomial upper bound and the
gate-level count of clean runs (kit.core.noise.falsefailure)."""

from __future__ import annotations

import math

import pytest

from kit.core.noise.calibration import DRIFT_ALPHA
from kit.core.noise.falsefailure import (DEFAULT_CAP, Budget, budget, gate_level, percent, statement, upper_bound)


def test_the_default_keeps_each_drift_test_at_the_alpha_its_record_was_reviewed_with():
    b = budget(None, ["a", "b", "c", "d"])
    assert b.rate == pytest.approx(4 * DRIFT_ALPHA) and b.per_case == pytest.approx(DRIFT_ALPHA)
    assert not b.stated


def test_the_default_caps_the_gate_at_one_percent_and_splits_it_beyond_ten_drift_cases():
    b = budget(None, [f"c{i}" for i in range(40)])
    assert b.rate == DEFAULT_CAP and b.per_case == pytest.approx(DEFAULT_CAP / 40)


def test_a_stated_rate_is_split_evenly_over_the_drift_cases():
    b = budget(0.02, ["a", "b", "c", "d", "e"])
    assert b.stated and b.per_case == pytest.approx(0.004)
    assert b.to_dict() == {"rate": 0.02, "per_case": b.per_case, "cases": ["a", "b", "c", "d", "e"],
                           "rule": "Bonferroni", "stated": True}


def test_no_drift_case_no_rate():
    assert budget(None, []).per_case == 0.0
    assert statement(budget(0.01, [])) == "false-failure rate: no drift test in this descriptor, so no rate is stated"


def test_the_statement_reads_as_one_line():
    assert statement(budget(None, ["a", "b", "c", "d"]), (0, 16)) == (
        "false-failure rate: at most 0.4 % for the gate (drift tests: 0.1 % for each of 4 cases, Bonferroni; the "
        "default); per-prompt bounds: measured, 0 failures in 16 leave-one-out variants")
    assert statement(Budget(0.01, ("a",), True), (1, 3)) == (
        "false-failure rate: at most 1 % for the gate (drift tests: 1 % for each of 1 case, Bonferroni); "
        "per-prompt bounds: measured, 1 failure in 3 leave-one-out variants")
    assert statement(Budget(0.01, ("a",), True), (0, 0)).endswith("per-prompt bounds: not measured (too few variants)")


def test_percent():
    assert [percent(p) for p in (0.004, 0.001, 0.00025, 0.139, 0.01)] == ["0.4 %", "0.1 %", "0.025 %", "14 %", "1 %"]


def test_upper_bound_of_no_failure_in_twenty_is_about_fourteen_percent():
    assert upper_bound(0, 20) == pytest.approx(1 - 0.05 ** (1 / 20), rel=1e-9)
    assert upper_bound(0, 20) == pytest.approx(0.1391, abs=1e-4)


@pytest.mark.parametrize("failures, trials, expected", [
    (1, 20, 0.2161),  # one-sided 95 % Clopper-Pearson: scipy.stats.beta.ppf(0.95, x + 1, n - x)
    (3, 10, 0.6066),
    (0, 80, 0.0368),
    (5, 100, 0.1023),
])
def test_upper_bound_known_values(failures, trials, expected):
    assert upper_bound(failures, trials) == pytest.approx(expected, abs=1e-4)


def test_upper_bound_edges():
    assert upper_bound(20, 20) == 1.0
    assert upper_bound(0, 1, confidence=0.9) == pytest.approx(0.9)
    for bad in ((-1, 20), (21, 20), (0, 0)):
        with pytest.raises(ValueError):
            upper_bound(*bad)


def test_a_gate_fails_when_any_of_its_cases_did_not_pass():
    statuses = {"a-01": "passed", "b-01": "passed", "a-02": "passed", "b-02": "failed", "a-03": "passed"}
    gates = [["a-01", "b-01"], ["a-02", "b-02"], ["a-03", "b-03"]]  # b-03 missing: that gate failed too
    level = gate_level(statuses, gates)
    assert level.failing == (1, 2) and level.gates == 3
    assert math.isclose(level.upper, upper_bound(2, 3))


def test_the_gate_level_line():
    level = gate_level({f"c-{i}": "passed" for i in range(20)}, [[f"c-{i}"] for i in range(20)])
    assert level.line() == ("gate-level false failures: 0 of 20 clean gates failed (0 %); one-sided 95% upper "
                            "bound 14 % (Clopper-Pearson)")
