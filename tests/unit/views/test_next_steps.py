"""The first screen says, for any verdict, what did not pass, of which kind, and the command that moves it on; the
same steps go into evidence.md. Kinds come from typed fields (status, triage class, remedy), never from words."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.core.verdict.nextsteps import NextKind, next_kind_of, next_steps, one_command
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import RunView
from kit.gate.report import evidence_markdown
from kit.views.audit import run_banner
from support.records import prompt_score

pytestmark = pytest.mark.unit

MAKE = 'parity-kit baseline make descriptors/tiny-cpu.toml --case {} --reason "..."'


def result(case: str, status: str, triage: str | None = None, **more) -> CaseResult:
    over = ["p-1: max probability error 0.5 > bound 0.1"] if status == Status.FAILED else None
    prompts = [prompt_score("p-1", 0.5 if over else 0.001, 0.1, over, bucket=128), prompt_score("p-2", 0.0, 0.1)]
    return CaseResult(case=case, backend="hf", status=status, golden_kind="semantic", prompts=prompts,
                      triage={"class": triage, "evidence": f"{triage}: because"} if triage else None, **more)


RESULTS = {
    "numeric": result("numeric", Status.FAILED, "numeric", failures=["p-1: max probability error 0.5 > bound 0.1"]),
    "tie": result("tie", Status.FAILED, "near-tie", failures=["p-1: winner changed"]),
    "timeout": result("timeout", Status.TIMEOUT, "infrastructure", error="exceeded its timeout of 300 s"),
    "bug": result("bug", Status.ERROR, "case-error", error="cell 3 raised KeyError: 'x'"),
    "no-record": result("no-record", Status.NO_BASELINE, error="no baseline for this hardware: ...",
                        remedy=MAKE.format("no-record")),
    "no-record-2": result("no-record-2", Status.NO_BASELINE, error="no baseline for this hardware: ...",
                          remedy=MAKE.format("no-record-2")),
    "borrowed": result("borrowed", Status.BORROWED, "borrowed-bounds", error="failed only under bounds measured on ...",
                       remedy=MAKE.format("borrowed")),
    "weak": result("weak", Status.INCONCLUSIVE, error="detects faults from 4.2x its clean error, over the limit 2x"),
    "fine": result("fine", Status.PASSED),
}
ORDER = [*RESULTS, "absent"]


def test_every_kind_a_reader_acts_on_comes_from_typed_fields():
    assert {name: next_kind_of(RESULTS.get(name)) for name in ORDER} == {
        "numeric": NextKind.NUMERIC, "tie": NextKind.NEAR_TIE, "timeout": NextKind.INFRASTRUCTURE,
                                                                         "bug": NextKind.CASE_ERROR,
        "no-record": NextKind.NO_BASELINE_KIND, "no-record-2": NextKind.NO_BASELINE_KIND,
                                                                         "borrowed": NextKind.BORROWED_KIND,
        "weak": NextKind.INCONCLUSIVE_KIND, "fine": None, "absent": NextKind.MISSING}


def test_each_step_names_its_command_and_what_blocks_a_pin_comes_first():
    steps = next_steps(ORDER, RESULTS, "descriptors/tiny-cpu.toml", "runs/gate-1")
    assert [(s.case, s.command) for s in steps] == [
        ("numeric", "parity-kit control descriptors/tiny-cpu.toml --case numeric"),
        ("tie", "parity-kit control descriptors/tiny-cpu.toml --case tie"),
        ("bug", None),
        ("timeout", "parity-kit gate descriptors/tiny-cpu.toml --resume runs/gate-1"),
        ("absent", "parity-kit gate descriptors/tiny-cpu.toml --resume runs/gate-1"),
        ("borrowed", MAKE.format("borrowed")),
        ("weak", "parity-kit power descriptors/tiny-cpu.toml --case weak"),
        ("no-record", MAKE.format("no-record")), ("no-record-2", MAKE.format("no-record-2"))]
    assert steps[0].why == "1 of 2 prompts outside their bounds"
    assert one_command(steps, "descriptors/tiny-cpu.toml") == \
        'parity-kit baseline make descriptors/tiny-cpu.toml --reason "..."'
    assert one_command(steps[:1], "d.toml") is None


def test_a_name_the_shell_would_split_is_quoted_in_the_command():
    steps = next_steps(["a b"], {"a b": result("a b", Status.FAILED, "numeric", failures=["x"])}, "my dir/d.toml", "r")
    assert steps[0].command == "parity-kit control 'my dir/d.toml' --case 'a b'"


def view(names: list[str]) -> RunView:
    manifest = {"name": "tiny-cpu", "cases": names, "descriptor": "descriptors/tiny-cpu.toml",
                "fixture_sha256": "f" * 64, "model_digest": "m" * 64, "kit_version": "0.1.0"}
    return RunView(Path("runs/gate-1"), manifest, {n: RESULTS[n] for n in names if n in RESULTS},
                   {n: "executor" for n in names})


def test_the_banner_of_a_failed_run_tables_each_case_its_kind_and_its_command():
    page = run_banner(view(["numeric", "no-record", "fine"]))
    left = ' style="text-align:left"'
    assert f"<th{left}>what happened</th>" in page
    assert f"<td{left}><code>numeric</code></td><td{left}><strong>numeric</strong></td>" in page
    assert "<code>parity-kit control descriptors/tiny-cpu.toml --case numeric</code>" in page
    assert f"<code>{MAKE.format('no-record')}</code>" in page.replace("&quot;", '"')
    assert "fine" not in page.split("<table", 1)[1]  # a passed case is not a step


def test_a_passed_run_has_no_steps_and_its_evidence_no_next_section():
    passed = view(["fine"])
    assert "<table" not in run_banner(passed)
    text = evidence_markdown(passed.manifest, Status.PASSED, {"passed": 1}, 1.0, passed.results, run_dir=Path("r"))
    assert "Next:" not in text


def test_evidence_says_the_same_steps_and_one_command_for_every_missing_baseline():
    v = view(["no-record", "no-record-2", "numeric"])
    text = evidence_markdown(v.manifest, Status.FAILED, {"failed": 1}, 1.0, v.results, run_dir=Path("runs/gate-1"))
    lines = text.splitlines()
    start = lines.index("Next:")
    assert lines[start + 1] == "- `numeric`: **numeric**: `parity-kit control descriptors/tiny-cpu.toml --case numeric`"
    assert lines[start + 2] == f"- `no-record`: **no baseline**: `{MAKE.format('no-record')}`"
    assert lines[start + 4] == ("- every missing baseline at once: "
                                '`parity-kit baseline make descriptors/tiny-cpu.toml --reason "..."`')
