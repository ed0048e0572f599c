"""The summary's case table: a row's bound, margin and headroom belong to the prompt nearest its bound."""

from __future__ import annotations

import dataclasses

from pathlib import Path

import pytest

from kit.core.records.records import CaseResult, PromptScore
from kit.core.records.results import RunView
from kit.views.summary import bounds_note, case_table, styled_case_table

pytestmark = pytest.mark.unit


def score(pid: str, bucket: int, bound: float, error: float) -> PromptScore:
    return PromptScore(id=pid, bucket=bucket, n_tokens=bucket, passed=error <= bound, bound=bound,
                       max_probability_error=error, top_probability_l1_error=error, kl_shared=0.0,
                       first_rank_agreement=True, golden_top_token=1, golden_top_probability=0.5,
                       backend_top_token=1, backend_top_probability=0.5, winner_gap=0.0)


def test_bound_and_margin_are_the_worst_prompts_where_the_largest_error_sits_under_a_wider_bound():
    # Calibrated per bucket: the largest error (0.0167) sits in bucket 128 under 0.044; the prompt nearest its
    # bound is in bucket 512 (0.0083 of 0.016).
    prompts = [score("short", 128, 0.044, 0.0167), score("mid", 512, 0.016, 0.0083), score("long", 1024, 0.022, 0.004)]
    result = CaseResult(case="vllm-pp2", backend="vllm", status="passed", golden_kind="semantic", prompts=prompts,
                        bucket_bounds={"128": 0.044, "512": 0.016, "1024": 0.022})
    view = RunView(Path("run"), {"cases": ["vllm-pp2"]}, {"vllm-pp2": result}, {"vllm-pp2": "executor"})
    row = case_table(view).loc["vllm-pp2"]
    # The error shown is the worst prompt's, beside its own bound: not the largest (0.0167, under 0.044).
    assert row["max_probability_error"] == 0.0083 and row["worst_prompt"] == "mid"
    assert (row["bound"], row["margin"], row["headroom"]) == (0.016, pytest.approx(0.0077), pytest.approx(0.51875))
    html = styled_case_table(view).to_html()
    assert "the worst token, against its own bound" in html and "max probability error" in html
    assert ">first token<" in html and ">+0.0077<" in html and ">calibrated<" not in html  # hand-set bounds
    assert ">hand-set<" in html and ">semantic<" not in html  # the golden's kind is said by the bounds' column


def test_the_bounds_record_and_rule_go_below_the_table_not_into_its_cell():
    prompts = [score("p", 128, 0.0078, 0.007)]
    result = CaseResult(case="vllm-pp1-decode", backend="vllm", status="passed", golden_kind="semantic",
                        prompts=prompts, bucket_bounds={"128": 0.044},
                        bound_source={"kind": "calibrated", "record": "7a62175f" * 8, "rule": "largest-plus-margin/3",
                                      "step_bounds": {"1": 0.044, "2": 0.0059}})
    exact = CaseResult(case="checkpoint", backend="hf", status="passed", golden_kind="exact", prompts=prompts)
    view = RunView(Path("run"), {"cases": ["vllm-pp1-decode", "checkpoint"]},
                   {"vllm-pp1-decode": result, "checkpoint": exact}, {"vllm-pp1-decode": "executor",
                                                                      "checkpoint": "executor"})
    html = styled_case_table(view).to_html()
    assert ">calibrated<" in html and ">exact golden<" in html and "7a62175f" not in html
    assert bounds_note(view) == ('<p style="color:#57606a;font-size:0.9em;margin:4px 0 12px 0">Bounds: '
                                 "<code>vllm-pp1-decode</code> 0.044, calibrated: record 7a62175f7a62, rule "
                                 "largest-plus-margin/3; decode steps 0.0059-0.044</p>")


def test_the_table_says_what_each_case_detects_and_drops_columns_no_case_fills():
    prompts = [score("short", 128, 0.044, 0.0167)]
    powered = CaseResult(case="hf-bf16", backend="hf", status="passed", golden_kind="semantic", prompts=prompts,
                         bucket_bounds={"128": 0.044}, detectable={"detects_from": 1.94, "families": {}})
    plain = CaseResult(case="checkpoint", backend="hf", status="passed", golden_kind="exact", prompts=prompts)
    view = RunView(Path("run"), {"cases": ["hf-bf16", "checkpoint"]}, {"hf-bf16": powered, "checkpoint": plain},
                   {"hf-bf16": "executor", "checkpoint": "executor"})
    assert case_table(view).loc["hf-bf16", "detects_from"] == 1.94
    html = styled_case_table(view).to_html()
    assert "detects from (x clean error)" in html and "1.9x" in html
    assert ">0/1<" in html and ">prompts<" not in html  # failed of all prompts, in one column
    # Nothing was repeated or retried: those columns would say nothing for every case.
    assert "noise floor" not in html and "triage" not in html and "attempts" not in html

    borrowed = dataclasses.replace(powered, detectable={"detects_from": 2.32, "families": {}, "same_class": False,
                                                        "measured_on": "cpu (x86-64-v4)"})
    other = RunView(Path("run"), {"cases": ["hf-bf16"]}, {"hf-bf16": borrowed}, {"hf-bf16": "executor"})
    assert "2.3x (measured on cpu (x86-64-v4))" in styled_case_table(other).to_html()

    unpowered = RunView(Path("run"), {"cases": ["checkpoint"]}, {"checkpoint": plain}, {"checkpoint": "executor"})
    assert "detects from" not in styled_case_table(unpowered).to_html()


def test_a_case_that_did_not_pass_stands_out_and_one_run_again_says_which_run_passed():
    over = score("p", 128, 0.01, 0.02)
    failed = CaseResult(case="hf-bf16", backend="hf", status="failed", golden_kind="semantic", prompts=[over],
                        failures=["p: max probability error 0.02 > bound 0.01"])
    retried = CaseResult(case="vllm-pp1", backend="vllm", status="passed", golden_kind="semantic",
                         prompts=[score("p", 128, 0.01, 0.005)], attempts=[{"attempt": 1, "status": "error"}])
    view = RunView(Path("run"), {"cases": ["hf-bf16", "vllm-pp1"]}, {"hf-bf16": failed, "vllm-pp1": retried},
                   {"hf-bf16": "executor", "vllm-pp1": "executor"})
    html = styled_case_table(view).to_html()
    assert html.count("color: #cf222e") == 1 and ">passed, run 2<" in html
    assert ">attempts<" not in html  # said beside the status instead
