"""What an eager vLLM engine on CPU compiles: nothing. Its sampler's one torch.compile'd count (the sampled token's
rank) is run eagerly, so the first request does not wait for Inductor to build C++ for it; a compiled engine
(the two-stage server, a GPU) keeps torch.compile."""

from __future__ import annotations

import dataclasses

import pytest

from kit.backends.vllm.engine import EAGER_CPU_ENV, engine_settings
from kit.core.records.paths import DESCRIPTORS
from kit.descriptor.load import load_descriptor

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def specs():
    return {s.name: s for s in load_descriptor(DESCRIPTORS / "tiny-cpu.toml").case_specs(
        ["vllm-pp1", "vllm-pp1-decode", "vllm-pp2"])}


def test_an_eager_engine_on_cpu_compiles_nothing(specs):
    for name in ("vllm-pp1", "vllm-pp1-decode"):
        settings = engine_settings(specs[name], cuda=False)
        assert settings.engine_args["enforce_eager"] is True
        assert EAGER_CPU_ENV.items() <= settings.env.items(), name


def test_a_compiled_engine_and_a_gpu_keep_torch_compile(specs):
    pp1 = specs["vllm-pp1"]
    compiled = dataclasses.replace(pp1, options={**pp1.options, "enforce_eager": False})
    for settings in (engine_settings(specs["vllm-pp2"], cuda=False), engine_settings(compiled, cuda=False),
                     engine_settings(pp1, cuda=True)):
        assert not EAGER_CPU_ENV.keys() & settings.env.keys()


def test_a_case_may_turn_compiling_back_on(specs):
    pp1 = specs["vllm-pp1"]
    chosen = dataclasses.replace(pp1, options={**pp1.options, "env": {"TORCH_COMPILE_DISABLE": "0"}})
    assert engine_settings(chosen, cuda=False).env["TORCH_COMPILE_DISABLE"] == "0"

