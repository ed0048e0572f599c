"""The gate on Ray, for real, inside a loopback-only network namespace (see rayns.py): the embedded gate on a Ray
the gate starts for the run, against the local executor's results. The gate joining a Ray the tests start (faults,
waits, gangs) is tests/e2e/gate/test_ray_cluster.py: two modules, so that pytest-xdist's two workers run them side
by side."""

from __future__ import annotations

import json

import pytest

from support.rayns import gate_in_own_namespace, processes_under, short_temp
from support.shared import embedded_gate_run

PROMPT_METRICS = ("id", "passed", "max_probability_error", "top_probability_l1_error", "kl_shared",
                  "backend_top", "failures")


def result_of(run_dir):
    return json.loads((run_dir / "result.json").read_text())


def manifest_of(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


# Two full six-case gates (local, then Ray) in one test: 5-10 minutes on a loaded 2-core machine. Every case of
# the embedded descriptor runs, Levanter's and vLLM's among them.
@pytest.mark.levanter
@pytest.mark.vllm
@pytest.mark.timeout(1500)
def test_tiny_gate_on_ray_gives_the_local_results(tmp_path, tmp_path_factory, embedded):
    # The local run is the session's one run of the embedded gate (support.shared), read only here.
    local, proc = embedded_gate_run(tmp_path_factory)
    on_ray = tmp_path / "ray"
    assert proc.returncode == 0, proc.stderr
    with short_temp("g") as temp:
        # No RAY_ADDRESS: the gate starts a Ray for the run and must stop it afterwards.
        # All six cases on Ray while the other worker runs its own engines: a loaded 2-core machine took over
        # 600 s once, so the gate gets the test's whole budget.
        proc = gate_in_own_namespace("--out", on_ray, temp=temp, timeout=1300)
        assert processes_under(temp) == [], "the Ray started for the run outlived it"
    assert proc.returncode == 0, proc.stderr
    assert "on a Ray started for this run" in proc.stderr
    a, b = result_of(local), result_of(on_ray)
    assert a["verdict"] == b["verdict"] == "passed"
    assert set(a["cases"]) == set(b["cases"]) == set(embedded.doc["cases"])
    for name in a["cases"]:
        ca, cb = a["cases"][name], b["cases"][name]
        assert (ca["status"], ca["counts"], ca["inputs_digest"]) == (cb["status"], cb["counts"], cb["inputs_digest"])
        assert [{k: p[k] for k in PROMPT_METRICS} for p in ca["prompts"]] == \
               [{k: p[k] for k in PROMPT_METRICS} for p in cb["prompts"]], name
    assert manifest_of(on_ray)["executor"] == "ray"
    assert "PASSED" in (on_ray / "summary.html").read_text()
