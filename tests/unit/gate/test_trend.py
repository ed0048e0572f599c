"""The end of a gate run asks the history whether this run completed a step up in a case's error (kit.gate.trend).

The replay is the story the history is for: a Levanter-like error near 0.068 for ten releases, a release that
moves it to about 0.085, then a creep to 0.0998, under a bound of 0.1 the whole time. The gate must say so at the
step, while every run passes, and never because of a crossing (there is none)."""

from __future__ import annotations

import datetime as _dt

import pytest

from kit.gate import report, trend
from kit.gate.trend import Stepped
from kit.views.audit import gate_reason
from kit.core.records.results import read_run
from support.history import BOUNDS, START, case_result, gate_run

pytestmark = pytest.mark.unit

NOISE = [0.002, -0.001, 0.0, 0.001, -0.002, 0.001, -0.001, 0.002, 0.0, -0.002, 0.001, -0.001]
STORY = ([0.068 + n for n in NOISE[:10]]
         + [0.085 + 0.0011 * i + NOISE[i % len(NOISE)] / 4 for i in range(14)])  # 0.085 creeping to 0.0998


def run_at(root, i, err, release):
    at = START + _dt.timedelta(hours=i)
    doc = case_result("levanter", {128: [err, err / 2], 256: [0.01, 0.005]}, started=at)
    return gate_run(root, f"tiny-cpu-{at:%Y%m%d-%H%M%S}-{i:04x}", {"levanter": doc}, release=release, started=at)


def test_the_creeping_error_is_announced_at_its_step_not_at_a_crossing(tmp_path, monkeypatch):
    monkeypatch.setitem(BOUNDS, "128", 0.1)
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "runs"
    assert max(STORY) < 0.1 and STORY[-1] == pytest.approx(0.0998, abs=0.002)
    announced: dict[int, list[Stepped]] = {}
    runs = []
    for i, err in enumerate(STORY):
        runs.append(run_at(root, i, err, "r1" if i < 10 else f"r{i - 8}"))
        steps = trend.steps_completed(runs[-1], "tiny-cpu")
        if steps:
            announced[i] = steps
    first = min(announced)
    # A permutation test at 1 % needs at least two runs after a step (docs/changepoint.md): 12 at the earliest.
    assert 12 <= first <= 13, announced
    (step,) = announced[first]
    assert (step.case, step.bucket) == ("levanter", 128)
    assert step.flag.startswith("error stepped up from 0.068")
    assert step.flag.endswith(f"at release r2 / run {runs[10].name}")
    # Said once: no later run announces the step at run 10 again (the creep may be announced as steps of its own).
    assert [i for i, s in announced.items() if any(runs[10].name in x.flag for x in s)] == [first]
    assert all(read_run(r).verdict == "passed" for r in runs)


def test_the_evidence_and_the_summary_say_passed_but(tmp_path, monkeypatch):
    monkeypatch.setitem(BOUNDS, "128", 0.1)
    monkeypatch.chdir(tmp_path)
    runs = [run_at(tmp_path / "runs", i, err, None) for i, err in enumerate(STORY[:13])]
    steps = trend.steps_completed(runs[-1], "tiny-cpu")
    assert len(steps) == 1
    trend.write_steps(runs[-1], steps)
    assert trend.read_steps(runs[-1]) == steps
    line = trend.evidence_line(steps, verdict_passed=True)
    assert line is not None and line.startswith("Passed, but levanter's error stepped up from 0.068")
    assert "false-alarm rate 1% per series" in line
    view = read_run(runs[-1])
    manifest = {**view.manifest, "fixture_sha256": "f" * 64, "model_digest": "m" * 64}  # the hand-made run has none
    evidence = report.evidence_markdown(manifest, view.verdict, view.counts, 1.0, view.results, line)
    assert "Passed, but levanter" in evidence
    assert gate_reason(view).startswith("all 1 cases are within their bounds, but levanter's error stepped up")
    # A run before the step's third point has nothing to say, and its summary reads as before.
    assert trend.steps_completed(runs[11], "tiny-cpu") == []
    assert gate_reason(read_run(runs[11])) == "all 1 cases are within their bounds"


def test_a_run_outside_the_default_folder_of_runs_reads_no_history(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "mine"
    runs = [run_at(elsewhere, i, err, None) for i, err in enumerate(STORY[:13])]
    assert trend.steps_completed(runs[-1], "tiny-cpu") == []
    assert not (elsewhere / ".history").exists()  # a folder the user named is not indexed behind their back


def test_a_history_that_cannot_be_read_costs_the_run_nothing(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    run = run_at(tmp_path / "runs", 0, 0.05, None)
    (tmp_path / "runs" / ".history").write_text("not a folder")  # where the index would go
    assert trend.steps_completed(run, "tiny-cpu") == []
    assert "could not be read" in caplog.text
