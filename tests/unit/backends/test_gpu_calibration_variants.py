"""Which clean variants hf and jax cases calibrate with on a GPU, where some CPU variants cannot run.

On the H200, the math SDPA kernel and XLA's reference attention hold [heads, seq, seq] scores and run a
32K prompt out of memory, the memory-efficient kernel refuses grouped-query heads unless they are
repeated, and XLA's excess-precision flag changed no bit of the results (docs/gpu-figures.md).
"""

from __future__ import annotations

import pytest

from kit.backends.hf.options import HfOptions
from kit.backends.jax.options import JaxOptions
from kit.calibrate.run import variants_for
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from support import write_descriptor

pytestmark = pytest.mark.unit


def names(options) -> list[str]:
    return [v["name"] + (f"@{v['launch']}" if v.get("launch", 1) > 1 else "") for v in options.calibration_variants()]


def overrides(options) -> dict[str, dict]:
    return {v["name"]: v["overrides"] for v in options.calibration_variants() if v.get("launch", 1) == 1}


def test_hf_on_a_gpu_swaps_the_math_kernel_for_flash_and_repeats_kv_for_the_efficient_kernel():
    gpu = HfOptions(dtype="bfloat16", device="cuda", compile=True)
    assert names(gpu) == ["as-set", "batched-2-right", "batched-4-left", "batched-8-right", "batched-8-left",
                          "uncompiled", "sdpa-flash", "sdpa-efficient", "as-set@2"]
    assert overrides(gpu)["sdpa-efficient"] == {"attn_implementation": "sdpa_repeat_kv", "sdpa_backend": "efficient"}
    assert overrides(gpu)["sdpa-flash"] == {"attn_implementation": "sdpa", "sdpa_backend": "flash"}
    assert overrides(HfOptions(dtype="bfloat16", device="cuda:1"))["compiled"] == {"compile": True}


def test_hf_on_cpu_keeps_the_math_kernel_and_compiles_nothing():
    assert names(HfOptions(dtype="bfloat16")) == ["as-set", "batched-2-right", "batched-4-left", "batched-8-right",
                                                  "batched-8-left", "sdpa-math", "as-set@2"]


def test_jax_on_a_gpu_varies_the_attention_between_cudnn_and_chunked_only():
    assert names(JaxOptions(dtype="bfloat16", platform="gpu")) == ["as-set", "attention-chunked", "as-set@2"]
    assert names(JaxOptions(dtype="bfloat16", platform="gpu", attention="chunked")) == [
        "as-set", "attention-cudnn", "as-set@2"]
    # float32 has no cuDNN kernel: "auto" is the chunked attention already, and nothing else can run.
    assert names(JaxOptions(dtype="float32", platform="gpu")) == ["as-set", "as-set@2"]


def test_jax_on_cpu_adds_the_rounding_variant():
    assert names(JaxOptions(dtype="bfloat16")) == [
        "as-set", "attention-xla", "attention-chunked", "rounded", "as-set@2"]
    assert overrides(JaxOptions(dtype="bfloat16"))["rounded"] == {"excess_precision": False}
    assert overrides(JaxOptions(dtype="bfloat16", excess_precision=False))["excess-precision"] == {
        "excess_precision": True}


def test_more_launches_add_fresh_launches_of_the_case_as_set_only():
    # XLA's autotuning gives jax on a GPU another answer in most fresh launches: each is another sample.
    gpu = JaxOptions(dtype="bfloat16", platform="gpu")
    assert [v["name"] + (f"@{v['launch']}" if v.get("launch", 1) > 1 else "")
            for v in gpu.calibration_variants(5)] == [
        "as-set", "attention-chunked", "as-set@2", "as-set@3", "as-set@4", "as-set@5"]
    assert all(v["overrides"] == {} for v in gpu.calibration_variants(5) if v.get("launch", 1) > 1)
    assert names(gpu) == names(gpu)[:2] + ["as-set@2"]  # two launches unless the descriptor asks for more
    assert [v["name"] for v in gpu.calibration_variants(1)] == ["as-set", "attention-chunked"]


def test_a_case_asks_for_its_launches_in_the_descriptor(tmp_path, embedded):
    # The descriptor, not a flag, says it: `baseline make --again` and `power` measure what calibrate measured.
    case = {**embedded.doc["cases"]["hf-bf16"], "calibration_launches": 4}
    desc = load_descriptor(write_descriptor(tmp_path, embedded, cases={"hf-bf16": case}))
    spec = resolve(desc, ["hf-bf16"], resolve_calibration=False).case("hf-bf16").spec
    assert spec.calibration_launches == 4
    launches = [v.get("launch", 1) for v in variants_for(spec)]
    assert launches[-3:] == [2, 3, 4] and launches.count(1) == len(launches) - 3
    assert resolve(load_descriptor(embedded.descriptor), ["hf-bf16"]).case("hf-bf16").spec.calibration_launches == 2
