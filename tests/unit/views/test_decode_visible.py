"""A decode failure is as visible as a first-token one: the banner and the case table name the failing step and its
margin, count its prompt as failed, and the headroom figure has a bar for the decode case's worst step."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest

from kit.core.verdict.decode import case_headroom, failed_prompts, worst_decode_step, worst_step
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import RunView
from kit.views.audit import gate_reason
from kit.views.plots import headroom_rows
from kit.views.summary import case_table, decode_frame
from support.records import decode_score, prompt_score

pytestmark = pytest.mark.unit

# vllm-pp1-decode's record: bucket 128's bound and the bounds of its first four decode steps.
BUCKET_BOUND = 0.044
STEP_BOUNDS = {"1": 0.044, "2": 0.012, "3": 0.0059, "4": 0.0095}


def decode_case(step_errors: dict[str, list[float]], failing: dict[str, str] | None = None,
                status: str | None = None, **divergence) -> CaseResult:
    """A calibrated decode case of four prompts, every first token at 0.0167 (headroom 0.38), each prompt's
    continuation at ``step_errors`` (default: well inside every step's bound); ``failing`` names why a prompt's
    continuation failed."""
    ids = ["code-humaneval-01", "chat-02", "math-03", "tool-04"]
    failing = failing or {}
    failures = [f"{pid}: decode step 3: {why}" for pid, why in failing.items()]
    return CaseResult(
        case="vllm-pp1-decode", backend="vllm", status=status or (Status.FAILED if failing else Status.PASSED),
        golden_kind="semantic", bucket_bounds={"128": BUCKET_BOUND},
        bound_source={"kind": "calibrated", "record": "7a62175f" * 8, "rule": "largest-plus-margin",
                      "step_bounds": dict(STEP_BOUNDS)},
        prompts=[prompt_score(pid, 0.0167, BUCKET_BOUND, bucket=128) for pid in ids],
        decode=[decode_score(pid, step_errors.get(pid, [0.01, 0.003, 0.002, 0.003]), 128,
                             [f for f in failures if f.startswith(pid)], **(divergence if pid in failing else {}))
                for pid in ids],
        failures=failures)


def view_of(result: CaseResult) -> RunView:
    return RunView(Path("run"), {"cases": [result.case]}, {result.case: result}, {result.case: "executor"})


FAILS_AT_STEP_3 = {"code-humaneval-01": [0.01, 0.005, 0.008918, 0.004]}


def test_a_case_failing_only_at_decode_step_3_names_the_step_and_its_margin_in_the_banner():
    result = decode_case(FAILS_AT_STEP_3, {"code-humaneval-01": "max probability error 0.008918 > bound 0.0059"})
    assert gate_reason(view_of(result)) == ("`vllm-pp1-decode` fails 1 of 4 prompts (decode step 3 of "
                                            "`code-humaneval-01`: 0.008918 > 0.0059, margin -51%)")


def test_the_case_table_counts_the_prompt_failed_and_shows_the_step_its_bound_and_a_negative_margin():
    result = decode_case(FAILS_AT_STEP_3, {"code-humaneval-01": "max probability error 0.008918 > bound 0.0059"})
    row = case_table(view_of(result)).loc["vllm-pp1-decode"]
    assert row["failed_prompts"] == 1 and row["prompts"] == 4
    assert (row["worst_prompt"], row["step"]) == ("code-humaneval-01", 3)
    assert row["bound"] == 0.0059 and row["margin"] == pytest.approx(0.0059 - 0.008918) and row["margin"] < 0
    assert row["headroom"] == pytest.approx(0.008918 / 0.0059)  # not the first token's 0.38
    assert row["max_probability_error"] == 0.008918  # that step's error, beside that step's bound
    frame = decode_frame(result)
    assert frame.loc["code-humaneval-01", "worst_step"] == 3
    assert frame.loc["code-humaneval-01", "error_over_bound"] == pytest.approx(0.008918 / 0.0059)


def test_the_headroom_figure_has_a_bar_for_the_worst_step():
    result = decode_case(FAILS_AT_STEP_3, {"code-humaneval-01": "max probability error 0.008918 > bound 0.0059"})
    bars = {label: (value, kind) for label, value, kind in headroom_rows({"vllm-pp1-decode": result})}
    assert bars["vllm-pp1-decode"] == (pytest.approx(0.0167 / BUCKET_BOUND), "calibrated")
    assert bars["vllm-pp1-decode decode"] == (pytest.approx(0.008918 / 0.0059), "calibrated")


def test_a_passing_decode_case_keeps_its_first_token_in_the_table_when_that_is_nearer_its_bound():
    result = decode_case({})
    row = case_table(view_of(result)).loc["vllm-pp1-decode"]
    assert row["failed_prompts"] == 0 and row["worst_prompt"] == "code-humaneval-01" and pd.isna(row["step"])
    assert (row["max_probability_error"], row["bound"]) == (0.0167, BUCKET_BOUND)
    assert row["headroom"] == pytest.approx(0.0167 / BUCKET_BOUND)  # its steps reach 0.34 of their bounds
    assert worst_decode_step(result).ratio == pytest.approx(0.002 / 0.0059)


def test_a_divergence_outside_a_near_tie_is_named_in_the_banner():
    result = decode_case({}, {"chat-02": "continuations diverged outside a near-tie"}, diverged_at=2, golden_token=7,
                         backend_token=9, accepted=False)
    assert gate_reason(view_of(result)) == ("`vllm-pp1-decode` fails 1 of 4 prompts (decode step 2 of `chat-02`: the "
                                            "continuations diverged outside a near-tie)")
    assert failed_prompts(result) == ["chat-02"]


def test_each_step_is_measured_against_its_own_bound():
    # Step 1's 0.03 is the largest error but sits under its bound of 0.044; step 3's 0.005 is nearer its 0.0059.
    worst = worst_step("p", 128, [0.03, 0.005, 0.005], BUCKET_BOUND, STEP_BOUNDS)
    assert (worst.step, worst.bound) == (3, 0.0059) and not worst.over
    # A step the record did not measure falls back to the bucket's bound; a step a JSON record wrote as null
    # (NaN: not scorable) is infinitely past its bound.
    assert worst_step("p", 128, [0.001] * 5 + [0.04], BUCKET_BOUND, STEP_BOUNDS).bound == BUCKET_BOUND
    unscorable = worst_step("p", 128, [0.001, None], BUCKET_BOUND, STEP_BOUNDS)
    assert unscorable.step == 2 and math.isinf(unscorable.ratio) and unscorable.over
    assert worst_step("p", 128, [0.01], None, None) is None  # no bound: nothing to measure against


def test_a_case_without_decode_has_its_first_token_headroom():
    result = decode_case({})
    result = dataclasses.replace(result, decode=[])
    assert case_headroom(result) == result.headroom and worst_decode_step(result) is None


def shown(result: CaseResult) -> tuple:
    row = case_table(view_of(result)).loc[result.case]
    return row["worst_prompt"], row["step"], row["max_probability_error"], row["bound"], row["margin"]


def test_the_row_pairs_the_failing_steps_error_with_that_steps_bound_never_a_first_tokens():
    # Every first token's 0.0167 exceeds the bounds of steps 3 (0.0059) and 4 (0.0095); the step that fails is step 2
    # of chat-02 (0.02 > 0.012). The row is that prompt at that step: its error, its bound, their margin.
    failing = decode_case({"chat-02": [0.01, 0.02, 0.003, 0.004]},
                          {"chat-02": "max probability error 0.02 > bound 0.012"})
    assert shown(failing) == ("chat-02", 2, 0.02, 0.012, pytest.approx(0.012 - 0.02))
    assert "fails 1 of 4 prompts (decode step 2 of `chat-02`: 0.02 > 0.012" in gate_reason(view_of(failing))


def test_a_passing_step_nearer_its_bound_than_any_first_token_is_shown_with_its_own_error():
    # vllm-pp1-decode's page showed the first token's largest error (0.00854) beside step 6's bound (0.0078), as if
    # the passed case were past its bound. Step 3 of math-03 (0.005 of 0.0059) is nearer its bound than any first
    # token (0.0167 of 0.044): its own error is shown, inside its bound.
    passing = decode_case({"math-03": [0.01, 0.003, 0.005, 0.003]})
    prompt, step, error, bound, margin = shown(passing)
    assert (prompt, step, error, bound) == ("math-03", 3, 0.005, 0.0059) and error <= bound and margin > 0


def test_a_continuation_that_diverged_outside_a_near_tie_is_the_row_at_its_step():
    # chat-02 failed where it diverged (step 2, error 0.004 inside its bound 0.012); math-03's step 3 is nearer its
    # bound (0.005 of 0.0059) but passed: the row names the step that failed, with that step's numbers.
    result = decode_case({"math-03": [0.01, 0.003, 0.005, 0.003], "chat-02": [0.01, 0.004]},
                         {"chat-02": "continuations diverged outside a near-tie"}, diverged_at=2, golden_token=7,
                         backend_token=9, accepted=False)
    assert shown(result) == ("chat-02", 2, 0.004, 0.012, pytest.approx(0.008))


def test_a_failing_first_token_stays_the_row_over_a_passing_step():
    result = decode_case({"math-03": [0.01, 0.003, 0.005, 0.003]})
    over = dataclasses.replace(result.prompts[1], max_probability_error=0.05, passed=False,
                               failures=["chat-02: max probability error 0.05 > bound 0.044"])
    result = dataclasses.replace(result, status=Status.FAILED, prompts=[result.prompts[0], over, *result.prompts[2:]])
    assert shown(result)[:4] == ("chat-02", None, 0.05, BUCKET_BOUND)
