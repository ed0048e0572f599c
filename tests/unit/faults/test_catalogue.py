"""Each fault of the catalogue changes exactly what it says, the same way every time, and nothing at 0."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kit.core.errors import BadInput
from kit.faults.catalogue import (BY_NAME, CATALOGUE, GELU_SIGMOID_BETA, QUANT, SWAPPED_TOKENS, fault, faulted,
                                  write_fault)
from kit.faults.checkpoint import CONFIG, WEIGHTS, load_checkpoint

HD = 32  # the embedded model's head_dim (4 heads, 4 key/value heads, 2 layers)


@pytest.fixture(scope="module")
def source(embedded):
    return embedded.model


@pytest.fixture(scope="module")
def clean(source):
    return load_checkpoint(source)


def changes(clean, faulty) -> tuple[set[str], set[str]]:
    """The tensors and config keys a faulted checkpoint differs in."""
    tensors = {n for n, t in clean.tensors.items() if not np.array_equal(t, faulty.tensors[n])}
    keys = {k for k in clean.config.keys() | faulty.config.keys() if clean.config.get(k) != faulty.config.get(k)}
    return tensors, keys


def L(i: int, name: str) -> str:
    return f"model.layers.{i}.{name}.weight"


BOTH = (0, 1)
MLP = ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
# What each fault may change, and nothing else.
CHANGES = {
    "rope_base": (set(), {"rope_parameters"}),
    "attention_scale": ({L(i, "self_attn.q_proj") for i in BOTH}, set()),
    "logit_scale": ({"lm_head.weight"}, set()),
    "activation": ({L(i, p) for i in BOTH for p in ("mlp.gate_proj", "mlp.up_proj")}, set()),
    "rms_norm_eps": (set(), {"rms_norm_eps"}),
    "head_order": ({L(1, "self_attn.q_proj")}, set()),
    "kv_head_mapping": ({L(i, p) for i in BOTH for p in ("self_attn.k_proj", "self_attn.v_proj")}, set()),
    "o_proj_scale": ({L(1, "self_attn.o_proj")}, set()),
    "mlp_noise": ({L(0, p) for p in MLP}, set()),
    "embedding_swap": ({"model.embed_tokens.weight"}, set()),
    "rotary_interleave": ({L(i, p) for i in BOTH for p in ("self_attn.q_proj", "self_attn.k_proj")}, set()),
    "norm_offset": ({"model.norm.weight"} | {L(i, n) for i in BOTH
                                             for n in ("input_layernorm", "post_attention_layernorm")}, set()),
    "fake_quant": ({L(0, "mlp.down_proj")}, set()),
    "gate_up_swap": ({L(0, "mlp.gate_proj"), L(0, "mlp.up_proj")}, set()),
    "qk_swap": ({L(1, "self_attn.q_proj"), L(1, "self_attn.k_proj")}, set()),
    "tied_embeddings": ({"lm_head.weight"}, set()),
    "embed_scale": ({"model.embed_tokens.weight"}, set()),
    "layer_skip": ({L(0, "self_attn.o_proj"), L(0, "mlp.down_proj")}, set()),
}


def test_the_catalogue_covers_the_issues_faults_with_graded_magnitudes():
    assert len(CATALOGUE) >= 14 and set(BY_NAME) == set(CHANGES)
    for f in CATALOGUE:
        assert len(f.magnitudes) >= 5, f.name
        assert list(f.magnitudes) == sorted(set(f.magnitudes)) and f.magnitudes[0] > 0, f.name
        assert f.mimics and f.edit and f.unit
        assert not f.blend or f.magnitudes[-1] == 1.0, f"{f.name}: a blended fault reaches the bug itself"


@pytest.mark.parametrize("name", list(CHANGES))
def test_a_fault_changes_exactly_what_it_names(name, source, clean):
    f = fault(name)
    tensors, keys = changes(clean, faulted(f, f.magnitudes[len(f.magnitudes) // 2], source))
    assert (tensors, keys) == CHANGES[name]


@pytest.mark.parametrize("name", list(CHANGES))
def test_magnitude_zero_is_the_unchanged_checkpoint(name, source, clean, tmp_path):
    copy = load_checkpoint(write_fault(fault(name), 0.0, source, tmp_path / "m"))
    assert changes(clean, copy) == (set(), set())
    assert copy.dtypes == clean.dtypes and list(copy.tensors) == list(clean.tensors)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == sorted(p.name for p in source.iterdir())


@pytest.mark.parametrize("name", list(CHANGES))
def test_a_fault_is_the_same_bytes_every_time(name, source, tmp_path):
    f = fault(name)
    m = f.magnitudes[-1]
    a, b = write_fault(f, m, source, tmp_path / "a"), write_fault(f, m, source, tmp_path / "b")
    for file in (WEIGHTS, CONFIG):
        assert (a / file).read_bytes() == (b / file).read_bytes()


def test_magnitudes_out_of_range_are_refused_in_one_line(source):
    with pytest.raises(BadInput, match=r"^fault head_order: magnitude 1\.5 is out of range \(0 to 1: fraction"):
        faulted(fault("head_order"), 1.5, source)
    with pytest.raises(BadInput, match=r"^fault logit_scale: magnitude -0\.1 is out of range \(0 or more"):
        faulted(fault("logit_scale"), -0.1, source)
    with pytest.raises(BadInput, match=r"^no fault named 'nope' \(catalogue: rope_base, "):
        fault("nope")


def test_config_faults(source, clean):
    rope = faulted(fault("rope_base"), 0.05, source).config["rope_parameters"]
    assert rope == {**clean.config["rope_parameters"], "rope_theta": pytest.approx(10500.0)}
    assert faulted(fault("rms_norm_eps"), 1.0, source).config["rms_norm_eps"] == pytest.approx(1e-5)


@pytest.mark.parametrize("name,tensors", [
    ("attention_scale", [L(0, "self_attn.q_proj"), L(1, "self_attn.q_proj")]),
    ("logit_scale", ["lm_head.weight"]),
    ("o_proj_scale", [L(1, "self_attn.o_proj")]),
    ("embed_scale", ["model.embed_tokens.weight"]),
])
def test_scale_faults_scale_by_one_plus_the_magnitude(name, tensors, source, clean):
    faulty = faulted(fault(name), 0.1, source)
    for t in tensors:
        np.testing.assert_array_equal(faulty.tensors[t], clean.tensors[t] * np.float32(1.1))


def test_activation_is_swish_beta_reaching_sigmoid_gelu(source, clean):
    faulty = faulted(fault("activation"), 1.0, source)
    x = np.random.default_rng(0).standard_normal(128).astype(np.float32)
    for i in BOTH:
        g, u = clean.layer(i, "mlp.gate_proj") @ x, clean.layer(i, "mlp.up_proj") @ x
        g2, u2 = faulty.layer(i, "mlp.gate_proj") @ x, faulty.layer(i, "mlp.up_proj") @ x
        silu = g2 / (1 + np.exp(-g2)) * u2
        sigmoid_gelu = g / (1 + np.exp(-GELU_SIGMOID_BETA * g)) * u
        np.testing.assert_allclose(silu, sigmoid_gelu, rtol=1e-4, atol=1e-6)


def test_head_order_swaps_two_query_heads_of_layer_1(source, clean):
    q, q2 = clean.layer(1, "self_attn.q_proj"), faulted(fault("head_order"), 1.0, source).layer(1, "self_attn.q_proj")
    np.testing.assert_array_equal(q2[:HD], q[HD:2 * HD])
    np.testing.assert_array_equal(q2[HD:2 * HD], q[:HD])
    np.testing.assert_array_equal(q2[2 * HD:], q[2 * HD:])


def test_a_blended_fault_is_that_fraction_of_the_way(source, clean):
    q = clean.layer(1, "self_attn.q_proj")
    half = faulted(fault("head_order"), 0.5, source).layer(1, "self_attn.q_proj")
    np.testing.assert_allclose(half[:HD], (q[:HD] + q[HD:2 * HD]) / 2, rtol=1e-6, atol=1e-8)


def test_kv_head_mapping_gives_each_query_head_the_next_kv_head(source, clean):
    faulty = faulted(fault("kv_head_mapping"), 1.0, source)
    for i in BOTH:
        for p in ("self_attn.k_proj", "self_attn.v_proj"):
            w, w2 = clean.layer(i, p), faulty.layer(i, p)
            for g in range(4):
                np.testing.assert_array_equal(w2[g * HD:(g + 1) * HD], w[((g + 1) % 4) * HD:((g + 1) % 4 + 1) * HD])


def _rope_neox(x: np.ndarray, pos: int, theta: float = 10000.0) -> np.ndarray:
    half = x.shape[-1] // 2
    freq = theta ** (-np.arange(half) / half)
    cos, sin = np.cos(pos * freq), np.sin(pos * freq)
    a, b = x[:half], x[half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin])


def _rope_gptj(x: np.ndarray, pos: int, theta: float = 10000.0) -> np.ndarray:
    half = x.shape[-1] // 2
    freq = theta ** (-np.arange(half) / half)
    cos, sin = np.cos(pos * freq), np.sin(pos * freq)
    a, b = x[0::2], x[1::2]
    out = np.empty_like(x)
    out[0::2], out[1::2] = a * cos - b * sin, b * cos + a * sin
    return out


def test_rotary_interleave_makes_neox_rope_score_as_gptj_rope_does(source, clean):
    faulty = faulted(fault("rotary_interleave"), 1.0, source)
    x, y = np.random.default_rng(1).standard_normal((2, 128))
    for i in BOTH:
        q, k = clean.layer(i, "self_attn.q_proj") @ x, clean.layer(i, "self_attn.k_proj") @ y
        q2, k2 = faulty.layer(i, "self_attn.q_proj") @ x, faulty.layer(i, "self_attn.k_proj") @ y
        for h in range(4):
            s = slice(h * HD, (h + 1) * HD)
            wrong = _rope_gptj(q[s], 7) @ _rope_gptj(k[s], 3)
            assert _rope_neox(q2[s], 7) @ _rope_neox(k2[s], 3) == pytest.approx(wrong, rel=1e-5)
            assert _rope_neox(q[s], 7) @ _rope_neox(k[s], 3) != pytest.approx(wrong, rel=1e-3)


def test_mlp_noise_has_the_named_relative_size(source, clean):
    faulty = faulted(fault("mlp_noise"), 0.1, source)
    for p in MLP:
        w = clean.layer(0, p)
        assert (faulty.layer(0, p) - w).std() / w.std() == pytest.approx(0.1, rel=0.03)


def test_embedding_swap_swaps_two_rows_the_fixture_uses(source, clean, embedded):
    from kit.core.records.fixture import load_fixture

    a, b = SWAPPED_TOKENS
    e, e2 = clean.tensors["model.embed_tokens.weight"], faulted(fault("embedding_swap"), 1.0, source).tensors[
        "model.embed_tokens.weight"]
    np.testing.assert_array_equal(e2[[a, b]], e[[b, a]])
    assert np.array_equal(np.delete(e2, [a, b], axis=0), np.delete(e, [a, b], axis=0))
    prompts = load_fixture(embedded.fixture).prompts
    assert sum(a in p.prompt_token_ids and b in p.prompt_token_ids for p in prompts) >= 30


def test_norm_offset_adds_to_every_norm_and_one_is_the_gemma_convention(source, clean):
    faulty = faulted(fault("norm_offset"), 1.0, source)
    for n in CHANGES["norm_offset"][0]:
        np.testing.assert_array_equal(faulty.tensors[n], clean.tensors[n] + np.float32(1))


def test_fake_quant_rounds_each_row_to_its_grid(source, clean):
    step = QUANT[3]  # int4: 15 levels per row
    w, w2 = clean.layer(0, "mlp.down_proj"), faulted(fault("fake_quant"), step, source).layer(0, "mlp.down_proj")
    grid = np.float32(step) * np.abs(w).max(axis=1, keepdims=True)
    assert max(len(np.unique(row)) for row in w2) <= 15
    assert np.all(np.abs(w2 - w) <= grid / 2 * (1 + 1e-5))


@pytest.mark.parametrize("name,layer,pair", [("gate_up_swap", 0, ("mlp.gate_proj", "mlp.up_proj")),
                                             ("qk_swap", 1, ("self_attn.q_proj", "self_attn.k_proj"))])
def test_shard_order_faults_swap_two_projections(name, layer, pair, source, clean):
    faulty = faulted(fault(name), 1.0, source)
    np.testing.assert_array_equal(faulty.layer(layer, pair[0]), clean.layer(layer, pair[1]))
    np.testing.assert_array_equal(faulty.layer(layer, pair[1]), clean.layer(layer, pair[0]))


def test_tied_embeddings_and_layer_skip_at_the_whole_bug(source, clean):
    tied = faulted(fault("tied_embeddings"), 1.0, source)
    np.testing.assert_array_equal(tied.tensors["lm_head.weight"], clean.tensors["model.embed_tokens.weight"])
    skipped = faulted(fault("layer_skip"), 1.0, source)
    assert not skipped.layer(0, "self_attn.o_proj").any() and not skipped.layer(0, "mlp.down_proj").any()


def test_a_written_copy_keeps_the_source_files_and_tensor_layout(source, tmp_path):
    out = write_fault(fault("logit_scale"), 0.05, source, tmp_path / "copy")
    for p in source.iterdir():
        if p.name not in (WEIGHTS, CONFIG):
            assert (out / p.name).read_bytes() == p.read_bytes()
    assert json.loads((out / CONFIG).read_text())["architectures"] == ["LlamaForCausalLM"]
    assert load_checkpoint(out).metadata == {"format": "pt"}
