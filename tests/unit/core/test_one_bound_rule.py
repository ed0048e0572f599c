"""One bound rule reaches every judgment and every figure: power's trials and the backtest's replay both judge by
kit.core.rules.rules, so a change to the rule there moves the detectable effect and the replayed verdict
together (a copy of the rule in either would leave it behind); and a case's headroom (evidence.md's column,
result.json, the summary's figure and case table) and the worst prompt a report names are the rule's too."""

from __future__ import annotations

import dataclasses

import pytest

from kit.baselines.archive import PromptFigures, read_archive
from kit.baselines.backtest import replay
from kit.core.noise.power import FaultedSample, Trial, caught_by, family_power
from kit.core.rules import rules
from support.archive import CASE, case_result, record, write_run

pytestmark = pytest.mark.unit

# Six clean variants: bounds near 0.016 (bucket 128) and 0.017 (bucket 256); every error here is under them.
CLEAN = [{"a": 0.010, "b": 0.012, "c": 0.014}, {"a": 0.011, "b": 0.011, "c": 0.013},
         {"a": 0.012, "b": 0.013, "c": 0.012}, {"a": 0.011, "b": 0.012, "c": 0.013},
         {"a": 0.0105, "b": 0.0125, "c": 0.0135}, {"a": 0.0115, "b": 0.0115, "c": 0.0125}]
STEPS = (0.011, 0.012)  # prompt a's decode steps, under their step bounds


def _stepped(rec):
    return dataclasses.replace(rec, decode={"steps": 2, "per_step": {"1": {"bound": 0.016}, "2": {"bound": 0.018}}})


def _figures(rec, tmp_path):
    """Power's detectable magnitude for a trial of first-token and decode samples, power's tests that catch one,
    and the backtest's replayed status of a clean run with the same figures: all judged under ``rec``."""
    reference = rec.reference()
    sample = FaultedSample("v", 1, dict(CLEAN[1]), {}, steps={"a": STEPS})
    trial = Trial("position", "rope_base", 0.05, 0.02, (sample,) * 5)
    write_run(tmp_path / "runs" / "clean", case_result(CLEAN[1], record(CLEAN)))
    (obs,) = read_archive([tmp_path / "runs"], CASE).observations
    obs = dataclasses.replace(obs, decode=(PromptFigures("a", 128, max(STEPS), None, (), STEPS),))
    return family_power("position", [trial], reference, 0.012).magnitude, caught_by(sample, reference), \
        replay(obs, rec)[0]


def test_a_changed_bound_rule_moves_the_power_figures_and_the_backtest_together(tmp_path, monkeypatch):
    rec = _stepped(record(CLEAN))
    assert _figures(rec, tmp_path / "as-is") == (None, (), "passed")
    # The rule made twice as strict: every error over half its bound fails. Both readers follow it at once.
    monkeypatch.setattr(rules, "past", lambda err, bound: err > bound / 2)
    assert _figures(rec, tmp_path / "stricter") == (0.05, ("bound", "decode"), "failed")


def test_a_decode_steps_over_and_a_borrowed_bounds_judgment_follow_the_rule(monkeypatch):
    from kit.core.verdict import borrowed
    from kit.core.verdict.decode import StepMargin

    step = StepMargin("a", 128, 2, 0.01, 0.016)
    assert not step.over and borrowed._within_factor(0.02, 0.016) and not borrowed._within_factor(0.01, 0.016)
    monkeypatch.setattr(rules, "past", lambda err, bound: err > bound / 2)
    # Past half its bound: over it now, and within the factor of the (halved) bound that borrowed bounds forgive.
    assert step.over and borrowed._within_factor(0.01, 0.016) and not borrowed._within_factor(0.03, 0.016)


def test_the_left_out_false_failures_follow_the_bound_rule(monkeypatch):
    from kit.core.noise.falsefailure import bounds_left_out

    rec = record(CLEAN)
    failed, tried = bounds_left_out([rec])
    assert tried == len(CLEAN) and failed < tried
    # Past a hundredth of its bound fails: every clean variant left out is now past some prompt's bound.
    monkeypatch.setattr(rules, "past", lambda err, bound: err > bound / 100)
    assert bounds_left_out([rec]) == (tried, tried)


def _score(pid: str, bucket: int, bound: float, error: float):
    from kit.core.records.records import PromptScore

    return PromptScore(id=pid, bucket=bucket, n_tokens=bucket, passed=error <= bound, bound=bound,
                       max_probability_error=error, top_probability_l1_error=error, kl_shared=0.0,
                       first_rank_agreement=True, golden_top_token=1, golden_top_probability=0.5,
                       backend_top_token=1, backend_top_probability=0.5, winner_gap=0.0)


def test_a_changed_headroom_rule_moves_the_evidence_column_the_result_and_the_summary_figure(monkeypatch):
    from pathlib import Path

    from kit.core.records.records import CaseResult
    from kit.core.records.results import RunView
    from kit.gate.report import compact_case_table
    from kit.views.plots import headroom_rows
    from kit.views.summary import case_table

    result = CaseResult(case="c", backend="hf", status="passed", golden_kind="semantic",
                        prompts=[_score("near", 128, 0.016, 0.008), _score("far", 512, 0.04, 0.004)],
                        bucket_bounds={"128": 0.016, "512": 0.04})
    view = RunView(Path("run"), {"cases": ["c"]}, {"c": result}, {"c": "executor"})

    def headrooms():
        """The case's headroom as evidence.md's case table, result.json, the summary's headroom figure and its case
        table show it."""
        (row,) = [line for line in compact_case_table(view).splitlines() if line.startswith("| `c`")]
        return (row.split(" | ")[5], result.to_dict()["headroom"], headroom_rows({"c": result})[0][1],
                case_table(view).loc["c"]["headroom"])

    assert headrooms() == ("0.50", pytest.approx(0.5), pytest.approx(0.5), pytest.approx(0.5))
    # The rule made twice as strict: an error counts against half its bound. Every figure follows at once.
    monkeypatch.setattr(rules, "ratio", lambda err, bound: err / (bound / 2))
    assert headrooms() == ("1.00", pytest.approx(1.0), pytest.approx(1.0), pytest.approx(1.0))


def test_the_worst_prompt_a_report_names_first_follows_the_rule(monkeypatch):
    from kit.core.records.records import CaseResult

    result = CaseResult(case="c", backend="hf", status="passed", golden_kind="semantic",
                        prompts=[_score("near", 128, 0.016, 0.008), _score("far", 512, 0.04, 0.012)])
    assert result.worst is not None and result.worst.id == "near"  # half its bound, against 0.3 of it
    # A rule that measured an error in absolute terms would put the larger error first.
    monkeypatch.setattr(rules, "ratio", lambda err, bound: err)
    assert result.worst.id == "far"
