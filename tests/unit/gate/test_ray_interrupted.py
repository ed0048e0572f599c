"""An interrupted Ray run records every case whose task it cancelled: the task's own record where the task wrote it
when it stopped the kernel, else the driver's account, never a case left missing while its partial notebook lies in
the run (on a loaded machine the task's stop outlasted the driver's wait, and the run listed the case as missing)."""

from __future__ import annotations

import json

from kit.core.records import paths, rundir
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import save_case_result
from kit.core.records.spec import CaseSpec
from kit.gate.executors.ray_executor import interrupted

SPEC = CaseSpec(name="sleeps", backend="hf", kernel="k", notebook="n.ipynb", timeout_s=60, model_path="m",
                model_digest="d" * 64, fixture_path="f.json", golden_path="g.json", golden_kind="semantic",
                bound=0.05, top_n=64, descriptor="t.toml")


def test_a_task_that_recorded_nothing_gets_the_drivers_account_on_disk(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    result = interrupted(cases, SPEC)
    notebook = rundir.case_file(cases, "sleeps", rundir.CASE_NOTEBOOK)
    assert (result.status, result.error_kind) == (Status.ERROR, "interrupted")
    assert result.error == f"interrupted; its Ray task was cancelled; partial notebook {paths.display(notebook)}"
    on_disk = json.loads(rundir.case_file(cases, "sleeps").read_text())
    assert (on_disk["status"], on_disk["error"]) == ("error", result.error)


def test_the_tasks_own_record_stands(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    own = CaseResult(case="sleeps", backend="hf", status=Status.ERROR, error_kind="interrupted",
                     error="interrupted; its kernel was killed; partial notebook n.ipynb")
    save_case_result(own, rundir.case_file(cases, "sleeps"))
    assert interrupted(cases, SPEC).error == own.error
    assert json.loads(rundir.case_file(cases, "sleeps").read_text())["error"] == own.error


def test_a_half_written_record_is_replaced_by_the_drivers_account(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    rundir.case_file(cases, "sleeps").write_text('{"case": "sle')
    assert interrupted(cases, SPEC).error.startswith("interrupted; its Ray task was cancelled; ")
    assert json.loads(rundir.case_file(cases, "sleeps").read_text())["status"] == "error"
