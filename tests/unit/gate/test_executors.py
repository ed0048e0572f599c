"""The executors behind one interface (kit.gate.executors): found by the name runs record, an unknown name refused in
one line naming the known ones, Ray imported only when its executor runs; and Ray's restart of a task whose worker
died keeps the rule of kit.gate.retry: a failed verdict the lost attempt wrote stands, never run again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kit.core.errors import BadInput
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import now_iso, save_case_result
from kit.descriptor.load import load_descriptor
from kit.gate import executor
from kit.gate.executors import ray_task
from kit.run.notebook import NotebookOutcome
from kit.gate.executors.interface import DEFAULT, Executor, Executors, UnknownExecutor, executors
from support import ROOT
from support.records import written_by_kernel


def test_the_registered_names_are_the_ones_runs_record():
    assert executors.names() == ["local", "ray"]
    assert DEFAULT == "local"
    for name in executors.names():
        found = executors.get(name)
        assert isinstance(found, Executor) and found.name == name


def test_an_unknown_executor_is_one_line_naming_the_known_ones(tmp_path, embedded):
    with pytest.raises(UnknownExecutor) as exc:
        executors.get("slurm")
    assert str(exc.value) == "unknown executor 'slurm' (registered: local, ray)"
    assert isinstance(exc.value, BadInput)  # the CLI's one line and exit code of a bad input
    with pytest.raises(UnknownExecutor):  # the preflight asks the registry before it checks anything else
        executor.check_run(load_descriptor(embedded.descriptor), executor="slurm")


def test_a_name_is_registered_once_and_a_lazy_entry_must_be_the_executor_it_names():
    registry = Executors()
    registry.register("local", "kit.gate.executor:LocalExecutor")
    with pytest.raises(ValueError, match="already registered as 'local'"):
        registry.register("local", "kit.gate.executors.ray_executor:RayExecutor")
    registry.register("other", "kit.gate.executor:LocalExecutor")
    with pytest.raises(TypeError, match="not an Executor named 'other'"):
        registry.get("other")


def test_naming_and_checking_with_the_executors_imports_no_ray():
    code = ("import sys\nfrom kit.gate.executors.interface import executors\nimport kit.cli\n"
            "for name in executors.names():\n    executors.get(name)\n"
            "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if m.startswith('ray'))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _restarted(tmp_path, embedded, written: CaseResult | None) -> tuple[dict | None, object]:
    """Attempt 2 of a case's Ray task, after attempt 1 (whose worker died) left ``written`` as its case file."""
    desc = load_descriptor(embedded.descriptor)
    run = executor.prepare_run(desc, tmp_path / "run", only=["hf-bf16"])
    try:
        spec = run.specs[0]
        expected = run.expected[spec.name]
        cases = run.cases_dir
        (cases / f"{spec.name}.attempts.jsonl").write_text(json.dumps({"attempt": 1, "started_at": now_iso()}) + "\n")
        if written is not None:
            save_case_result(written(spec, expected) if callable(written) else written, cases / f"{spec.name}.json")
        attempt = {"attempt": 2, "host": "node-b", "started_at": now_iso()}
        return ray_task.verdict_before_restart(cases, spec, expected, attempt), cases / f"{spec.name}.json"
    finally:
        run.lock.release()


def _verdict(over: int):
    return lambda spec, expected: written_by_kernel(spec, expected, over)


def test_a_ray_restart_keeps_the_failed_verdict_of_the_lost_attempt(tmp_path, embedded):
    standing, path = _restarted(tmp_path, embedded, _verdict(over=5))
    assert standing is not None and standing["status"] == Status.FAILED
    assert standing["notes"][-1] == "attempt 2 on node-b did not run the case again: the verdict of attempt 1 stands"
    assert standing["notebook"].endswith("hf-bf16.attempt1.ipynb")
    assert json.loads(path.read_text())["status"] == Status.FAILED


@pytest.mark.parametrize("left", ["pass", "nothing", "error"])
def test_a_ray_restart_runs_again_a_case_that_judged_nothing(tmp_path, embedded, left):
    """A pass counts only when its notebook finished (kit.gate.executor.verdict_written); an error judged nothing."""
    written = {"pass": _verdict(over=0), "nothing": None,
               "error": CaseResult(case="hf-bf16", backend="hf", status=Status.ERROR, error="the kernel died")}[left]
    standing, _ = _restarted(tmp_path, embedded, written)
    assert standing is None


@pytest.mark.parametrize("spent, left", [(None, 300.0), (20.0, 280.0), (400.0, 1.0)])
def test_a_ray_task_times_its_case_from_the_attempt_the_driver_counts_from(tmp_path, embedded, monkeypatch,
                                                                          spent, left):
    """The driver cancels a task that outlives the case's timeout plus a grace, counted from the attempt's record;
    the case's own timer must count from that instant too, or the task's imports on a loaded machine would spend
    the grace and the driver would cancel a kernel its own timer was about to kill. A timeout already spent
    still starts the kernel for a second, so the case ends as a timeout with its partial notebook."""
    run = executor.prepare_run(load_descriptor(embedded.descriptor), tmp_path / "run", only=["hf-bf16"])
    asked = []
    try:
        spec = run.specs[0]
        monkeypatch.setattr(executor, "run_notebook",
                            lambda nb, out, params, kernel, timeout_s, *a, **kw: asked.append(timeout_s)
                            or NotebookOutcome("timeout", "timeout", None))
        clock_from = None if spent is None else executor.time.monotonic() - spent
        result = executor.execute_case(spec, run.cases_dir, clock_from=clock_from)
    finally:
        run.lock.release()
    assert spec.timeout_s == 300
    assert asked[0] == pytest.approx(left, abs=2.0)
    assert result.error.startswith("exceeded its timeout of 300 s; its kernel was killed")
