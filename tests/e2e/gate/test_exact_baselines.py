"""Exact baselines end to end on a second host class made inside the suite: the checkpoint case with torch's
kernels forced down to AVX2 (what an AVX2 host runs) takes the pinned golden and passes bit for bit on any
x86-64 host with AVX2, a tiny weight change fails it, and the same case on the host's own kernels finds no
golden of its runtime listed and reads "no baseline for this runtime": exit 7, a skipped JUnit case."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from kit.backends.hf.kernels import exact_runtime
from kit.core.modeldigest import model_digest
from support import copy_model, edit_weight, parity_kit, write_descriptor

PINNED_GOLDEN = "44a3d799c03b-tiny-llama-1163a351b5ae-exact-cpu-avx2-pinned.json"


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory, embedded):
    tmp = tmp_path_factory.mktemp("baselines")
    faulty = copy_model(embedded, tmp / "faulty")
    # One weight of one layer 2^-20 larger: far inside any semantic bound, and still another model.
    edit_weight(faulty, "model.layers.1.mlp.down_proj.weight", lambda w: w * (1 + 2.0 ** -20))
    pinned = embedded.goldens["exact"].parent / PINNED_GOLDEN
    checkpoint = embedded.doc["cases"]["checkpoint"]
    cases = {"pinned": {**checkpoint, "cpu_kernels": "avx2"},
             "pinned-faulty": {**checkpoint, "cpu_kernels": "avx2", "model": "faulty"},
             "native": {**checkpoint, "cpu_kernels": "native"}}
    desc = write_descriptor(tmp, embedded, goldens={"semantic": embedded.goldens["semantic"], "exact": [pinned]},
                            models={"faulty": {"path": str(faulty), "digest": model_digest(faulty)}}, cases=cases)
    run_dir, junit = tmp / "run", tmp / "junit.xml"
    proc = parity_kit("gate", desc, "--out", run_dir, "--junit", junit)
    return proc, run_dir, junit, pinned


def results(run_dir):
    return json.loads((run_dir / "result.json").read_text())


def test_forced_avx2_kernels_take_the_pinned_golden_and_pass_bit_for_bit(baseline_run):
    proc, run_dir, _, pinned = baseline_run
    case = results(run_dir)["cases"]["pinned"]
    assert case["status"] == "passed", proc.stderr
    assert case["golden_path"] == str(pinned) and case["max_probability_error"] == 0.0
    assert case["release"]["cpu_capability"] == "AVX2" and case["release"]["cpu_kernels"] == "avx2"


def test_a_tiny_weight_change_fails_the_pinned_case(baseline_run):
    _, run_dir, _, _ = baseline_run
    case = results(run_dir)["cases"]["pinned-faulty"]
    assert case["status"] == "failed"
    failing = [p for p in case["prompts"] if not p["passed"]]
    assert failing and all(0 < p["max_probability_error"] < 1e-3 for p in failing)
    assert all(any(m.startswith(f"{p['id']}: ") and "not bit-exact" in m for m in case["failures"]) for p in failing)


def test_the_hosts_own_kernels_have_no_baseline_listed_and_say_how_to_make_one(baseline_run):
    proc, run_dir, junit, _ = baseline_run
    doc = results(run_dir)
    assert doc["verdict"] == "failed"  # the faulty case decides first
    native = doc["cases"]["native"]
    assert native["status"] == "no-baseline" and not native["prompts"]
    assert native["error"].startswith("no baseline for this runtime: goldens.exact (")
    assert f"made on {exact_runtime({})}; its goldens were made on {exact_runtime({'cpu_kernels': 'avx2'})}" in \
        native["error"]
    assert "`parity-kit golden make --model " in native["error"] and native["error"].endswith("and add it to the list")
    assert not (run_dir / "cases" / "native.ipynb").exists()  # nothing ran
    evidence = (run_dir / "evidence.md").read_text()
    assert "- `native` (hf): **no baseline**, not judged: no baseline for this runtime" in evidence
    (suite,) = ET.parse(junit).getroot().findall("testsuite")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "0", "1")
    (skipped,) = suite.find("testcase[@name='native']").findall("skipped")
    assert skipped.get("type") == "no-baseline"


def test_without_the_failing_case_the_verdict_is_no_baseline_exit_7(baseline_run, tmp_path):
    _, run_dir, _, _ = baseline_run
    proc = parity_kit("gate", run_dir / ".." / "test.toml", "--case", "pinned", "--case", "native",
                      "--out", tmp_path / "run", "--no-summary")
    assert proc.returncode == 7, proc.stderr
    doc = results(tmp_path / "run")
    assert doc["verdict"] == "no-baseline"
    assert [doc["cases"][c]["status"] for c in ("pinned", "native")] == ["passed", "no-baseline"]
    assert "gate no-baseline: 1 without a baseline, 1 passed" in proc.stderr
