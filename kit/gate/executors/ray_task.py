"""The Ray task that runs one gate case, in a module a Ray worker imports quickly.

Ray imports a task's module in the worker before the task's first line runs. The driver counts a
case as started (and stops its ``max_wait_s`` clock for resources) when the task appends to
``cases/<case>.attempts.jsonl``; were that module the executor's (papermill, Jupyter, pydantic), a
loaded machine would spend seconds importing after Ray had already granted the resources, and a case
holding its resources would be cancelled as one whose resources never came. So this module imports
the standard library and the run directory's names only (kit.core.records.rundir, milliseconds), records the
attempt first, and loads the executor afterwards.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only: a worker imports nothing of the kit before it records the attempt
    from kit.core.verdict.coverage import Expected
    from kit.core.records.spec import CaseSpec


def case_task(spec_dict: dict, cases_dir: str, cwd: str, group: str | None, expected: dict | None = None) -> dict:
    """One case, run as a Ray task on the node Ray chose: its attempt recorded, its notebook executed as the
    local executor would, its result returned to the driver as a dict."""
    import ray

    cases = Path(cases_dir)
    # The driver counts the case's timeout from this record; the case's own timer counts from the same
    # instant, so that the imports below (seconds on a loaded machine) come out of the timeout, not out of the
    # driver's grace for a task that does not return.
    clock_from = time.monotonic()
    attempt = start_attempt(cases, spec_dict["name"])

    from kit.core.records import rundir
    from kit.core.records.contract import PLACEMENT_GROUP_ENV
    from kit.core.verdict.coverage import Expected
    from kit.core.records.results import save_case_result
    from kit.core.records.spec import CaseSpec
    from kit.gate.executor import execute_guarded
    from kit.run import warmkernels
    from kit.run.notebook import allow_starts, stop_all

    warmkernels.disable()

    spec = CaseSpec.from_dict(spec_dict)
    asked = Expected.from_dict(expected) if expected else None
    if attempt["attempt"] > 1:
        standing = verdict_before_restart(cases, spec, asked, attempt)
        if standing is not None:
            return standing
    env = {"RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    if group:
        env[PLACEMENT_GROUP_ENV] = group
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits the worker's environment when it starts
    if os.path.isdir(cwd):
        os.chdir(cwd)  # messages show paths relative to where the gate was started, as locally
    box: dict = {}
    done = threading.Event()

    def run() -> None:
        try:
            box.update(result=execute_guarded(spec, cases, None, asked, clock_from=clock_from))
        finally:
            done.set()

    # The case runs in a thread so that this thread stays free to receive ray.cancel's interrupt. Its end
    # is an event, not Thread.join: a join that an interrupt cut short can report the thread ended while
    # it runs, and the task would then return before the case recorded itself (and Ray, its caller gone,
    # would kill the worker under it).
    threading.Thread(target=run, daemon=True).start()
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:  # ray.cancel: end the kernel, so the notebook returns with what it has
        # A cancel can come before the case's kernel has started (a loaded machine takes seconds to get
        # there): refuse that start too, or the kernel would run on after the task was given up.
        stop_all()
        done.wait(30)
        allow_starts()  # the worker runs later tasks
        raise
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    result = box["result"]
    if attempt["attempt"] > 1:  # a reader of a retried verdict should know it was not the first try
        result = dataclasses.replace(result, notes=[
            *result.notes, f"ran on {attempt['host']} (Ray node {attempt['node'][:12]}), attempt {attempt['attempt']}"])
        save_case_result(result, rundir.case_file(cases, spec.name))
    return result.to_dict()


def verdict_before_restart(cases: Path, spec: CaseSpec, expected: Expected | None, attempt: dict) -> dict | None:
    """The failed verdict an earlier attempt of this task wrote before its worker was lost, which stands: Ray
    restarts a task whose worker died, and running the case again would give a numeric failure the chance to
    pass (kit.gate.retry's rule: only a case that judged nothing runs again). The earlier attempt is judged as
    the executor judges a kernel that died after writing its verdict (``verdict_written``); None when it left
    no failed verdict covering the case, and the case runs again."""
    from kit.core import outcomes
    from kit.core.records import rundir
    from kit.core.records.records import CaseResult, Status
    from kit.gate.executor import saved, verdict_written

    earlier = attempt["attempt"] - 1
    started = _dt.datetime.fromisoformat(attempts(cases, spec.name)[earlier - 1]["started_at"]).timestamp()
    lost = CaseResult(case=spec.name, backend=spec.backend, status=Status.ERROR,
                      error_kind=outcomes.Outcome.WORKER_LOST,
                      error=f"its Ray worker died on attempt {earlier}; Ray restarted the task")
    path = rundir.case_file(cases, spec.name)
    judged = verdict_written(lost, cases, started, spec, expected)
    if judged.status != Status.FAILED:
        return None
    judged = dataclasses.replace(
        judged, notebook=str(rundir.attempt_notebook(cases, spec.name, earlier)),  # start_attempt moved it
        notes=[*judged.notes, f"attempt {attempt['attempt']} on {attempt['host']} did not run the case again: "
                              f"the verdict of attempt {earlier} stands"])
    return saved(judged, path).to_dict()


def attempts(cases: Path, name: str) -> list[dict]:
    """The attempts Ray made of a case's task so far, as ``start_attempt`` recorded them."""

    return [json.loads(line) for line in _attempt_lines(cases, name) if line.strip()]


def _attempt_lines(cases: Path, name: str) -> list[str]:
    """The lines of the case's attempts log (none before its first attempt), read through the run's reader."""
    from kit.core.records import rundir
    from kit.core.records.results import RunDir

    data = RunDir.local(cases).read_bytes(rundir.case_file(cases, name, rundir.ATTEMPTS).name)
    return data.decode("utf-8").splitlines() if data is not None else []


def start_attempt(cases: Path, name: str) -> dict:
    """Append this attempt to cases/<case>.attempts.jsonl; keep an earlier attempt's partial notebook."""
    import ray

    from kit.core.records import rundir

    log = rundir.case_file(cases, name, rundir.ATTEMPTS)
    n = 1 + len(_attempt_lines(cases, name))
    notebook = rundir.case_file(cases, name, rundir.CASE_NOTEBOOK)
    if n > 1 and notebook.is_file():
        os.replace(notebook, rundir.attempt_notebook(cases, name, n - 1))
    # as kit.core.records.results.now_iso
    started = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    attempt = {"attempt": n, "host": socket.gethostname(), "pid": os.getpid(),
               "node": ray.get_runtime_context().get_node_id(), "started_at": started}
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(attempt, sort_keys=True) + "\n")
    return attempt
