"""Exact baselines end to end, on every machine: the checkpoint case in float64 rounded to float32 takes the one
portable golden and passes bit for bit whatever kernels the host chooses, a tiny weight change fails it, a float32
golden holds only on the CPU that made it (its key names that CPU), and a case no listed baseline holds for reads
"no baseline": exit 7, a skipped JUnit case, never failed. A GPU no record lists is no baseline too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kit.core.model.modeldigest import model_digest
from kit.core.host.portable import PORTABLE_RUNTIME
from support import ROOT, copy_model, edit_weight, parity_kit, write_descriptor

UNNAMED_CPU_GOLDEN = "44a3d799c03b-tiny-llama-1163a351b5ae-exact-cpu-avx2-pinned.json"
# Kernel choices every x86-64 host with AVX2 allows, each another code path for float32: ATen's scalar kernels,
# oneDNN's SSE4.1 code with MKL's compatible branch, the AVX2 pin, and two threads.
KERNEL_CHOICES = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "COMPATIBLE"}


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory, embedded):
    tmp = tmp_path_factory.mktemp("baselines")
    faulty = copy_model(embedded, tmp / "faulty")
    # One weight of one layer 2^-20 larger: far inside any semantic bound, and still another model.
    edit_weight(faulty, "model.layers.1.mlp.down_proj.weight", lambda w: w * (1 + 2.0 ** -20))
    goldens_dir = embedded.goldens["exact"].parent
    made_here = tmp / "goldens"
    proc = parity_kit("golden", "make", "--model", embedded.model, "--fixture", embedded.fixture, "--kind", "exact",
                      "--top-k", "25", "--out", made_here)
    assert proc.returncode == 0, proc.stderr
    (float32_here,) = made_here.glob("*-exact-rt-*.json")
    checkpoint = embedded.doc["cases"]["checkpoint"]
    cases = {"portable": checkpoint,
             "portable-faulty": {**checkpoint, "model": "faulty"},
             "float32-here": {**checkpoint, "dtype": "float32"},
             "float32-unnamed-cpu": {**checkpoint, "dtype": "float32", "cpu_kernels": "avx2"}}
    exact = [embedded.goldens["exact"], goldens_dir / UNNAMED_CPU_GOLDEN, float32_here]
    desc = write_descriptor(tmp, embedded, goldens={"semantic": embedded.goldens["semantic"], "exact": exact},
                            models={"faulty": {"path": str(faulty), "digest": model_digest(faulty)}}, cases=cases)
    run_dir, junit = tmp / "run", tmp / "junit.xml"
    # The whole gate under other kernels than the host's own: the portable case must not notice.
    proc = parity_kit("gate", desc, "--out", run_dir, "--junit", junit, env={**os.environ, **KERNEL_CHOICES})
    return proc, run_dir, junit, desc


def results(run_dir):
    return json.loads((run_dir / "result.json").read_text())


def test_the_portable_case_passes_bit_for_bit_under_other_kernels(baseline_run, embedded):
    proc, run_dir, _, _ = baseline_run
    case = results(run_dir)["cases"]["portable"]
    assert case["status"] == "passed", proc.stderr
    assert case["golden_path"] == str(embedded.goldens["exact"]) and case["max_probability_error"] == 0.0
    assert case["release"]["cpu_capability"] == "DEFAULT" and case["release"]["dtype"] == "float64"


def test_a_tiny_weight_change_fails_the_portable_case(baseline_run):
    _, run_dir, _, _ = baseline_run
    case = results(run_dir)["cases"]["portable-faulty"]
    assert case["status"] == "failed"
    failing = [p for p in case["prompts"] if not p["passed"]]
    assert len(failing) == 64 and all(0 < p["max_probability_error"] < 1e-3 for p in failing)
    assert all(any(m.startswith(f"{p['id']}: ") and "not bit-exact" in m for m in case["failures"]) for p in failing)


def test_a_float32_golden_holds_on_the_cpu_that_made_it_with_its_kernels(baseline_run):
    _, run_dir, _, _ = baseline_run
    # Made by `golden make` on the host's own kernels; the gate ran under others, so its key is another runtime.
    case = results(run_dir)["cases"]["float32-here"]
    assert case["status"] == "no-baseline" and not case["prompts"]
    assert case["error"].startswith("no baseline for this runtime: goldens.exact (")
    assert "aten=default onednn=sse41 mkl=COMPATIBLE threads=1 cpu=" in case["error"]


def test_a_float32_golden_keyed_without_its_cpu_holds_nowhere(baseline_run):
    proc, run_dir, junit, _ = baseline_run
    doc = results(run_dir)
    assert doc["verdict"] == "failed"  # the faulty case decides first
    unnamed = doc["cases"]["float32-unnamed-cpu"]
    assert unnamed["status"] == "no-baseline" and not unnamed["prompts"]
    assert unnamed["remedy"].startswith("parity-kit golden make --model ")
    assert "--cpu-kernels avx2" in unnamed["remedy"] and f"`{unnamed['remedy']}`" in unnamed["error"]
    assert not (run_dir / "cases" / "float32-unnamed-cpu.ipynb").exists()  # nothing ran
    evidence = (run_dir / "evidence.md").read_text()
    assert "- `float32-unnamed-cpu` (hf): **no baseline**, not judged: no baseline for this runtime" in evidence
    (suite,) = ET.parse(junit).getroot().findall("testsuite")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "0", "2")
    (skipped,) = suite.find("testcase[@name='float32-unnamed-cpu']").findall("skipped")
    assert skipped.get("type") == "no-baseline"


def test_on_the_hosts_own_kernels_the_float32_golden_holds_and_the_verdict_is_no_baseline_exit_7(baseline_run,
                                                                                                   tmp_path):
    _, _, _, desc = baseline_run
    proc = parity_kit("gate", desc, "--case", "portable", "--case", "float32-here", "--case", "float32-unnamed-cpu",
                      "--out", tmp_path / "run", "--no-summary")
    assert proc.returncode == 7, proc.stderr
    doc = results(tmp_path / "run")
    assert doc["verdict"] == "no-baseline"
    assert [doc["cases"][c]["status"] for c in ("portable", "float32-here", "float32-unnamed-cpu")] == \
        ["passed", "passed", "no-baseline"]
    assert "gate no-baseline: 1 without a baseline, 2 passed" in proc.stderr


def test_every_kernel_choice_of_this_host_reproduces_the_portable_golden(embedded):
    """The check a developer's machine runs: the float64 result rounded to float32 under ATen's, oneDNN's and MKL's
    other code paths and two threads, each in a fresh interpreter, equals the committed golden bit for bit."""
    configs = "native,aten default,onednn sse41,mkl compatible,avx2 pin,2 threads"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "exact_kernels.py"), "--dtypes", "float64",
                           "--configs", configs, "--golden", str(embedded.goldens["exact"])],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [r["configuration"] for r in rows] == configs.split(",")
    assert all(r["prompts_differing_from_golden"] == 0 and r["float64_prompts_differing"] == 0 for r in rows)
    # What makes it hold: every float64 move between kernels is far inside the golden's margin.
    assert all(r["float64_largest_move"] * 100 < r["margin"]["holds_within"] for r in rows), rows


def test_a_gpu_no_record_lists_is_no_baseline_not_an_error(tmp_path, embedded):
    """On a GPU node whose model no record of a case was measured on, the case is no-baseline, with the command that
    measures it; the other cases are judged and the gate exits 7. (The GPU is a stand-in list: the case never
    runs, so no GPU is needed.)"""
    record = gpu_record(embedded, tmp_path / "calibrations", "NVIDIA H200")
    gpu_case = {**{k: v for k, v in embedded.doc["cases"]["hf-bf16"].items() if k not in ("calibration", "power",
                                                                                            "accept_noise_changes")},
                "device": "cuda", "calibration": str(record)}
    desc = write_descriptor(tmp_path, embedded, cases={"checkpoint": embedded.doc["cases"]["checkpoint"],
                                                       "hf-gpu": gpu_case})
    fake = {"PARITY_KIT_FAKE_GPUS": "0, GPU-0, NVIDIA H100 80GB HBM3, 100, 81559", **os.environ}
    proc = parity_kit("gate", desc, "--out", tmp_path / "run", "--no-summary", env=fake)
    assert proc.returncode == 7, proc.stderr
    doc = results(tmp_path / "run")
    gpu = doc["cases"]["hf-gpu"]
    assert (doc["cases"]["checkpoint"]["status"], gpu["status"]) == ("passed", "no-baseline")
    assert gpu["error"].startswith("no baseline for this hardware: cases.hf-gpu (")
    assert "lists no calibration record measured on NVIDIA H100 80GB HBM3 (listed: NVIDIA H200)" in gpu["error"]
    assert gpu["remedy"] == f'parity-kit baseline make {desc} --case hf-gpu --reason "..."'
    assert not (tmp_path / "run" / "cases" / "hf-gpu.ipynb").exists()


def gpu_record(embedded, folder: Path, gpu: str) -> Path:
    """The embedded hf-bf16 record of this host's class, as if measured on ``gpu`` with a case on it (it loads:
    written canonically under its own digest, its figures its samples')."""
    from kit.core.noise.calibration import load_record
    from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes

    here = embedded.descriptor.parent
    source = (here / embedded.doc["cases"]["hf-bf16"]["calibration"][0]).resolve()
    assert load_record(source)  # a record that loads, to be moved onto the GPU
    doc = json.loads(source.read_text())
    doc["fingerprint"]["runtime"]["accelerator"] = {"name": gpu, "driver": "580"}
    doc["noise_class"] = {**doc["noise_class"], "device": "cuda"}
    data = canonical_bytes(doc)
    folder.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(folder / f"{sha256_bytes(data)}.json", data)


def test_the_portable_runtime_is_what_the_embedded_goldens_record(embedded):
    from kit.core.baselines.golden import load_golden

    assert load_golden(embedded.goldens["exact"]).provenance["runtime"] == PORTABLE_RUNTIME
