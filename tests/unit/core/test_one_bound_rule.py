"""One bound rule reaches every judgment: power's trials and the backtest's replay both judge by
kit.core.rules.rules, so a change to the rule there moves the detectable effect and the replayed verdict
together (a copy of the rule in either would leave it behind)."""

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
