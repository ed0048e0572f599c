"""The GPU model generator's own pieces: bfloat16 rounding, the weight stream, the tokenizer, the descriptor.

The 3 GB model itself is built and its pinned digest checked on the GPU node (scripts/gpu-checks.sh).
"""

from __future__ import annotations

import importlib.util
import io
import json

import numpy as np
import pytest
import torch

from kit.core.records import paths
from kit.core.model.safetensors_io import read_tensors, write_tensors
from kit.descriptor.load import load_descriptor
from support import ROOT

spec = importlib.util.spec_from_file_location("make_gpu_model", ROOT / "scripts" / "make_gpu_model.py")
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)


def test_bfloat16_rounding_matches_torch():
    x = np.random.default_rng(1).standard_normal(100_000).astype(np.float32) * 3
    ours = gen.to_bfloat16_bits(x)
    theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(ours, theirs)


def test_weights_are_a_fixed_function_of_seed_and_name():
    a = gen.tensor_bytes(7, "w", (64, 32), 0.02)
    assert a == gen.tensor_bytes(7, "w", (64, 32), 0.02)
    assert a != gen.tensor_bytes(8, "w", (64, 32), 0.02) and a != gen.tensor_bytes(7, "v", (64, 32), 0.02)
    values = np.frombuffer(a, dtype="<u2").astype(np.uint32) << 16
    floats = values.view(np.float32)
    assert abs(floats.std() - 0.02) < 0.002 and np.abs(floats).max() <= 0.02 * 3 ** 0.5 + 1e-3


def test_written_file_reads_back_and_loads_in_safetensors(tmp_path):
    from safetensors.torch import load_file

    buf = io.BytesIO()
    specs = [("a", (3, 5), 0.1), ("b", (4,), None)]
    write_tensors(buf, [(n, "BF16", s, lambda n=n, s=s, d=d: gen.tensor_bytes(1, n, s, d)) for n, s, d in specs])
    path = tmp_path / "m.safetensors"
    path.write_bytes(buf.getvalue())
    ours, theirs = read_tensors(path), load_file(str(path))
    assert theirs["b"].tolist() == [1.0] * 4
    assert np.array_equal(ours["a"].astype(np.float32), theirs["a"].float().numpy())


def test_tokenizer_maps_each_word_to_its_id():
    import json

    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(json.dumps(gen.tokenizer()))
    assert tok.encode("w5 w128255 w2").ids == [5, 128255, 2]
    assert tok.get_vocab_size() == gen.VOCAB


def test_gpu_descriptor_validates_and_names_the_fixture_in_the_repo():
    desc = load_descriptor(paths.DESCRIPTORS / "gpu-h200.toml")
    specs = desc.case_specs()
    assert {s.backend for s in specs} == {"hf", "jax"}
    # Each case holds one GPU of its own: the local executor runs them side by side where there are several.
    assert {desc.resources(s.name).num_gpus for s in specs} == {1.0}
    from kit.core.records.fixture import load_fixture

    fixture = load_fixture(specs[0].fixture_path)
    assert fixture.buckets == [4096, 16384, 32768]
    assert max(c.n_tokens for c in fixture.prompts) == 32768


@pytest.mark.parametrize("bucket", [4096, 16384, 32768])
def test_fixture_prompts_are_the_generators(bucket):
    from kit.core.records.fixture import load_fixture

    fixture = load_fixture(load_descriptor(paths.DESCRIPTORS / "gpu-h200.toml").case_specs()[0].fixture_path)
    lengths = sorted((c.n_tokens for c in fixture.prompts if c.bucket == bucket), reverse=True)
    assert tuple(lengths) == tuple(sorted(gen.PROMPT_LENGTHS[bucket], reverse=True))


def test_gate_shaped_descriptor_has_the_real_gates_buckets_and_the_generators_prompts():
    from kit.core.records.fixture import load_fixture

    desc = load_descriptor(paths.DESCRIPTORS / "gpu-h200-64.toml")
    specs = {s.name: s for s in desc.case_specs()}
    assert set(specs) == {"hf-f32", "hf-bf16", "jax-f32", "jax-bf16"}
    fixture = load_fixture(specs["hf-bf16"].fixture_path)
    assert fixture.buckets == [256, 1024, 4096, 16384, 32768] and len(fixture.prompts) == 64
    for bucket, lengths in gen.gate_lengths().items():
        assert sorted(c.n_tokens for c in fixture.prompts if c.bucket == bucket) == sorted(lengths)
    assert {p["id"]: p["prompt"] for p in gen.prompts("gate")} == {c.id: c.prompt for c in fixture.prompts}
    # The production case takes its bounds from the record measured on the H200, per bucket.
    assert specs["hf-bf16"].bound is None and set(specs["hf-bf16"].bucket_bounds) == {
        "256", "1024", "4096", "16384", "32768"}


def test_two_gpu_descriptor_splits_jax_over_both_beside_one_gpu_cases(tmp_path):
    """gpu-h200-x2 scores gpu-h200-64's model, fixture and golden; its sharded case asks for the two GPUs it
    splits the model over, and the model's heads divide by two (checked on its config, the model itself is
    not committed)."""
    from kit.backends.jax.options import JaxOptions

    x2 = load_descriptor(paths.DESCRIPTORS / "gpu-h200-x2.toml")
    base = load_descriptor(paths.DESCRIPTORS / "gpu-h200-64.toml")
    specs = {s.name: s for s in x2.case_specs()}
    assert list(specs) == ["jax-bf16", "hf-bf16", "jax-bf16-tp2"]
    assert {n: (x2.resources(n).num_gpus, s.options.get("tensor_parallel")) for n, s in specs.items()} == {
        "jax-bf16": (1.0, 1), "hf-bf16": (1.0, None), "jax-bf16-tp2": (2.0, 2)}
    ref = base.case_specs()[0]
    assert {(s.model_path, s.model_digest, s.fixture_path, s.golden_path) for s in specs.values()} == {
        (ref.model_path, ref.model_digest, ref.fixture_path, ref.golden_path)}
    assert specs["hf-bf16"].bucket_bounds == {s.name: s for s in base.case_specs()}["hf-bf16"].bucket_bounds
    (tmp_path / "config.json").write_text(json.dumps(gen.config()))
    assert JaxOptions.model_problem(specs["jax-bf16-tp2"].options, tmp_path) is None
    assert JaxOptions.model_problem({"tensor_parallel": 16}, tmp_path).startswith(
        "tensor_parallel = 16 does not divide")
