"""The control's comparison table (the control notebook and the summary show it) carries each case's paired
effect and interval, as the diagnosis states it."""

from __future__ import annotations

from pathlib import Path

from kit.core.verdict.diagnosis import diagnose
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import RunView
from kit.views.control import ControlView, comparison_table, styled_comparison_table
from support.records import prompt_score


def run(release: str, errors: list[float]) -> RunView:
    result = CaseResult(case="hf-bf16", backend="hf", status=Status.PASSED, bound=0.075, golden_kind="semantic",
                        prompts=[prompt_score(f"p-{i}", e) for i, e in enumerate(errors)])
    return RunView(run_dir=None, manifest={"cases": ["hf-bf16"], "release": {"name": release}},
                   results={"hf-bf16": result}, sources={})


def test_the_table_shows_the_paired_effect():
    pin, candidate = run("current", [0.01, 0.02, 0.03, 0.04]), run("candidate", [0.011, 0.021, 0.031, 0.042])
    view = ControlView(Path("ci"), pin, candidate, diagnose(pin, candidate))
    text = view.diagnosis.rows[0].paired_text
    assert text.startswith("candidate's error is 0.00125 above the pin's (95 % interval ")
    assert comparison_table(view).loc["hf-bf16", "paired"] == text
    assert "candidate&#39;s error is 0.00125 above the pin&#39;s" in styled_comparison_table(view).to_html()
