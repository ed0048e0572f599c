"""Which clean variants hf and jax cases calibrate with on a GPU, where some CPU variants cannot run.

On the H200, the math SDPA kernel and XLA's reference attention hold [heads, seq, seq] scores and run a
32K prompt out of memory, the memory-efficient kernel refuses grouped-query heads unless they are
repeated, and XLA's excess-precision flag changed no bit of the results (docs/gpu-figures.md).
"""

from __future__ import annotations

import pytest

from kit.backends.hf.options import HfOptions
from kit.backends.jax.options import JaxOptions

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
