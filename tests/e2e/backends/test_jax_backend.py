"""The jax backend on CPU: the plain JAX Llama agrees with transformers in float32.

Tolerance 1e-5 in probability: both are float32 forwards of the same weights that
sum in different orders; on the tiny model they differ by about 1e-7. A wrong
rotary convention, norm placement or attention mask moves probabilities by 1e-2
or more.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from kit.backends.hf.runtime import HfBackend
from kit.backends.jax.llama import shape_from_config
from kit.backends.jax.runtime import JaxBackend, choose_attention, choose_padding, padded_length
from kit.core.records.fixture import load_fixture
from kit.core.model.safetensors_io import read_tensors
from support import ROOT, parity_kit

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def cases(embedded):
    fixture = load_fixture(embedded.fixture)
    # Two per bucket, the shortest and the longest: padding to the bucket is widest for the first.
    out = []
    for b in fixture.buckets:
        cs = sorted((c for c in fixture.prompts if c.bucket == b), key=lambda c: c.n_tokens)
        out += [cs[0], cs[-1]]
    return out


@pytest.fixture(scope="module")
def hf_f32(embedded, cases):
    return HfBackend(str(embedded.model), dtype="float32").observe(cases, top_n=20)


def largest_difference(ref, obs) -> float:
    po = dict(obs.top_logprobs)
    assert [t for t, _ in ref.top_logprobs[:5]] == [t for t, _ in obs.top_logprobs[:5]], ref.prompt_id
    return max(abs(math.exp(lp) - math.exp(po[t])) for t, lp in ref.top_logprobs[:15])


@pytest.mark.parametrize("attention", ["auto", "chunked"])
def test_jax_float32_agrees_with_hf(embedded, cases, hf_f32, attention):
    backend = JaxBackend(str(embedded.model), dtype="float32", attention=attention)
    observed = backend.observe(cases, top_n=20)
    worst = max(largest_difference(a, b) for a, b in zip(hf_f32, observed))
    assert worst < TOLERANCE
    expected = {"auto": "xla", "chunked": "chunked"}[attention]
    assert set(backend.details()["attention"].values()) == {expected}
    assert [o.n_tokens for o in observed] == [c.n_tokens for c in cases]


def test_jax_bfloat16_stays_within_the_gate_bound(embedded, cases, hf_f32):
    observed = JaxBackend(str(embedded.model), dtype="bfloat16").observe(cases, top_n=64)
    for ref, obs in zip(hf_f32, observed):
        po = dict(obs.top_logprobs)
        assert max(abs(math.exp(lp) - math.exp(po[t])) for t, lp in ref.top_logprobs[:10]) < 0.075


def test_rounding_at_every_operation_is_another_bfloat16_result_and_says_so(embedded, cases, hf_f32):
    """On CPU, XLA's fusion skips bfloat16 roundings by default; without excess precision it rounds where the
    program does, which moves logits (on the tiny model by up to about 0.03) but stays bfloat16 noise."""
    default = JaxBackend(str(embedded.model), dtype="bfloat16")
    rounded = JaxBackend(str(embedded.model), dtype="bfloat16", excess_precision=False)
    a, b = default.observe(cases, top_n=20), rounded.observe(cases, top_n=20)
    assert any(x.top_logprobs != y.top_logprobs for x, y in zip(a, b))
    assert "excess_precision" not in default.release() and rounded.release()["excess_precision"] is False
    for ref, obs in zip(hf_f32, b):
        po = dict(obs.top_logprobs)
        assert max(abs(math.exp(lp) - math.exp(po[t])) for t, lp in ref.top_logprobs[:10] if t in po) < 0.075


def test_chunked_attention_spans_several_query_blocks(embedded, cases, hf_f32, monkeypatch):
    """With blocks of 64 rows a 1024-token prompt crosses 16 block boundaries; the result must not move."""
    import kit.backends.jax.llama

    monkeypatch.setattr(kit.backends.jax.llama, "QUERY_BLOCK", 64)
    longest = [i for i, c in enumerate(cases) if c.bucket == 1024]
    backend = JaxBackend(str(embedded.model), dtype="float32", attention="chunked")
    observed = backend.observe([cases[i] for i in longest], top_n=20)
    assert max(largest_difference(hf_f32[i], o) for i, o in zip(longest, observed)) < TOLERANCE


@pytest.mark.parametrize("attention", ["chunked_causal_attention", "looped_causal_attention"])
def test_chunked_attention_is_exact_causal_attention_over_grouped_heads(monkeypatch, attention):
    """Query block i reads keys [0, (i + 1) * block) only (unrolled, or looped: one key block at a time up to the
    diagonal, its softmax kept online), and query head h reads key/value head h // group: against XLA's reference
    attention (every key, k and v repeated) on 4 query heads over 2 key/value heads, in 16 blocks, the difference
    is float32 rounding."""
    import jax

    import kit.backends.jax.llama

    monkeypatch.setattr(kit.backends.jax.llama, "QUERY_BLOCK", 64)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    q = jax.random.normal(keys[0], (1, 1024, 4, 32))
    k, v = (jax.random.normal(key, (1, 1024, 2, 32)) for key in keys[1:])
    ours = getattr(kit.backends.jax.llama, attention)(q, k, v, jax.lax.Precision.HIGHEST)
    reference = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
    assert kit.backends.jax.llama.query_block(1024) == 64
    assert float(abs(ours - reference).max()) < 1e-5


@pytest.mark.parametrize("free, expected", [(None, "chunked"), (10 ** 12, "chunked"), (1, "chunked-looped")])
def test_the_chunked_attention_runs_its_blocks_one_at_a_time_where_they_would_not_fit(
        embedded, cases, hf_f32, monkeypatch, free, expected):
    """What the device has left decides (a CPU says nothing: the unrolled blocks); either way the scores agree with
    hf to float32 rounding, and the details say which ran and what the unrolled program asked for."""
    import kit.backends.jax.llama
    import kit.backends.jax.runtime

    monkeypatch.setattr(kit.backends.jax.llama, "QUERY_BLOCK", 64)
    monkeypatch.setattr(kit.backends.jax.runtime, "memory_budget", lambda device: free)
    longest = [i for i, c in enumerate(cases) if c.bucket == 1024]
    backend = JaxBackend(str(embedded.model), dtype="float32", attention="chunked")
    observed = backend.observe([cases[i] for i in longest], top_n=20)
    assert max(largest_difference(hf_f32[i], o) for i, o in zip(longest, observed)) < TOLERANCE
    details = backend.details()
    assert details["attention"] == {"1024": expected}
    assert ("chunked_program_bytes" in details) == (free is not None)
    if free is not None:
        assert details["chunked_program_bytes"]["1024"] > 0


def test_attention_choice():
    assert choose_attention("auto", "bfloat16", "gpu", 32768) == "cudnn"
    assert choose_attention("auto", "float32", "gpu", 4096) == "chunked"
    assert choose_attention("auto", "float32", "cpu", 1024) == "xla"
    assert choose_attention("auto", "float32", "cpu", 32768) == "chunked"
    assert choose_attention("xla", "float32", "gpu", 32768) == "xla"


def test_padding_choice():
    # float32 on a GPU pads long buckets in quarter steps; bfloat16 keeps its bucket (its records' shapes).
    assert choose_padding("auto", "float32", "gpu") == "steps"
    assert choose_padding("auto", "bfloat16", "gpu") == choose_padding("auto", "float32", "cpu") == "bucket"
    assert choose_padding("steps", "float32", "cpu") == "steps"
    assert [padded_length(n, 32768, "steps") for n in (16385, 24576, 24577, 32768, 40000)] == [
        24576, 24576, 32768, 32768, 40000]
    assert [padded_length(n, 16384, "steps") for n in (4097, 8193)] == [4096 * 2, 12288]
    assert padded_length(300, 4096, "steps") == padded_length(300, 4096, "bucket") == 4096  # short buckets: one shape
    assert padded_length(17000, 32768, "bucket") == 32768


def test_steps_padding_scores_a_long_bucket_prompt_shorter_and_the_same(embedded, cases, hf_f32, monkeypatch):
    """A short prompt of a long bucket (1024 tokens here, long from 1024 on) scored at its quarter step and at the
    whole bucket: right padding behind the causal mask moves no real position, so both agree with hf to float32
    rounding, and the stepped one ran a program a quarter of the bucket's length."""
    import kit.backends.jax.runtime

    monkeypatch.setattr(kit.backends.jax.runtime, "STEPS_FROM", 1024)
    long = [dataclasses.replace(cases[0], bucket=1024)]
    assert long[0].n_tokens <= 256
    stepped = JaxBackend(str(embedded.model), dtype="float32", padding="steps")
    whole = JaxBackend(str(embedded.model), dtype="float32", padding="bucket")
    a, b = stepped.observe(long, top_n=20), whole.observe(long, top_n=20)
    assert [seq for seq, _ in stepped._compiled] == [256] and [seq for seq, _ in whole._compiled] == [1024]
    assert largest_difference(hf_f32[0], a[0]) < TOLERANCE and largest_difference(hf_f32[0], b[0]) < TOLERANCE
    assert stepped.release()["padding"] == "steps" and "padding" not in whole.release()


def test_reader_matches_the_safetensors_package(embedded):
    from safetensors.numpy import load_file

    ours = read_tensors(embedded.model / "model.safetensors")
    theirs = load_file(str(embedded.model / "model.safetensors"))
    assert set(ours) == set(theirs)
    for name, array in theirs.items():
        assert ours[name].dtype == array.dtype and np.array_equal(ours[name], array), name


def test_unimplemented_configs_are_refused(embedded):
    config = json.loads((embedded.model / "config.json").read_text())
    assert shape_from_config(config).head_dim == 32
    scaled = {**config, "rope_parameters": {"rope_theta": 5e5, "rope_type": "llama3", "factor": 8.0}}
    with pytest.raises(ValueError, match="llama3"):
        shape_from_config(scaled)
    with pytest.raises(ValueError, match="bias"):
        shape_from_config({**config, "attention_bias": True})


def test_the_jax_descriptor_passes_the_real_gate_and_keeps_its_compiled_programs(tmp_path):
    # Its case names one attention for all buckets, which the gate must not read as per-bucket keys.
    # Every program is kept (no minimum compile time): the next run's kernel reads them from disk.
    cache = tmp_path / "compile"
    env = {"PARITY_KIT_COMPILE_CACHE": str(cache), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    errors = {}
    for run in ("cold", "warm"):
        run_dir = tmp_path / run
        proc = parity_kit("gate", ROOT / "descriptors" / "tiny-jax.toml", "--out", run_dir, "--no-summary", env=env)
        assert proc.returncode == 0, proc.stderr
        case = json.loads((run_dir / "result.json").read_text())["cases"]["jax-f32"]
        assert case["status"] == "passed"
        errors[run] = [p["max_probability_error"] for p in case["prompts"]]
        # The timeline: the executor's frame around the kernel's phases, one per bucket.
        assert {"kernel start, imports", "model load", "bucket 128", "bucket 1024", "notebook write-out"} <= set(
            case["phases"]), case["phases"]
        if run == "cold":
            kept = sorted(f.name for f in (cache / "jax").iterdir())
            assert len(kept) >= 2, kept  # at least one program per bucket
    assert max(errors["cold"]) < 1e-5
    assert errors["warm"] == errors["cold"]  # a program read back from disk is the program compiled
