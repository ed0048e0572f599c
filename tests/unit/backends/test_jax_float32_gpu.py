"""The jax backend's float32 GPU path without jax: how the chunked attention splits a prompt into query blocks,
and which XLA options a float32 GPU program gets (docs/gpu-figures.md, "jax-f32 on the H200")."""

from __future__ import annotations

import pytest

from kit.backends.jax import llama
from kit.backends.jax.runtime import float32_gpu_options

pytestmark = pytest.mark.unit


def test_query_blocks_grow_to_at_most_sixteen_per_prompt_and_divide_it():
    assert llama.QUERY_BLOCK == 512 and llama.MAX_BLOCKS == 16
    assert llama.query_block(256) == 256  # one block: 512 does not divide it
    assert llama.query_block(1024) == 512
    assert llama.query_block(8192) == 512  # 16 blocks
    assert llama.query_block(16384) == 1024
    assert llama.query_block(32768) == 2048
    assert llama.query_block(20480) == 2048  # 10 blocks: 4096 would not divide it
    assert llama.query_block(3000) == 3000


def test_only_float32_on_a_gpu_leaves_triton_gemm_for_cublas():
    assert float32_gpu_options("float32", "gpu") == {"xla_gpu_enable_triton_gemm": False}
    assert float32_gpu_options("bfloat16", "gpu") == {}  # its calibrated records were measured with XLA's defaults
    assert float32_gpu_options("float32", "cpu") == {}
