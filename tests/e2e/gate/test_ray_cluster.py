"""The gate on a Ray cluster the tests start (RAY_ADDRESS), for real, inside a loopback-only network namespace (see
rayns.py): faults, timeouts, resource waits, interrupts and gangs. The embedded gate on a Ray started for the run is
tests/e2e/gate/test_ray_executor.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import nbformat
import pytest

from support import (ROOT, SLEEPER, STARTS_WORKERS, survivors, trusted, wait_gone, write_descriptor,
                     write_notebook)
from support.rayns import RayInNamespace, processes_under, short_temp

RUN_THE_CASE = ("from kit.case.runner import resolve_spec, run_case, save\n"
                "save(run_case(resolve_spec(spec, None, None)), result_path)")
# A stop the gate cannot wait for (a cancelled task's, in its worker; a lost worker's guard) ends in another
# process: the tests wait for the case's session to empty, within this bound, rather than for a fixed time.
STOPPED_WITHIN_S = 120


def result_of(run_dir):
    return json.loads((run_dir / "result.json").read_text())


def manifest_of(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.fixture(scope="module")
def ray4():
    """One Ray for the module (starting one costs seconds): 4 logical CPUs, so that the fault cases
    run side by side on a 2-core machine (they mostly sleep or die)."""
    with short_temp("m") as temp:
        ray = RayInNamespace(temp, nodes=1, num_cpus=4)
        try:
            yield ray
        finally:
            ray.stop()
        assert processes_under(temp) == [], "stopping the test's Ray must stop everything it started"


def test_timeout_dead_kernel_and_dead_workers_while_the_rest_finish(tmp_path, embedded, ray4):
    pidfile = tmp_path / "sleeper.pids"
    lost = tmp_path / "lost-worker.pids"
    marker = tmp_path / "died-once"
    hf = embedded.doc["cases"]["hf-bf16"]
    notebooks = {
        "sleeps": write_notebook(tmp_path / "sleepy.ipynb", "print('scoring...')",
                                 SLEEPER.format(pidfile=str(pidfile))),
        "kernel-dies": write_notebook(tmp_path / "kernel.ipynb", "print('scoring...')",
                                      "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
        # The kernel's parent is the Ray worker running the task: killing it is a lost worker. Its
        # kernel's workers must not outlive it.
        "worker-dies": write_notebook(tmp_path / "worker.ipynb", "print('scoring...')",
                                      STARTS_WORKERS.format(pidfile=str(lost)),
                                      "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"),
        "worker-dies-once": write_notebook(
            tmp_path / "once.ipynb",
            f"import os, pathlib, signal\nm = pathlib.Path({str(marker)!r})\n"
            "if not m.exists():\n    m.touch()\n    os.kill(os.getppid(), signal.SIGKILL)",
            RUN_THE_CASE),
    }
    cases = {"hf-bf16": hf,
             # Time for a loaded machine to start the kernel and its workers before the timeout.
             "sleeps": {**hf, "notebook": trusted(notebooks["sleeps"]), "timeout_s": 45},
             "kernel-dies": {**hf, "notebook": trusted(notebooks["kernel-dies"])},
             "worker-dies": {**hf, "notebook": trusted(notebooks["worker-dies"]), "retries": 0},
             "worker-dies-once": {**hf, "notebook": trusted(notebooks["worker-dies-once"])}}
    desc = write_descriptor(tmp_path, embedded, cases=cases,
                            defaults={**embedded.doc["defaults"], "retries": 1})
    run_dir = tmp_path / "run"
    # Ray's own retries alone (the gate's retry of infrastructure failures has tests of its own). The timeout
    # asserted below is the task's own timer's; the driver's later cancel of a task that does not return has
    # its own test, so its grace here is wide enough for a loaded machine to kill the kernel and save the result.
    proc = ray4.gate(desc, "--out", run_dir, "--no-summary", "--infra-retries", "0", PARITY_KIT_RAY_GRACE_S="120")
    assert proc.returncode == 2, proc.stderr
    result = result_of(run_dir)["cases"]
    cases_dir = run_dir / "cases"

    assert result["hf-bf16"]["status"] == "passed"

    assert result["sleeps"]["status"] == "timeout"
    assert result["sleeps"]["error"] == (f"exceeded its timeout of 45 s; its kernel was killed; "
                                         f"partial notebook {cases_dir}/sleeps.ipynb")
    # The task stops the session before it returns its result: nothing is left once the gate has returned.
    assert survivors(map(int, pidfile.read_text().split())) == [], "the timeout must stop the kernel's whole session"

    assert result["kernel-dies"]["status"] == "error"
    assert result["kernel-dies"]["error"].startswith(
        "the kernel died mid-case (killed by SIGKILL: the out-of-memory killer, or another process); partial notebook ")

    died = result["worker-dies"]
    assert died["status"] == "error"
    assert died["error"] == (f"its Ray worker died (WorkerCrashedError) on attempt 1 of 1; "
                             f"partial notebook {cases_dir}/worker-dies.ipynb")
    partial = nbformat.read(str(cases_dir / "worker-dies.ipynb"), as_version=4)
    assert any("scoring..." in o.get("text", "") for c in partial.cells for o in c.get("outputs", []))
    assert wait_gone(map(int, lost.read_text().split()), STOPPED_WITHIN_S) == [], \
        "a lost worker's kernel session must be stopped (by its guard: nothing in the worker runs)"

    # Lost once, retried once: the second attempt ran the case to its verdict.
    once = result["worker-dies-once"]
    assert once["status"] == "passed", once.get("error")
    assert [a["attempt"] for a in map(json.loads, (cases_dir / "worker-dies-once.attempts.jsonl")
                                      .read_text().splitlines())] == [1, 2]
    assert (cases_dir / "worker-dies-once.attempt1.ipynb").is_file(), "the lost attempt's notebook is kept"
    assert any("attempt 2" in note for note in once["notes"])
    assert json.loads((cases_dir / "worker-dies-once.json").read_text())["notes"] == once["notes"]


def test_a_task_past_its_timeout_is_cancelled_from_the_driver(tmp_path, embedded, ray4):
    # A negative grace makes the driver's deadline (timeout + grace) come before the task's own
    # timer, as when a task is stuck where that timer cannot reach. The driver's deadline (60 s after
    # the task starts) leaves a loaded machine room to start the kernel and its workers first.
    pidfile = tmp_path / "sleeper.pids"
    sleepy = write_notebook(tmp_path / "sleepy.ipynb", "print('scoring...')", SLEEPER.format(pidfile=str(pidfile)))
    cases = {"stuck": {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(sleepy), "timeout_s": 240}}
    run_dir = tmp_path / "run"
    # A cancelled task is a failure of the job, which the gate would run again (a second full wait): the gate's
    # retry of infrastructure failures has tests of its own.
    proc = ray4.gate(write_descriptor(tmp_path, embedded, cases=cases), "--out", run_dir, "--no-summary",
                     "--infra-retries", "0", PARITY_KIT_RAY_GRACE_S="-180")
    assert proc.returncode == 2, proc.stderr
    # The driver's cancel, not the task's own 240 s timer, ended it: that timer's error would say
    # "its kernel was killed"; only the driver's says "did not return; its Ray task was cancelled".
    stuck = result_of(run_dir)["cases"]["stuck"]
    assert stuck["status"] == "timeout"
    assert stuck["error"] == ("exceeded its timeout of 240 s and did not return; its Ray task was cancelled; "
                              f"partial notebook {run_dir}/cases/stuck.ipynb")
    assert pidfile.exists(), "the kernel had started its workers before the cancel"
    assert wait_gone(map(int, pidfile.read_text().split()), STOPPED_WITHIN_S) == [], \
        "cancelling the task must stop its kernel's whole session"
    partial = nbformat.read(str(run_dir / "cases" / "stuck.ipynb"), as_version=4)
    assert any("scoring..." in o.get("text", "") for c in partial.cells for o in c.get("outputs", []))


def test_a_case_whose_resources_never_come_gives_up_after_its_wait(tmp_path, embedded, ray4):
    # Two cases that each need all 4 CPUs: whichever Ray starts first holds them past the other's wait.
    # The wait leaves room for a loaded machine to start the first task's worker (3 s did not, and 15 s did not
    # on 2 cores at a load of 4). The first's timer starts after it was submitted, as the second's wait did: a
    # timeout of the wait and 10 s more keeps the first running when the second gives up, however late the
    # first started, and ends the test soon after (the timeout is waited out whole).
    pidfile = tmp_path / "sleeper.pids"
    sleepy = write_notebook(tmp_path / "sleepy.ipynb", "print('scoring...')", SLEEPER.format(pidfile=str(pidfile)))
    case = {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(sleepy), "timeout_s": 50,
            "resources": {"num_cpus": 4, "max_wait_s": 40}}
    run_dir = tmp_path / "run"
    # Without the gate's retry of infrastructure failures (tests of its own), which would run the case that never
    # started again, and the other with it: a second round of the same waits.
    proc = ray4.gate(write_descriptor(tmp_path, embedded, cases={"first": case, "second": case}),
                     "--out", run_dir, "--no-summary", "--infra-retries", "0")
    assert proc.returncode == 2, proc.stderr
    result = result_of(run_dir)["cases"]
    assert sorted(r["status"] for r in result.values()) == ["error", "timeout"]
    waited = next(r for r in result.values() if r["status"] == "error")
    assert waited["error"] == ("waited 40 s for 1 node(s) with CPU 4 each and never started; "
                               "its Ray task was cancelled")
    assert waited["notebook"] is None and not (run_dir / "cases" / f"{waited['case']}.ipynb").exists()


def test_interrupted_ray_gate_leaves_no_kernel_behind(tmp_path, embedded, ray4):
    pidfile = tmp_path / "sleeper.pids"
    sleepy = write_notebook(tmp_path / "sleepy.ipynb", SLEEPER.format(pidfile=str(pidfile)))
    cases = {"sleeps": {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(sleepy), "timeout_s": 300}}
    run_dir = tmp_path / "run"
    gate = subprocess.Popen(ray4.command(sys.executable, "-m", "kit.cli", "gate", "--executor", "ray",
                                         write_descriptor(tmp_path, embedded, cases=cases), "--out", run_dir),
                            stderr=subprocess.PIPE, text=True, env=ray4.env(), cwd=ROOT)
    deadline = time.monotonic() + 120
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pidfile.exists(), "the sleeping case never started"
    gate.send_signal(signal.SIGINT)  # nsenter passes it on to the gate
    _, stderr = gate.communicate(timeout=90)
    assert gate.returncode == 130, stderr
    assert "parity-kit: interrupted" in stderr
    assert wait_gone(map(int, pidfile.read_text().split()), STOPPED_WITHIN_S) == []
    # Once, on a loaded host, the interrupted case's record was missing: say what the run kept and logged.
    kept = sorted(p.name for p in (run_dir / "cases").iterdir()) if (run_dir / "cases").is_dir() else []
    assert (run_dir / "cases" / "sleeps.json").is_file(), (kept, stderr[-3000:])
    recorded = json.loads((run_dir / "cases" / "sleeps.json").read_text())
    assert recorded["status"] == "error" and recorded["error_kind"] == "interrupted"
    # The task's own record when it stopped the kernel in time, else the driver's (a loaded machine).
    shown = f"{run_dir}/cases/sleeps.ipynb"
    assert recorded["error"] in (f"interrupted; its kernel was killed; partial notebook {shown}",
                                 f"interrupted; its Ray task was cancelled; partial notebook {shown}")
    # The run's result counts it as the error it recorded, not as a case that went missing.
    result = json.loads((run_dir / "result.json").read_text())
    assert result["cases"]["sleeps"]["status"] == "error", result


GANG_PROBE = """import json, os, pathlib, ray
from ray.util.placement_group import placement_group_table
from kit.case.placement import case_placement_group
group = case_placement_group()
table = placement_group_table(group)
pathlib.Path({out!r}).write_text(json.dumps({{
    "name": os.environ["PARITY_KIT_PLACEMENT_GROUP"], "strategy": table["strategy"], "state": table["state"],
    "nodes": sorted(table["bundles_to_node_id"].values())}}))
ray.shutdown()"""


def test_two_node_case_is_one_placement_group(tmp_path, embedded):
    probe = tmp_path / "probe.json"
    gang = write_notebook(tmp_path / "gang.ipynb", GANG_PROBE.format(out=str(probe)), RUN_THE_CASE)
    hf = embedded.doc["cases"]["hf-bf16"]
    cases = {"pp2": {**hf, "notebook": trusted(gang), "resources": {"nodes": 2, "num_cpus": 1}},
             "pp3": {**hf, "resources": {"nodes": 3, "num_cpus": 1}}}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    run_dir = tmp_path / "run"
    with short_temp("c") as temp:
        cluster = RayInNamespace(temp, nodes=2, num_cpus=1)  # two Ray nodes, one CPU each
        try:
            proc = cluster.gate(desc, "--out", run_dir, "--no-summary")
        finally:
            cluster.stop()
    assert proc.returncode == 2, proc.stderr
    result = result_of(run_dir)["cases"]
    assert result["pp2"]["status"] == "passed", result["pp2"].get("error")

    placed = manifest_of(run_dir)["placements"]["pp2"]
    assert placed["strategy"] == "STRICT_SPREAD"
    assert placed["bundles"] == [{"CPU": 1.0}, {"CPU": 1.0}]
    assert len(set(placed["nodes"])) == 2, "one bundle per node"
    # The kernel saw the same group, already placed as a whole; the notebook ran on bundle 0's node.
    seen = json.loads(probe.read_text())
    assert seen["name"] == placed["name"] and seen["state"] == "CREATED"
    assert seen["strategy"] == "STRICT_SPREAD" and seen["nodes"] == sorted(placed["nodes"])
    attempt = json.loads((run_dir / "cases" / "pp2.attempts.jsonl").read_text())
    assert attempt["node"] == placed["nodes"][0]

    # A gang the cluster can never hold is an error at once, not a wait forever.
    assert result["pp3"]["status"] == "error"
    assert result["pp3"]["error"] == ("cannot be placed: needs 3 node(s) with CPU 1 each; "
                                      "2 of the Ray cluster's 2 alive node(s) have that")
