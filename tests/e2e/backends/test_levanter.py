"""The levanter backend, for real: its own environment and kernel, the HF export and the native checkpoint.

Case runs go through the CLI and the Levanter kernel; what needs JAX in-process runs in
.venv-levanter through tests/levanter_probe.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from kit.core.records import paths
from kit.core.baselines.golden import load_golden
from kit.core.model.modeldigest import model_digest
from support import ROOT, copy_model, edit_weight, parity_kit, write_descriptor

LEVANTER_PYTHON = ROOT / ".venv-levanter" / "bin" / "python"
PROBE = ROOT / "tests" / "support" / "levanter_probe.py"
NATIVE = "tiny-llama-levanter"


def probe(*args) -> dict:
    assert LEVANTER_PYTHON.is_file(), f"{LEVANTER_PYTHON} does not exist: run `make env` (make test does)"
    proc = subprocess.run([str(LEVANTER_PYTHON), str(PROBE), *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def result_of(run_dir) -> dict:
    return json.loads((run_dir / "result.json").read_text())


def gate_one(tmp_path, embedded, name: str, returncode: int, **descriptor) -> tuple[dict, dict]:
    """One case through the real gate; its exit code checked; the gate result and the case's result."""
    desc = write_descriptor(tmp_path, embedded, cases={name: embedded.doc["cases"][name]}, **descriptor)
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == returncode, proc.stderr
    result = result_of(run_dir)
    return result, result["cases"][name]


def levanter_case(embedded, **changes) -> dict:
    return {**embedded.doc["cases"]["levanter"], **changes}


def test_levanter_environment_is_reused_as_it_is():
    # Reuse is proven by what the script did (nothing), not by how fast a loaded machine ran it.
    proc = subprocess.run([str(ROOT / "scripts" / "ensure-levanter-env.sh")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout == ""  # nothing installed, nothing registered
    spec = json.loads((ROOT / ".venv" / "share" / "jupyter" / "kernels" / paths.LEVANTER_KERNEL
                       / "kernel.json").read_text())
    assert spec["argv"][0] == str(LEVANTER_PYTHON)


@pytest.fixture(scope="module")
def levanter_run(tmp_path_factory, embedded):
    """The embedded levanter cases, plus one that names its attention per bucket explicitly."""
    tmp = tmp_path_factory.mktemp("levanter")
    cases = {
        "levanter": embedded.doc["cases"]["levanter"],
        "levanter-native": embedded.doc["cases"]["levanter-native"],
        "levanter-chosen": levanter_case(embedded, flash_above=4096, attention={"256": "flash"}),
    }
    run_dir = tmp / "run"
    proc = parity_kit("gate", write_descriptor(tmp, embedded, cases=cases), "--out", run_dir, "--no-summary")
    return run_dir, proc


def test_levanter_cases_pass_on_the_tiny_model(levanter_run, embedded):
    run_dir, proc = levanter_run
    assert proc.returncode == 0, proc.stderr
    cases = result_of(run_dir)["cases"]
    for name, case in cases.items():
        assert case["status"] == "passed", (name, case["failures"])
        assert case["counts"] == {"prompts": 64, "passed": 64, "failed": 0}
        assert case["release"]["levanter"] == "1.1" and case["release"]["jax"] == "0.4.20"
    # float32 JAX against the float32 torch golden: rounding only, far inside the bound.
    assert 0 < cases["levanter"]["max_probability_error"] < 1e-5
    # The checkpoint control: the native checkpoint computes, bit for bit, what the HF export of its weights
    # computes through Levanter in the same kernel; that reference is kept as an exact golden beside the result.
    assert cases["levanter-native"]["max_probability_error"] == 0.0
    assert cases["levanter-native"]["details"]["checkpoint"] == "native"
    reference = run_dir / "cases" / "levanter-native.reference.json"
    assert cases["levanter-native"]["golden_path"] == str(reference)
    golden = load_golden(reference)
    assert golden.kind == "exact" and golden.provenance["backend"] == "levanter"
    assert golden.provenance["release"]["checkpoint"] == "hf" and golden.provenance["runtime"].startswith("xla-cpu ")
    assert golden.model_digest == embedded.doc["model"]["digest"] and len(golden.prompts) == 64
    assert cases["levanter-native"]["golden_sha256"] == golden.sha256
    assert cases["levanter"]["details"]["checkpoint"] == "hf"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["models"] == {NATIVE: cases["levanter-native"]["model_digest"]}


def test_attention_is_chosen_per_bucket_and_recorded(levanter_run):
    run_dir, _ = levanter_run
    cases = result_of(run_dir)["cases"]
    # tiny-cpu scales the real gate's threshold (flash above 4096) down to flash above 512.
    assert cases["levanter"]["details"]["attention"] == {
        "128": "reference", "256": "reference", "512": "reference", "1024": "flash"}
    # An explicit choice for one bucket; the others follow the rule (reference through 4096).
    assert cases["levanter-chosen"]["details"]["attention"] == {
        "128": "reference", "256": "flash", "512": "reference", "1024": "reference"}
    assert cases["levanter-chosen"]["options"]["attention"] == {"256": "flash"}
    for case in cases.values():
        assert case["details"]["padded_to_bucket"] is True
        assert set(case["details"]["timing_s"]) == {"128", "256", "512", "1024"}


def test_padding_and_flash_attention_change_no_result(embedded):
    out = probe("compare", embedded.model, embedded.fixture)
    # Padding to the bucket and flash attention reorder float32 sums: the same top tokens, in the
    # same order, and probabilities equal to rounding (measured: about 2e-7).
    assert all(out["padding_same_tokens"]) and len(out["prompts"]) == 4
    assert 0 < out["padding_max_delta"] < 1e-5
    assert all(out["flash_same_tokens"])
    assert 0 < out["flash_max_delta"] < 1e-5
    # Each option really took effect: a nonzero difference above, and the backends ran what was asked.
    buckets = {"128": 128, "256": 256, "512": 512, "1024": 1024}
    padded, unpadded, flash = out["padded_details"], out["unpadded_details"], out["flash_details"]
    assert padded["padded_to_bucket"] is True and padded["length"] == buckets
    assert unpadded["padded_to_bucket"] is False and unpadded["length"] == out["n_tokens"]
    assert all(out["n_tokens"][b] < n for b, n in buckets.items())  # so padding added positions
    assert padded["attention"] == unpadded["attention"] == {b: "reference" for b in buckets}
    assert flash["attention"] == {b: "flash" for b in buckets}


def test_perturbed_model_fails_the_levanter_case_with_the_prompts_named(tmp_path, embedded):
    model = copy_model(embedded, tmp_path / "faulty")
    edit_weight(model, "model.layers.1.self_attn.v_proj.weight", lambda w: w * 0.5)
    result, case = gate_one(tmp_path, embedded, "levanter", 1, model=model, model_digest=model_digest(model))
    assert result["verdict"] == "failed"
    assert case["status"] == "failed"
    failed = [p for p in case["prompts"] if not p["passed"]]
    assert len(failed) >= 5, "the fixture is chosen so that this fault fails many prompts"
    line = re.compile(r"^(?P<id>[a-z0-9-]+): (max probability error [0-9.e-]+ > bound 0\.075 \(bucket \d+\)"
                      r"|winner changed outside a near-tie: .*|backend greedy token \d+ is not in the golden top-25"
                      r"|golden token \d+ is missing from the backend's top-64)$")
    named = {line.match(m).group("id") for m in case["failures"]}
    assert named == {p["id"] for p in failed}
    worst = max(failed, key=lambda p: p["max_probability_error"])
    assert (f"{worst['id']}: max probability error {worst['max_probability_error']:.4g} > bound 0.075 "
            f"(bucket {worst['bucket']})") in case["failures"]
    made_from, scored = embedded.doc["model"]["digest"][:12], model_digest(model)[:12]
    assert case["notes"] == [f"golden {embedded.goldens['semantic'].name} was made from model {made_from}, "
                             f"this case scores model {scored}"]
    evidence = (tmp_path / "run" / "evidence.md").read_text()
    assert f"`levanter` (levanter): **failed** on {len(failed)} of 64 prompts" in evidence


def test_a_rope_base_levanter_cannot_compute_is_refused_not_ignored(tmp_path, embedded):
    # Levanter 1.1 hard-codes RoPE base 10000; scoring this model would silently compute another one.
    model = copy_model(embedded, tmp_path / "rope")
    cfg = json.loads((model / "config.json").read_text())
    cfg["rope_parameters"]["rope_theta"] = 20000.0
    (model / "config.json").write_text(json.dumps(cfg))
    _, case = gate_one(tmp_path, embedded, "levanter", 2, model=model, model_digest=model_digest(model))
    assert case["status"] == "error"
    assert case["error"].startswith(f"cell 3 raised BadInput: model folder {model}: config.json asks for "
                                    "RoPE base 20000 (Levanter 1.1 hard-codes 10000); partial notebook ")
    # Typed where it arose, in the Levanter kernel: a refusal, never retried as the job's.
    assert case["error_kind"] == "bad-input" and case["triage"]["class"] == "case-error" and case["attempts"] == []


def test_missing_levanter_kernel_is_one_line_with_the_install_command(tmp_path, embedded):
    cases = {"levanter": levanter_case(embedded, kernel="levanter-1.2-candidate")}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    hint = ("levanter runs in an environment of its own (scripts/ensure-levanter-env.sh (its own venv and kernel)); "
            "register this kernel from the environment that holds that release: python -m ipykernel install "
            f"--prefix {sys.prefix} --name levanter-1.2-candidate")
    assert lines == [f"parity-kit: bad input: {desc}:{_line_of(desc, '[cases.levanter]')}: case levanter needs kernel "
                     f"'levanter-1.2-candidate', which is not installed; {hint}"]
    assert not (tmp_path / "run").exists()

    listing = parity_kit("kernels", desc)
    assert listing.returncode == 1
    assert listing.stdout.splitlines() == [
        f"levanter-1.2-candidate: MISSING: {hint}; cases: test:levanter"]


def test_kernels_lists_every_kernel_of_the_embedded_descriptor():
    proc = parity_kit("kernels")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert set(rows) == {paths.MAIN_KERNEL, paths.LEVANTER_KERNEL}
    assert rows[paths.LEVANTER_KERNEL].startswith("installed (")
    assert rows[paths.LEVANTER_KERNEL].endswith("cases: tiny-cpu:levanter, tiny-cpu:levanter-native")


def _native_copy(tmp_path, embedded, factor: float):
    out = tmp_path / "tampered-native"
    probe("tamper", embedded.models[NATIVE]["path"], out, "lm_head", factor)
    return out


def test_native_checkpoint_whose_tensors_differ_fails_its_in_kernel_reference(tmp_path, embedded):
    native = _native_copy(tmp_path, embedded, 1.0001)  # far below any semantic bound, still not the same
    models = {NATIVE: {"path": str(native), "digest": model_digest(native)}}
    _, case = gate_one(tmp_path, embedded, "levanter-native", 1, models=models)
    assert case["status"] == "failed"
    assert case["counts"]["failed"] == 64
    assert all(p["exact_match"] is False for p in case["prompts"])
    assert case["max_probability_error"] < 0.01  # a semantic golden would have let this through
    first = case["prompts"][0]["id"]
    assert case["failures"][0].startswith(f"{first}: ")


def test_native_checkpoint_digest_is_pinned(tmp_path, embedded):
    native = _native_copy(tmp_path, embedded, 1.0001)
    pinned = embedded.models[NATIVE]["digest"]
    desc = write_descriptor(tmp_path, embedded, models={NATIVE: {"path": str(native), "digest": pinned}},
                            cases={"levanter-native": embedded.doc["cases"]["levanter-native"]})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3
    actual = model_digest(native)
    n = _line_of(desc, f"[models.{NATIVE}]") + 2  # the digest line of that table
    assert proc.stderr.strip() == (f"parity-kit: bad input: {desc}:{n}: model folder {native} has digest "
                                   f"{actual[:16]}..., but {pinned[:16]}... is pinned (full: {actual} != {pinned})")


def test_hf_export_digest_is_checked_inside_the_levanter_kernel(tmp_path, embedded):
    """Run by hand (JupyterLab), the case checks the folder itself: no preflight stands in front of it."""
    from kit.descriptor.load import load_descriptor

    model = copy_model(embedded, tmp_path / "model")
    edit_weight(model, "lm_head.weight", lambda w: w * 1.5)
    spec = load_descriptor(paths.EMBEDDED_DESCRIPTOR).case_specs(["levanter"])[0].to_dict()
    spec["model_path"] = str(model)
    out = probe("run-case", json.dumps(spec))
    actual, pinned = model_digest(model), embedded.doc["model"]["digest"]
    assert out == {"refused": f"case levanter: model folder {model} has digest {actual[:16]}..., "
                              f"but {pinned[:16]}... is pinned (full: {actual} != {pinned})"}


def _line_of(path, needle):
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_attention_for_an_unknown_bucket_or_implementation_is_refused(tmp_path, embedded):
    cases = {"levanter": levanter_case(embedded, attention={"2048": "flash"})}
    proc = parity_kit("gate", write_descriptor(tmp_path, embedded, cases=cases), "--out", tmp_path / "run")
    assert proc.returncode == 3
    assert proc.stderr.strip().endswith("case levanter: bucket 2048 is not in the fixture "
                                        "(buckets: 128, 256, 512, 1024)")

    desc = write_descriptor(tmp_path, embedded, cases={"levanter": levanter_case(embedded, attention={"1024": "fast"})})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3
    n = _line_of(desc, '1024 = "fast"')
    assert proc.stderr.strip() == (f"parity-kit: bad input: {desc}:{n}: cases.levanter.attention.1024: "
                                   "expected 'reference' or 'flash', got 'fast'")


def test_a_case_naming_an_unknown_model_or_golden_is_refused(tmp_path, embedded):
    native = embedded.doc["cases"]["levanter-native"]
    desc = write_descriptor(tmp_path, embedded, cases={"levanter-native": {**native, "model": "tiny-llama-levantr"}})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3
    n = _line_of(desc, 'model = "tiny-llama-levantr"')
    assert proc.stderr.strip() == (f"parity-kit: bad input: {desc}:{n}: cases.levanter-native.model: no [models] "
                                   f"entry 'tiny-llama-levantr' (have: {NATIVE})")

    hf_export = embedded.doc["cases"]["levanter"]
    desc = write_descriptor(tmp_path, embedded, cases={"levanter": {**hf_export, "golden": "levanter-exakt"}})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3
    n = _line_of(desc, 'golden = "levanter-exakt"')
    assert proc.stderr.strip() == (f"parity-kit: bad input: {desc}:{n}: cases.levanter.golden: no [goldens] "
                                   "entry 'levanter-exakt' (have: semantic, decode-semantic, exact)")

    goldens = {**embedded.goldens, "levanter": embedded.goldens["exact"]}
    desc = write_descriptor(tmp_path, embedded, goldens=goldens, cases={"levanter-native": native})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3
    assert proc.stderr.strip() == (f"parity-kit: bad input: {desc}:{_line_of(desc, '[goldens]')}: goldens: entry "
                                   "'levanter' must be named semantic or exact, or end in -semantic or -exact")
