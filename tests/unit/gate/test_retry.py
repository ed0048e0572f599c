"""The gate's retry of infrastructure failures (kit.gate.retry), with a fake case execution: what runs again,
where the earlier attempt's files go, and how the retry is recorded and reported."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from kit.core.errors import BadInput
from kit.core.records.records import CaseResult, PromptScore
from kit.core.records.results import save_case_result
from kit.descriptor.load import load_descriptor
from kit.gate import executor, junit, run as gate
from kit.gate.executor import RunRequest
from support import write_descriptor

BOUND = "p1: max probability error 0.2 > bound 0.075 (bucket 8)"
WINNER = ("p2: winner changed outside a near-tie: golden top token 5 leads backend greedy token 9 by 0.031 > "
          "2 x max error 0.012")


def fake(monkeypatch, outcomes: dict[str, list[dict]]) -> dict[str, int]:
    """execute_case replaced: each call of a case takes its next outcome and leaves the files a case leaves."""
    calls: dict[str, int] = {}

    def execute_case(spec, cases_dir, expected=None, gpus=(), clock_from=None):
        n = calls[spec.name] = calls.get(spec.name, 0) + 1
        outcome = outcomes[spec.name][n - 1]
        (cases_dir / f"{spec.name}.ipynb").write_text(f"notebook of attempt {n}")
        (cases_dir / f"{spec.name}.kernel.log").write_text(f"log of attempt {n}")
        result = CaseResult(spec.name, spec.backend, **outcome)
        save_case_result(result, cases_dir / f"{spec.name}.json")
        return result

    monkeypatch.setattr(executor, "execute_case", execute_case)
    return calls


def gate_run(tmp_path, embedded, outcomes, monkeypatch, retries: int | None = None, defaults: dict | None = None):
    cases = {name: embedded.doc["cases"][name] for name in outcomes}
    desc = write_descriptor(tmp_path, embedded, cases=cases,
                            defaults={**embedded.doc.get("defaults", {}), **(defaults or {})})
    calls = fake(monkeypatch, outcomes)
    run = gate.run_gate(gate.GateRequest(RunRequest(desc, tmp_path / "run", infra_retries=retries),
                                         ["parity-kit", "gate"], jobs=1, summary=False, junit=tmp_path / "junit.xml"))
    return run, calls


DIED = {"status": "error", "error": "the kernel died mid-case; partial notebook n"}
PASSED = {"status": "passed"}


def test_an_infrastructure_failure_runs_again_once_and_its_pass_stands(tmp_path, embedded, monkeypatch):
    run, calls = gate_run(tmp_path, embedded, {"hf-bf16": [DIED, PASSED], "checkpoint": [PASSED]}, monkeypatch)
    assert calls == {"hf-bf16": 2, "checkpoint": 1}
    assert run.verdict == "passed"
    cases = run.run_dir / "cases"
    assert sorted(p.name for p in (cases / "retried").iterdir()) == [
        "hf-bf16.1.ipynb", "hf-bf16.1.json", "hf-bf16.1.kernel.log"]
    assert (cases / "retried" / "hf-bf16.1.ipynb").read_text() == "notebook of attempt 1"
    assert (cases / "hf-bf16.ipynb").read_text() == "notebook of attempt 2"
    assert json.loads((cases / "retried" / "hf-bf16.1.json").read_text())["status"] == "error"
    evidence = "infrastructure: the kernel died: the kernel died mid-case; partial notebook n"
    saved = json.loads((cases / "hf-bf16.json").read_text())
    assert saved["status"] == "passed" and saved["triage"] is None
    assert saved["attempts"] == [{"attempt": 1, "status": "error", "error": DIED["error"],
                                  "triage": {"class": "infrastructure", "evidence": evidence},
                                  "files": ["cases/retried/hf-bf16.1.json", "cases/retried/hf-bf16.1.ipynb",
                                            "cases/retried/hf-bf16.1.kernel.log"]}]
    manifest = json.loads((run.run_dir / "manifest.json").read_text())
    assert manifest["retried"] == {"hf-bf16": evidence} and manifest["infrastructure_retries"] == 1
    md = (run.run_dir / "evidence.md").read_text()
    assert f"Retried after an infrastructure failure: `hf-bf16` ({evidence})." in md
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {"attempt1": f"error: {evidence}"}
    from kit.core.records.results import read_run
    from kit.views.summary import case_table, failure_lines

    view = read_run(run.run_dir)
    assert failure_lines(view) == [f"hf-bf16: attempt 1 was retried: {evidence}"]
    assert case_table(view).loc["hf-bf16", "attempts"] == 2 and case_table(view).loc["hf-bf16", "triage"] is None


def test_a_persisting_infrastructure_failure_leaves_the_verdict_incomplete(tmp_path, embedded, monkeypatch):
    run, calls = gate_run(tmp_path, embedded, {"hf-bf16": [DIED, DIED], "checkpoint": [PASSED]}, monkeypatch)
    assert calls == {"hf-bf16": 2, "checkpoint": 1}
    assert run.verdict == "incomplete"
    r = run.results["hf-bf16"]
    assert r.triage == {"class": "infrastructure", "evidence": "infrastructure: the kernel died: the kernel died "
                                                               "mid-case; partial notebook n"}
    assert [a["attempt"] for a in r.attempts] == [1]
    md = (run.run_dir / "evidence.md").read_text()
    assert "**Parity gate `test`: incomplete.**" in md
    assert "  - triage: infrastructure: the kernel died: the kernel died mid-case; partial notebook n" in md
    case = next(c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase") if c.get("name") == "hf-bf16")
    assert case.find("error").text.startswith("triage: infrastructure: the kernel died")
    assert {p.get("name"): p.get("value") for p in case.iter("property")}["triage"] == "infrastructure"


@pytest.mark.parametrize("failures, kind", [([BOUND], "numeric"), ([WINNER], "near-tie")])
def test_numeric_and_near_tie_failures_are_never_retried(tmp_path, embedded, monkeypatch, failures, kind):
    prompt = PromptScore("p1", 8, 10, False, 0.075, 0.2, 0.2, 0.1, False, 5, 0.5, 9, 0.5, 0.031, failures=failures)
    failed = {"status": "failed", "failures": failures, "prompts": [prompt]}
    run, calls = gate_run(tmp_path, embedded, {"hf-bf16": [failed, PASSED]}, monkeypatch)
    assert calls == {"hf-bf16": 1}
    assert run.verdict == "failed" and run.retried == {}
    assert run.results["hf-bf16"].triage["class"] == kind
    assert not (run.run_dir / "cases" / "retried").exists()
    md = (run.run_dir / "evidence.md").read_text()
    assert f"  - triage: {kind}: " in md


def test_retries_are_configurable_and_zero_turns_them_off(tmp_path, embedded, monkeypatch):
    run, calls = gate_run(tmp_path / "a", embedded, {"hf-bf16": [DIED, DIED, PASSED]}, monkeypatch,
                          defaults={"infrastructure_retries": 2})
    assert calls == {"hf-bf16": 3} and run.verdict == "passed"
    assert [a["attempt"] for a in run.results["hf-bf16"].attempts] == [1, 2]
    assert sorted(p.name for p in (run.run_dir / "cases" / "retried").glob("*.json")) == [
        "hf-bf16.1.json", "hf-bf16.2.json"]
    run, calls = gate_run(tmp_path / "b", embedded, {"hf-bf16": [DIED, PASSED]}, monkeypatch, retries=0,
                          defaults={"infrastructure_retries": 2})
    assert calls == {"hf-bf16": 1} and run.verdict == "incomplete"


def test_a_case_error_is_not_retried_but_errors_across_backends_are(tmp_path, embedded, monkeypatch):
    own = {"status": "error", "error": "cell 3 raised KeyError: 'layers'"}
    run, calls = gate_run(tmp_path / "a", embedded, {"hf-bf16": [own, PASSED], "checkpoint": [PASSED]}, monkeypatch)
    assert calls == {"hf-bf16": 1, "checkpoint": 1}
    assert run.results["hf-bf16"].triage == {"class": "case-error", "evidence": "case error: cell 3 raised KeyError: "
                                                                                 "'layers'"}
    vllm = next(n for n, c in embedded.doc["cases"].items() if c["backend"] == "vllm")
    run, calls = gate_run(tmp_path / "b", embedded, {"hf-bf16": [own, PASSED], vllm: [own, PASSED]}, monkeypatch)
    assert calls == {"hf-bf16": 2, vllm: 2} and run.verdict == "passed"
    assert run.retried["hf-bf16"].startswith(
        "infrastructure: 2 cases of backends hf, vllm errored in this run together")


def test_a_negative_retry_count_is_refused_naming_its_key(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, defaults={"infrastructure_retries": -1})
    with pytest.raises(BadInput, match="infrastructure_retries"):
        load_descriptor(desc)


def test_junit_of_a_case_without_triage_has_no_properties():
    xml = junit.junit_xml([("s", ["c"], {"c": CaseResult("c", "hf", "passed")}, 1.0)])
    assert b"property" not in xml
