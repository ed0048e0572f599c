"""A failed verdict the kernel wrote stands whatever happened to its process afterwards: a kernel that dies (or
times out) after writing 12 of 16 prompts over their bounds leaves the case failed, classed numeric and never
retried, never an infrastructure error that a retry could turn into a pass."""

from __future__ import annotations

import dataclasses
from kit.core.records import contract
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import save_case_result
from kit.core.verdict.triage import TriageClass, classify
from kit.descriptor.load import load_descriptor
from kit.gate import executor, retry
from kit.run.notebook import NotebookOutcome
from support.records import written_by_kernel

DIED = "DeadKernelError: Kernel died"



def _run_dying_after(tmp_path, embedded, monkeypatch, over: int, outcome: NotebookOutcome) -> CaseResult:
    run = executor.prepare_run(load_descriptor(embedded.descriptor), tmp_path / "run", only=["hf-bf16"])
    try:
        spec = run.specs[0]
        expected = executor.expectations(run.specs, run.inputs)[spec.name]

        def kernel(*_a, env, **_kw):
            save_case_result(written_by_kernel(spec, expected, over), env[contract.RESULT_PATH_ENV])
            return outcome

        monkeypatch.setattr(executor, "run_notebook", kernel)
        return executor.execute_case(spec, run.cases_dir, expected)
    finally:
        run.lock.release()


def test_a_failed_verdict_then_a_dead_kernel_stays_failed_numeric_and_is_not_retried(tmp_path, embedded, monkeypatch):
    result = _run_dying_after(tmp_path, embedded, monkeypatch, 12, NotebookOutcome(DIED, None, "Kernel died"))
    assert result.status == Status.FAILED
    assert len([p for p in result.prompts if not p.passed]) == 12
    assert result.notes[-1].startswith("after it wrote its verdict, the case ended with error: DeadKernelError")
    assert result.notes[-1].endswith("; the verdict stands")
    triage = classify(result)
    assert triage.kind == TriageClass.NUMERIC
    result = dataclasses.replace(result, triage=triage.to_dict())
    assert retry.due({"hf-bf16": result}, 1, ["hf-bf16"]) == []


def test_a_failed_verdict_then_a_timeout_stays_failed(tmp_path, embedded, monkeypatch):
    result = _run_dying_after(tmp_path, embedded, monkeypatch, 3, NotebookOutcome("timeout", "timeout", None))
    assert result.status == Status.FAILED
    assert "after it wrote its verdict, the case ended with timeout" in result.notes[-1]


def test_a_pass_then_a_dead_kernel_is_an_error_and_a_missing_verdict_too(tmp_path, embedded, monkeypatch):
    """A pass counts only when the notebook finished: the process may have died before what follows it."""
    result = _run_dying_after(tmp_path, embedded, monkeypatch, 0, NotebookOutcome(DIED, None, "Kernel died"))
    assert result.status == Status.ERROR and result.error.startswith(DIED)

