"""The summary's case table: a row's bound, margin and headroom belong to the prompt nearest its bound."""

from __future__ import annotations

import dataclasses

from pathlib import Path

import pytest

from kit.core.records.records import CaseResult, PromptScore
from kit.core.records.results import RunView
from kit.views.summary import case_table, styled_case_table

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
    assert row["max_probability_error"] == 0.0167 and row["worst_prompt"] == "mid"
    assert (row["bound"], row["margin"], row["headroom"]) == (0.016, pytest.approx(0.0077), pytest.approx(0.51875))
    html = styled_case_table(view).to_html()
    assert "bound (worst prompt)" in html and "margin (worst prompt)" in html and "max probability error" in html


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
