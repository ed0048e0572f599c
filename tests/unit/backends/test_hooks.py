"""What a command does differently per backend comes from the backend's BackendInfo hooks, never from a test
of its name: the golden maker's options, the remake line's flags, the activations localize reads, where the
reference runs, which engine a refresh builds. A backend without a hook is refused in one line."""

from __future__ import annotations

import dataclasses

import pytest

from kit.backends import registry
from kit.backends.base import BackendInfo
from kit.case.localize import backends_text, in_own_kernel, reference_options, refusal, require_activations
from kit.cli import main
from kit.core.errors import BadInput
from kit.descriptor.load import load_descriptor
from kit.goldens.make import GoldenRequest, make_golden_document, request
from kit.refresh.qualify import pick_backend
from support import write_descriptor

pytestmark = pytest.mark.unit

CLI = request("bfloat16", "eager", "native", "cuda:1", 4, "avx2")  # golden make's options, none the defaults


def test_each_golden_maker_takes_the_command_line_options_that_apply_to_it():
    assert registry.get("hf").golden_case_options(CLI) == {
        "dtype": "bfloat16", "attn_implementation": "eager", "device": "cuda:1", "batch_size": 4, "cpu_kernels": "avx2"}
    assert registry.get("levanter").golden_case_options(CLI) == {"checkpoint": "native", "device": "cuda:1"}
    # A plugin that makes goldens with no golden_options hook runs its runtime's own defaults.
    plugin = BackendInfo(name="toy", summary="", runtime="toy.runtime", options="toy.options:O", makes_goldens=True)
    assert plugin.golden_case_options(CLI) == {}


def test_a_backend_that_makes_no_goldens_is_refused_before_anything_runs(embedded):
    with pytest.raises(BadInput) as refused:
        make_golden_document(GoldenRequest(embedded.model, "no/such/fixture.json", "semantic", 25, [], backend="vllm"))
    assert str(refused.value) == "backend vllm makes no goldens"


def test_the_remake_line_carries_the_flags_its_backend_names():
    hf = {"backend": "hf", "dtype": "bfloat16", "attention": "sdpa",
          "release": {"device": "cpu", "cpu_kernels": "avx2"}}
    assert registry.get("hf").remake_flags(hf) == ["--dtype", "bfloat16", "--cpu-kernels", "avx2"]
    assert registry.get("hf").remake_flags(hf, {"cpu_kernels": "native"}) == ["--dtype", "bfloat16"]
    native = {"backend": "levanter", "release": {"checkpoint": "native"}}
    assert registry.get("levanter").remake_flags(native) == ["--checkpoint", "native"]
    assert registry.get("levanter").remake_flags({"backend": "levanter", "release": {"checkpoint": "hf"}}) == []
    assert registry.get("vllm").remake_flags({"backend": "vllm"}) == []


def test_localize_reads_the_backends_that_register_activations_and_refuses_the_others():
    assert backends_text() == "hf, jax or levanter"
    with pytest.raises(BadInput) as refused:
        require_activations("vllm", "vllm-pp1")
    assert str(refused.value) == ("case vllm-pp1 runs on vllm, which exposes no per-layer activations to localize: "
                                  "localize on hf, jax or levanter")
    assert in_own_kernel("levanter") and not in_own_kernel("hf") and not in_own_kernel("jax")


def test_localize_help_lists_the_backends_that_register_activations(capsys):
    with pytest.raises(SystemExit):
        main(["localize", "--help"])
    assert registry.localizable() == ["hf", "jax", "levanter"]
    assert "Backends that expose per-layer\nactivations: hf, jax, levanter.\n" in capsys.readouterr().out


def test_the_reference_runs_where_the_case_does_in_the_references_words(embedded):
    specs = {s.name: s for s in load_descriptor(embedded.descriptor).case_specs(["hf-bf16", "levanter-native"])}
    hf = dataclasses.replace(specs["hf-bf16"], options={**specs["hf-bf16"].options, "device": "cpu", "threads": 2})
    assert reference_options(hf) == {"dtype": "float32", "attn_implementation": "sdpa", "device": "cpu", "threads": 2}
    jax = dataclasses.replace(hf, backend="jax", options={"dtype": "bfloat16", "platform": "gpu", "attention": "auto"})
    assert reference_options(jax) == {"dtype": "float32", "attn_implementation": "sdpa", "device": "cuda"}
    # Levanter's activations say which of its cases the reference cannot follow.
    assert refusal(specs["levanter-native"]).startswith("reads a native Levanter checkpoint, which the hf float32 ")
    assert refusal(specs["hf-bf16"]) is None


def test_a_refresh_builds_the_forked_engine_of_a_pin_with_several(tmp_path, embedded):
    def pin(*names):
        backends = {n: {"kernel": "parity-kit", "version": "1"} for n in names}
        desc = write_descriptor(tmp_path / "-".join(names), embedded,
                                releases={"current": {"description": "pin", "backends": backends}})
        return load_descriptor(desc)

    assert pick_backend(pin("hf", "vllm"), "current", None) == "vllm"
    assert pick_backend(pin("hf"), "current", None) == "hf"
    with pytest.raises(BadInput, match="has backends hf, jax; say which one the fork builds"):
        pick_backend(pin("hf", "jax"), "current", None)
