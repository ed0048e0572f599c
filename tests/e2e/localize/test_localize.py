"""`parity-kit localize` on the embedded model with layer-specific faults from the catalogue: it names the very
layer and sublayer each fault is written into, on hf, jax and Levanter, refuses a prompt that passes, and sends
a vLLM case to a backend that can expose its activations.

o_proj_scale scales layer 1's attention output projection, mlp_noise perturbs layer 0's MLP weights
(kit.faults.catalogue); both at a magnitude that fails hf-bf16. Each faulted copy stands for the case's own
model run by a faulty engine (--model).
"""

from __future__ import annotations

import json
import re

import pytest

from kit.core.records import paths
from kit.core.errors import BadInput
from kit.core.exitcodes import ExitCode
from kit.descriptor.load import load_descriptor
from kit.faults.cache import faulted_copy
from kit.faults.catalogue import fault
from kit.localize.run import localize_case
from support import parity_kit, write_descriptor

DESCRIPTOR = str(paths.EMBEDDED_DESCRIPTOR)


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    return tmp_path_factory.mktemp("faulted")


def model_with(name: str, magnitude: float, copies) -> str:
    own = load_descriptor(DESCRIPTOR).case_specs(["hf-bf16"])[0].model_path
    return str(faulted_copy(fault(name), magnitude, own, cache_dir=copies))


def localized_attention_fault(descriptor, case: str, out, copies) -> dict:
    """localize.json of ``case`` on layer 1's attention output projection scaled by 1.2, found there: with no
    --prompt the case runs on the candidate first and its worst failing prompts are localized."""
    proc = parity_kit("localize", descriptor, case, "--model", model_with("o_proj_scale", 0.2, copies), "--out", out)
    assert proc.returncode == ExitCode.PASSED, proc.stderr
    assert proc.stdout.splitlines() == ["first divergent: layer 1 attention", str(out.resolve())]
    doc = json.loads((out / "localize.json").read_text())
    assert doc["first_divergent"] == {"layer": 1, "sublayer": "attention", "label": "layer 1 attention"}
    for loc in doc["localizations"]:
        assert loc["verdict"] == "first divergent: layer 1 attention"
        # Before the fault the candidate is the clean run bit for bit; from it on, past 4 x the noise.
        assert [p["ratio"] for p in loc["points"][:3]] == [1.0, 1.0, 1.0]
        assert [p["diverged"] for p in loc["points"]] == [False, False, False, True, True]
    return doc


def test_a_scaled_attention_output_is_found_at_layer_1_attention_from_the_failing_prompts(tmp_path, copies):
    out = tmp_path / "loc"
    doc = localized_attention_fault(DESCRIPTOR, "hf-bf16", out, copies)
    assert len(doc["prompts"]) == 2 and all(p["failures"] for p in doc["prompts"])
    # For an issue comment: the verdict, each prompt's points, and the curve the notebook saved.
    proc = parity_kit("report", out, "--markdown")
    assert proc.returncode == 0, proc.stderr
    report = proc.stdout
    assert report.startswith("## Localize `hf-bf16` (hf): **first divergent: layer 1 attention**\n")
    assert report.count("| layer 1 attention | ") == 2 and "| **yes** |" in report
    assert (out / "figures" / "localize-curve.png").is_file() and "(figures/localize-curve.png)" in report
    notebook = json.loads((out / "localize.ipynb").read_text())
    outputs = [o for c in notebook["cells"] for o in c.get("outputs", [])]
    printed = "".join("".join(o.get("text", "")) for o in outputs if o.get("name") == "stdout")
    assert printed.splitlines()[-1] == "first divergent: layer 1 attention"
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the curve


@pytest.fixture(scope="module")
def jax_bf16(tmp_path_factory, embedded) -> dict:
    """The jax backend in bfloat16 under a bound its clean run keeps with room: twice the largest error of its
    clean run on this host. A bound read off another host's run need not hold here: XLA compiles for the
    CPU it runs on, and bfloat16 rounding moves with the kernels."""
    tmp = tmp_path_factory.mktemp("jax-clean")
    case = {"backend": "jax", "golden": "semantic", "bound": 1.0, "dtype": "bfloat16"}
    proc = parity_kit("gate", write_descriptor(tmp, embedded, cases={"jax-bf16": case}), "--out", tmp / "run",
                      "--no-summary")
    assert proc.returncode == 0, proc.stderr
    clean = json.loads((tmp / "run" / "result.json").read_text())["cases"]["jax-bf16"]["max_probability_error"]
    assert 0 < clean < 1.0  # bfloat16 against the float32 golden: close, never bit for bit
    return {**case, "bound": 2 * clean}


def test_a_jax_case_names_the_faulted_layer_against_the_hf_float32_reference(tmp_path, copies, embedded, jax_bf16):
    desc = write_descriptor(tmp_path, embedded, cases={"jax-bf16": jax_bf16})
    doc = localized_attention_fault(desc, "jax-bf16", tmp_path / "loc", copies)
    assert doc["backend"] == "jax" and doc["reference"].startswith("hf float32")
    assert doc["reference_options"] == {"dtype": "float32", "attn_implementation": "sdpa", "device": "cpu"}


@pytest.mark.levanter
def test_a_levanter_case_is_localized_in_its_own_environment(tmp_path, copies):
    # Levanter's stream is read in its kernel's interpreter (its pins conflict with the main environment).
    doc = localized_attention_fault(DESCRIPTOR, "levanter", tmp_path / "loc", copies)
    assert doc["backend"] == "levanter"
    clean = [p["clean"][loc["metric"]] for loc in doc["localizations"] for p in loc["points"][1:]]
    assert max(clean) < 1e-5  # float32 against the float32 reference: Levanter's noise is rounding alone


def test_a_native_levanter_case_is_refused_before_anything_runs(tmp_path):
    proc = parity_kit("localize", DESCRIPTOR, "levanter-native", "--out", tmp_path / "loc")
    assert proc.returncode == ExitCode.BAD_INPUT
    assert proc.stderr == ("parity-kit: bad input: case levanter-native reads a native Levanter checkpoint, which the "
                           "hf float32 reference cannot load: localize a case of the same weights in the HF format\n")
    assert not (tmp_path / "loc").exists()


def test_a_noised_mlp_is_found_at_layer_0_mlp_on_the_named_prompt(tmp_path, copies):
    run = localize_case(DESCRIPTOR, "hf-bf16", ["tool-atlas-07"], model=model_with("mlp_noise", 0.2, copies),
                        out=tmp_path / "loc", notebook=False)
    assert run.verdict == "first divergent: layer 0 mlp"
    doc = json.loads((run.out / "localize.json").read_text())
    assert [p["id"] for p in doc["prompts"]] == ["tool-atlas-07"]
    (loc,) = doc["localizations"]
    assert [p["diverged"] for p in loc["points"]] == [False, False, True, True, True]
    assert loc["points"][1]["ratio"] == 1.0  # layer 0's attention is untouched by the MLP's fault


def test_a_prompt_that_passes_is_refused_and_nothing_is_written(tmp_path):
    # The case's own, healthy model: every prompt passes on any host the gate passes on, where which prompts a
    # fault leaves passing depends on how close to its bound each one lands on this host.
    out = tmp_path / "loc"
    proc = parity_kit("localize", DESCRIPTOR, "hf-bf16", "--prompt", "chat-sharegpt-00", "--out", out)
    assert proc.returncode == ExitCode.BAD_INPUT, proc.stderr
    assert re.fullmatch(r"parity-kit: bad input: prompt chat-sharegpt-00 passes case hf-bf16 \(error [0-9.e-]+ "
                        r"under bound [0-9.]+\): nothing to localize\n", proc.stderr), proc.stderr
    assert proc.stdout == ""
    assert not out.exists()


def test_a_vllm_case_is_refused_naming_the_hf_case_to_localize_on(tmp_path):
    proc = parity_kit("localize", DESCRIPTOR, "vllm-pp1", "--out", tmp_path / "loc")
    assert proc.returncode == ExitCode.BAD_INPUT
    assert proc.stderr == ("parity-kit: bad input: case vllm-pp1 runs on vllm, which exposes no per-layer "
                           "activations: localize on hf, jax or levanter instead, with the same dtype "
                           "(in this descriptor: "
                           "hf-bf16, hf-bf16-decode)\n")
    assert not (tmp_path / "loc").exists()


def test_a_prompt_the_case_does_not_score_is_refused(tmp_path):
    with pytest.raises(BadInput, match="case hf-bf16 scores no prompt 'no-such-prompt'"):
        localize_case(DESCRIPTOR, "hf-bf16", ["no-such-prompt"], out=tmp_path / "loc", notebook=False)
