"""A gate stopped by a signal (a cancelled CI job's SIGTERM, a closed terminal's SIGHUP, a Ctrl-C that a
background job inherited as ignored) ends every kernel with the processes under it and records its case."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from support import SLEEPER, survivors, trusted, write_descriptor, write_notebook


def sleeping_gate(tmp_path, embedded, *extra, preexec_fn=None):
    """A gate whose one case sleeps in a kernel that started worker processes (one already adopted by
    init); returns the gate's process, its run directory and the kernel's and the workers' pids once the
    case runs."""
    pidfile = tmp_path / "sleeper.pids"
    sleepy = write_notebook(tmp_path / "sleepy.ipynb", SLEEPER.format(pidfile=str(pidfile)))
    cases = {"sleeps": {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(sleepy), "timeout_s": 300}}
    run_dir = tmp_path / "run"
    gate = subprocess.Popen([sys.executable, "-m", "kit.cli", "gate", write_descriptor(tmp_path, embedded, cases=cases),
                             "--out", run_dir, *map(str, extra)], stderr=subprocess.PIPE, text=True,
                            preexec_fn=preexec_fn)
    deadline = time.monotonic() + 120
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if not pidfile.exists():
        gate.kill()
        pytest.fail(f"the sleeping case never started: {gate.communicate()[1]}")
    time.sleep(0.2)  # the pids are written in one call, but let the file close
    return gate, run_dir, list(map(int, pidfile.read_text().split()))


def interrupted_line(run_dir) -> str:
    return f"interrupted; its kernel was killed; partial notebook {run_dir}/cases/sleeps.ipynb"


@pytest.mark.parametrize("signum, code, said", [
    (signal.SIGTERM, 143, "parity-kit: stopped by SIGTERM"),
    (signal.SIGHUP, 129, "parity-kit: stopped by SIGHUP"),
])
def test_terminated_gate_ends_its_kernel_tree_and_records_the_case(tmp_path, embedded, signum, code, said):
    junit = tmp_path / "junit.xml"
    gate, run_dir, pids = sleeping_gate(tmp_path, embedded, "--junit", junit)
    gate.send_signal(signum)
    _, stderr = gate.communicate(timeout=60)
    assert gate.returncode == code, stderr
    assert stderr.strip().splitlines()[-1] == said
    # The gate waits for them: nothing of the case, nor of the kernel's session, outlives its return.
    assert survivors(pids) == [], "the kernel and every process it started must be gone"

    recorded = json.loads((run_dir / "cases" / "sleeps.json").read_text())
    assert (recorded["status"], recorded["error"]) == ("error", interrupted_line(run_dir))
    assert (run_dir / "cases" / "sleeps.ipynb").is_file()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "incomplete"
    assert result["cases"]["sleeps"]["status"] == "error"
    assert "`sleeps` (hf): **error**: interrupted; its kernel was killed" in (run_dir / "evidence.md").read_text()
    assert json.loads((run_dir / "manifest.json").read_text())["finished_at"] is not None
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("errors")) == ("1", "1")


def test_gate_started_with_sigint_ignored_still_stops_on_sigint(tmp_path, embedded):
    """As `nohup make test &` starts it: SIGINT inherited as ignored."""
    gate, run_dir, pids = sleeping_gate(tmp_path, embedded,
                                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    gate.send_signal(signal.SIGINT)
    _, stderr = gate.communicate(timeout=60)
    assert gate.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "parity-kit: interrupted"
    assert survivors(pids) == []
    recorded = json.loads((run_dir / "cases" / "sleeps.json").read_text())
    assert (recorded["status"], recorded["error"]) == ("error", interrupted_line(run_dir))
    assert json.loads((run_dir / "result.json").read_text())["verdict"] == "incomplete"
