"""Each error the executor records carries its kind (kit.core.outcomes) into the case result, from the notebook's
outcome or the executor's own failure, never from its text; triage then classes the case by that kind. The
notebook's execution is replaced (no kernel starts); Ray's exceptions are built as Ray raises them."""

from __future__ import annotations

import pytest
import ray.exceptions

from kit.core import outcomes
from kit.core.records.records import Status
from kit.core.records.results import load_case_result
from kit.core.verdict.triage import TriageClass, classify
from kit.descriptor.load import load_descriptor
from kit.gate import executor
from kit.gate.executors import ray_executor
from kit.run.notebook import NotebookOutcome

NOT_STARTED = "cell 3 raised EngineDidNotStart: llama-server: model load aborted (see llama.log)"


@pytest.fixture
def case(tmp_path, embedded):
    run = executor.prepare_run(load_descriptor(embedded.descriptor), tmp_path / "run", only=["hf-bf16"])
    yield run.specs[0], run.cases_dir
    run.lock.release()


def executed(monkeypatch, case, outcome: NotebookOutcome):
    spec, cases_dir = case
    monkeypatch.setattr(executor, "run_notebook", lambda *a, **kw: outcome)
    return executor.execute_case(spec, cases_dir)


def test_a_new_backends_engine_that_did_not_start_is_infrastructure_by_its_kind(monkeypatch, case):
    result = executed(monkeypatch, case, NotebookOutcome(NOT_STARTED, None, None,
                                                         kind=outcomes.Outcome.ENGINE_DID_NOT_START))
    assert (result.status, result.error_kind) == (Status.ERROR, outcomes.Outcome.ENGINE_DID_NOT_START)
    triage = classify(result)
    assert triage.kind == TriageClass.INFRASTRUCTURE
    assert triage.evidence.startswith(f"infrastructure: the engine failed to start: {NOT_STARTED}; partial notebook")


def test_a_dead_kernel_is_carried_and_saved(monkeypatch, case):
    result = executed(monkeypatch, case, NotebookOutcome("the kernel died mid-case", None, "bye",
                                                         kind=outcomes.Outcome.KERNEL_DIED))
    assert result.error_kind == outcomes.Outcome.KERNEL_DIED
    saved = load_case_result(case[1] / "hf-bf16.json")
    assert saved.error_kind == outcomes.Outcome.KERNEL_DIED
    assert classify(saved).evidence.startswith("infrastructure: the kernel died: the kernel died mid-case")


def test_a_cell_error_of_the_cases_own_is_a_case_error(monkeypatch, case):
    result = executed(monkeypatch, case, NotebookOutcome("cell 3 raised ValueError: Connection refused", None,
                                                         None, kind=outcomes.Outcome.CASE_ERROR))
    assert result.error_kind == outcomes.Outcome.CASE_ERROR and classify(result).kind == TriageClass.CASE_ERROR


def test_an_outcome_without_a_kind_or_a_result_is_a_case_error(monkeypatch, case):
    assert executed(monkeypatch, case, NotebookOutcome(None, None, None)).error_kind == outcomes.Outcome.CASE_ERROR


def test_the_kill_on_a_timeout_is_a_timeout(monkeypatch, case):
    result = executed(monkeypatch, case, NotebookOutcome(None, "timeout", None, kind=outcomes.Outcome.TIMEOUT))
    assert (result.status, result.error_kind) == (Status.TIMEOUT, outcomes.Outcome.TIMEOUT)


@pytest.mark.parametrize("started", [True, False])
def test_an_interrupt_is_interrupted(monkeypatch, case, started):
    result = executed(monkeypatch, case, NotebookOutcome("x", "interrupt", None, started,
                                                         kind=outcomes.Outcome.INTERRUPTED))
    assert (result.status, result.error_kind) == (Status.ERROR, outcomes.Outcome.INTERRUPTED)
    assert classify(result).evidence.startswith("infrastructure: the run was interrupted: interrupted")


def test_an_executor_that_fails_is_executor(monkeypatch, case):
    spec, cases_dir = case

    def broken(*_a, **_kw):
        raise OSError("no space left on device")

    monkeypatch.setattr(executor, "run_notebook", broken)
    result = executor.execute_guarded(spec, cases_dir, None)
    assert (result.error, result.error_kind) == ("executor failed: OSError: no space left on device",
                                                 outcomes.Outcome.EXECUTOR)


def test_a_result_that_cannot_be_written_is_executor(monkeypatch, case):
    def full(*_a, **_kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(executor, "save_case_result", full)
    result = executed(monkeypatch, case, NotebookOutcome("cell 3 raised KeyError: x", None, None,
                                                         kind=outcomes.Outcome.CASE_ERROR))
    assert result.error_kind == outcomes.Outcome.EXECUTOR and "could not be written" in result.error


@pytest.mark.parametrize("exc, kind", [
    (ray.exceptions.WorkerCrashedError(), outcomes.Outcome.WORKER_LOST),
    (ray.exceptions.NodeDiedError("node 1 died"), outcomes.Outcome.WORKER_LOST),
    (ray.exceptions.ActorDiedError(), outcomes.Outcome.WORKER_LOST),
    (ray.exceptions.RayTaskError("case_task", "tb", ray.exceptions.WorkerCrashedError()), outcomes.Outcome.WORKER_LOST),
    (ray.exceptions.OutOfMemoryError("the node ran out of memory"), outcomes.Outcome.OUT_OF_MEMORY),
    (ray.exceptions.RayTaskError("case_task", "tb", KeyError("name")), outcomes.Outcome.EXECUTOR),
])
def test_a_ray_tasks_failure_has_the_kind_of_rays_exception(exc, kind):
    assert ray_executor.lost_kind(ray, exc) == kind


def test_a_lost_worker_is_carried_into_its_result(tmp_path):
    spec = type("Spec", (), {"name": "c", "backend": "hf", "bound": 0.1, "golden_kind": "semantic",
                             "timeout_s": 60})()
    sub = ray_executor._Submitted(spec, retries=1)

    class Ref:
        pass

    class FakeRay:
        exceptions = ray.exceptions

        @staticmethod
        def get(_ref):
            raise ray.exceptions.WorkerCrashedError()

    result = ray_executor._outcome(FakeRay, Ref(), sub, tmp_path)
    assert (result.status, result.error_kind) == (Status.ERROR, outcomes.Outcome.WORKER_LOST)
    assert classify(result).evidence.startswith("infrastructure: lost worker: its Ray worker died (WorkerCrashedError)")
