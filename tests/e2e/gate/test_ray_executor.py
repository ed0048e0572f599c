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


# Every case of the embedded descriptor runs on Ray, split over two tests. `make test` runs one case of each backend
# and golden kind there: hf's exact and semantic cases, Levanter's, and vLLM's offline engine. The other four (hf's
# and vLLM's decode cases, Levanter's native checkpoint, vLLM's two-stage server) are `make test-slow`'s: the
# whole gate on Ray is a long-running check (5-10 minutes on a loaded 2-core machine, every kernel and engine
# started cold in Ray's workers), each of the four is a second case of a backend the first test runs on Ray, and
# what is particular to them (decoding, the native checkpoint, the server) is the kernel's, not the executor's,
# and passes in `make test` in the session's local run of the embedded gate (support.shared).
ON_RAY_IN_MAKE_TEST = ("checkpoint", "hf-bf16", "levanter", "vllm-pp1")


def the_ray_run_gives_the_local_results(tmp_path, tmp_path_factory, cases: list[str]) -> None:
    # The local run is the session's one run of the embedded gate (support.shared), read only here.
    local, proc = embedded_gate_run(tmp_path_factory)
    on_ray = tmp_path / "ray"
    assert proc.returncode == 0, proc.stderr
    with short_temp("g") as temp:
        # No RAY_ADDRESS: the gate starts a Ray for the run and must stop it afterwards.
        # The cases on Ray while the other worker runs its own engines: a loaded 2-core machine took over
        # 600 s once for all of them, so the gate gets the test's whole budget.
        selected = [arg for name in cases for arg in ("--case", name)]
        proc = gate_in_own_namespace("--out", on_ray, *selected, temp=temp, timeout=1300)
        assert processes_under(temp) == [], "the Ray started for the run outlived it"
    assert proc.returncode == 0, proc.stderr
    assert "on a Ray started for this run" in proc.stderr
    a, b = result_of(local), result_of(on_ray)
    assert a["verdict"] == b["verdict"] == "passed"
    assert set(b["cases"]) == set(cases) and set(cases) <= set(a["cases"])
    for name in b["cases"]:
        ca, cb = a["cases"][name], b["cases"][name]
        assert (ca["status"], ca["counts"], ca["inputs_digest"]) == (cb["status"], cb["counts"], cb["inputs_digest"])
        assert [{k: p[k] for k in PROMPT_METRICS} for p in ca["prompts"]] == \
               [{k: p[k] for k in PROMPT_METRICS} for p in cb["prompts"]], name
    assert manifest_of(on_ray)["executor"] == "ray"
    assert "PASSED" in (on_ray / "summary.html").read_text()


# A full gate (local) and a gate of four cases on Ray in one test: every backend's kernels and engines start.
@pytest.mark.levanter
@pytest.mark.vllm
@pytest.mark.timeout(1500)
def test_tiny_gate_on_ray_gives_the_local_results(tmp_path, tmp_path_factory):
    the_ray_run_gives_the_local_results(tmp_path, tmp_path_factory, list(ON_RAY_IN_MAKE_TEST))


@pytest.mark.slow  # why: ON_RAY_IN_MAKE_TEST's comment
@pytest.mark.levanter
@pytest.mark.vllm
@pytest.mark.timeout(1500)
def test_the_rest_of_the_tiny_gate_on_ray_gives_the_local_results(tmp_path, tmp_path_factory, embedded):
    rest = [name for name in embedded.doc["cases"] if name not in ON_RAY_IN_MAKE_TEST]
    assert rest, "the embedded descriptor has no case beyond those make test runs on Ray"
    the_ray_run_gives_the_local_results(tmp_path, tmp_path_factory, rest)


def test_make_test_runs_one_case_of_each_backend_and_golden_kind_on_ray(embedded):
    cases = embedded.doc["cases"]
    assert set(ON_RAY_IN_MAKE_TEST) <= set(cases)
    assert {cases[n]["backend"] for n in ON_RAY_IN_MAKE_TEST} == {c["backend"] for c in cases.values()}
    assert {cases[n]["golden"] for n in ON_RAY_IN_MAKE_TEST} == {"exact", "semantic"}
