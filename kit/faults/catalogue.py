"""The fault catalogue: engine bugs, mimicked in a Llama checkpoint, each at graded magnitudes.

A gate is only worth its verdict if it fails a broken engine. Each fault here stands for a bug an
inference engine has had or could have (a wrong RoPE base, a softmax scale, a shard loaded in the wrong
order, ...), written as the config or weight change that makes a correct engine compute what the buggy
one would. Magnitudes run from far under bfloat16 noise to gross, so the catalogue shows where each
test of the gate starts to see a fault.

A magnitude of 0 is the unchanged checkpoint, bit for bit. Discrete bugs (a swap, a permutation) are
graded by blending: magnitude m loads ``(1 - m) * right + m * wrong``, and m = 1 is the bug itself.
Random faults draw from their own fixed seed, so a fault at a magnitude is the same file everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from kit.core.errors import BadInput
from kit.faults.checkpoint import Checkpoint, load_checkpoint, write_checkpoint

SCALE = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)  # relative errors, 0.2 % to 20 %
BLEND = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # fractions of the way to the bug
# Quantization steps as a fraction of each row's largest weight: int8, int6, int5, int4, int3 and int2 grids.
QUANT = tuple(round(1 / (2 ** (bits - 1) - 1), 6) for bits in (8, 6, 5, 4, 3, 2))
GELU_SIGMOID_BETA = 1.702  # x * sigmoid(1.702 x) is the sigmoid approximation of GELU


@dataclass(frozen=True)
class Fault:
    name: str
    mimics: str  # the engine bug this stands for
    edit: str  # what changes in the checkpoint
    unit: str  # what a magnitude means
    magnitudes: tuple[float, ...]
    apply: Callable[[Checkpoint, float], None] = field(repr=False, compare=False)
    blend: bool = False  # magnitudes are fractions of the way to the bug: at most 1
    seed: int | None = None  # the random draw a random fault makes

    def check(self, magnitude: float) -> None:
        """Refuse a magnitude this fault cannot take (not finite, negative, or above 1 for a blend) in one
        line naming its unit."""
        if not np.isfinite(magnitude) or magnitude < 0 or (self.blend and magnitude > 1):
            limit = "0 to 1" if self.blend else "0 or more"
            raise BadInput(f"fault {self.name}: magnitude {magnitude!r} is out of range ({limit}: {self.unit})")


def faulted(fault: Fault, magnitude: float, source: str | Path) -> Checkpoint:
    """The checkpoint in ``source`` with ``fault`` applied at ``magnitude``."""
    fault.check(magnitude)
    checkpoint = load_checkpoint(source)
    fault.apply(checkpoint, float(magnitude))
    return checkpoint


def write_fault(fault: Fault, magnitude: float, source: str | Path, out: str | Path) -> Path:
    """A copy of the checkpoint folder ``source`` in ``out`` (created), with the fault in it."""
    return write_checkpoint(faulted(fault, magnitude, source), source, out)


def _mix(right: np.ndarray, wrong: np.ndarray, m: float) -> np.ndarray:
    # (1 - m) * right + m * wrong is exact at both ends: m = 0 gives right and m = 1 gives wrong, bit for bit.
    return ((1.0 - m) * right + m * wrong).astype(np.float32)


def _heads(n: int, head_dim: int, order: list[int]) -> np.ndarray:
    """Row indices that put head ``order[i]``'s rows where head i's were."""
    return np.concatenate([np.arange(h * head_dim, (h + 1) * head_dim) for h in order[:n]])


# --- config faults -------------------------------------------------------------------------------------


def _rope_base(c: Checkpoint, m: float) -> None:
    # transformers 5 writes rope_parameters; older configs (and some engines' parsers) keep rope_theta on top.
    if isinstance(c.config.get("rope_parameters"), dict) and "rope_theta" in c.config["rope_parameters"]:
        c.config["rope_parameters"]["rope_theta"] = c.config["rope_parameters"]["rope_theta"] * (1 + m)
    if "rope_theta" in c.config:
        c.config["rope_theta"] = c.config["rope_theta"] * (1 + m)


def _rms_norm_eps(c: Checkpoint, m: float) -> None:
    c.config["rms_norm_eps"] = c.config["rms_norm_eps"] * 10 ** m


# --- scales --------------------------------------------------------------------------------------------


def _scale(names: Callable[[Checkpoint], list[str]]) -> Callable[[Checkpoint, float], None]:
    def apply(c: Checkpoint, m: float) -> None:
        for name in names(c):
            c.set(name, c.tensors[name] * np.float32(1 + m))
    return apply


def _layers(c: Checkpoint, proj: str) -> list[str]:
    return [f"model.layers.{i}.{proj}.weight" for i in range(c.n_layers)]


def _activation(c: Checkpoint, m: float) -> None:
    # silu(b g) / b = g * sigmoid(b g): scaling gate_proj by b and up_proj by 1 / b turns every MLP's
    # silu into swish-b, the sigmoid form of GELU at b = 1.702: an engine that runs the wrong activation.
    beta = np.float32(1 + (GELU_SIGMOID_BETA - 1) * m)
    for i in range(c.n_layers):
        c.set_layer(i, "mlp.gate_proj", c.layer(i, "mlp.gate_proj") * beta)
        c.set_layer(i, "mlp.up_proj", c.layer(i, "mlp.up_proj") / beta)


def _norm_offset(c: Checkpoint, m: float) -> None:
    for name in c.norm_names():
        c.set(name, c.tensors[name] + np.float32(m))


def _layer_skip(layer: int) -> Callable[[Checkpoint, float], None]:
    def apply(c: Checkpoint, m: float) -> None:
        for proj in ("self_attn.o_proj", "mlp.down_proj"):
            c.set_layer(layer, proj, c.layer(layer, proj) * np.float32(1 - m))
    return apply


# --- permutations and swaps, blended -------------------------------------------------------------------


def _head_order(layer: int, a: int, b: int) -> Callable[[Checkpoint, float], None]:
    def apply(c: Checkpoint, m: float) -> None:
        order = list(range(c.n_heads))
        order[a], order[b] = b, a
        q = c.layer(layer, "self_attn.q_proj")
        c.set_layer(layer, "self_attn.q_proj", _mix(q, q[_heads(c.n_heads, c.head_dim, order)], m))
    return apply


def _kv_head_mapping(c: Checkpoint, m: float) -> None:
    # Query head group g reads key/value head g + 1: every layer's k and v heads rolled by one.
    order = [(g + 1) % c.n_kv_heads for g in range(c.n_kv_heads)]
    rows = _heads(c.n_kv_heads, c.head_dim, order)
    for i in range(c.n_layers):
        for proj in ("self_attn.k_proj", "self_attn.v_proj"):
            w = c.layer(i, proj)
            c.set_layer(i, proj, _mix(w, w[rows], m))


def _rotary_interleave(c: Checkpoint, m: float) -> None:
    # An engine that pairs dimensions (2i, 2i + 1) (GPT-J) on a checkpoint laid out for (i, i + d/2)
    # (NeoX, what HF Llama uses) computes what HF computes on q and k rows reordered so that rows 2i and
    # 2i + 1 land at i and i + d/2, in every head of every layer (the same reordering on q and k keeps
    # their dot product, so only the rotation is wrong).
    d = c.head_dim
    within = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])
    for i in range(c.n_layers):
        for proj, heads in (("self_attn.q_proj", c.n_heads), ("self_attn.k_proj", c.n_kv_heads)):
            rows = np.concatenate([h * d + within for h in range(heads)])
            w = c.layer(i, proj)
            c.set_layer(i, proj, _mix(w, w[rows], m))


def _swap_pair(layer: int, first: str, second: str) -> Callable[[Checkpoint, float], None]:
    def apply(c: Checkpoint, m: float) -> None:
        x, y = c.layer(layer, first), c.layer(layer, second)
        c.set_layer(layer, first, _mix(x, y, m))
        c.set_layer(layer, second, _mix(y, x, m))
    return apply


def _embedding_swap(a: int, b: int) -> Callable[[Checkpoint, float], None]:
    def apply(c: Checkpoint, m: float) -> None:
        e = c.tensors["model.embed_tokens.weight"]
        swapped = e.copy()
        swapped[[a, b]] = e[[b, a]]
        c.set("model.embed_tokens.weight", _mix(e, swapped, m))
    return apply


def _tied_embeddings(c: Checkpoint, m: float) -> None:
    c.set("lm_head.weight", _mix(c.tensors["lm_head.weight"], c.tensors["model.embed_tokens.weight"], m))


# --- noise and rounding --------------------------------------------------------------------------------


def _mlp_noise(layer: int, seed: int) -> Callable[[Checkpoint, float], None]:
    def apply(c: Checkpoint, m: float) -> None:
        rng = np.random.default_rng(seed)  # the same draw at every magnitude: only its size grows
        for proj in ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            w = c.layer(layer, proj)
            noise = rng.standard_normal(w.shape).astype(np.float32)
            c.set_layer(layer, proj, w + np.float32(m * float(w.std())) * noise)
    return apply


def _fake_quant(layer: int, proj: str) -> Callable[[Checkpoint, float], None]:
    def apply(c: Checkpoint, m: float) -> None:
        if m == 0:
            return
        w = c.layer(layer, proj)
        step = np.float32(m) * np.abs(w).max(axis=1, keepdims=True)
        step[step == 0] = 1  # an all-zero row rounds to itself
        c.set_layer(layer, proj, np.round(w / step) * step)
    return apply


# Two content tokens that most prompts of the embedded fixture contain (" capital": 53 of 64, " river": 44):
# a swap of tokens no prompt holds could not be seen by any gate.
SWAPPED_TOKENS = (295, 315)

CATALOGUE: tuple[Fault, ...] = (
    Fault("rope_base", "a RoPE base (theta) read or computed a little off",
          "config rope_theta x (1 + m)", "relative error of theta", SCALE, _rope_base),
    Fault("attention_scale", "a softmax scale other than 1/sqrt(head_dim)",
          "every layer's q_proj x (1 + m)", "relative error of the softmax scale",
          SCALE, _scale(lambda c: _layers(c, "self_attn.q_proj"))),
    Fault("logit_scale", "logits scaled (a temperature or logit soft-cap applied where none belongs)",
          "lm_head x (1 + m)", "relative error of the logits", SCALE, _scale(lambda c: ["lm_head.weight"])),
    Fault("activation", "the wrong MLP activation (GELU for SiLU)",
          "every MLP's silu made swish-b, b = 1 + 0.702 m (gate_proj x b, up_proj / b)",
          "fraction of the way from SiLU to sigmoid-GELU", BLEND, _activation, blend=True),
    Fault("rms_norm_eps", "an RMSNorm epsilon other than the config's (a default 1e-5 for 1e-6)",
          "config rms_norm_eps x 10^m", "decades of epsilon", (0.25, 0.5, 1.0, 2.0, 3.0, 4.0), _rms_norm_eps),
    Fault("head_order", "two query heads in the wrong order (a head shard misplaced)",
          "layer 1's q_proj heads 0 and 1 swapped, o_proj unchanged", "fraction of the swap",
          BLEND, _head_order(1, 0, 1), blend=True),
    Fault("kv_head_mapping", "query groups mapped to the wrong key/value heads",
          "every layer's k_proj and v_proj heads rolled by one", "fraction of the roll",
          BLEND, _kv_head_mapping, blend=True),
    Fault("o_proj_scale", "one attention output projection scaled (a tensor-parallel reduction off)",
          "layer 1's o_proj x (1 + m)", "relative error of the projection",
          SCALE, _scale(lambda c: ["model.layers.1.self_attn.o_proj.weight"])),
    Fault("mlp_noise", "one MLP's weights corrupted (a bad load, a broken kernel tile)",
          "layer 0's gate, up and down_proj + m x std(w) x N(0, 1), seed 16",
          "noise standard deviation relative to the weights'", (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5),
          _mlp_noise(0, 16), seed=16),
    Fault("embedding_swap", "two vocabulary rows swapped (an added-token or vocab-padding offset)",
          f"embed_tokens rows {SWAPPED_TOKENS[0]} (' capital') and {SWAPPED_TOKENS[1]} (' river') swapped",
          "fraction of the swap", BLEND, _embedding_swap(*SWAPPED_TOKENS), blend=True),
    Fault("rotary_interleave", "RoPE pairs dimensions (2i, 2i+1) (GPT-J) on a NeoX-layout checkpoint",
          "every q_proj and k_proj head's rows reordered as the interleaved pairing sees them",
          "fraction of the reordering", BLEND, _rotary_interleave, blend=True),
    Fault("norm_offset", "RMSNorm computes (1 + w) on a checkpoint that stores w (the Gemma convention)",
          "every RMSNorm weight + m", "offset added (1 is the whole bug)",
          (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 1.0), _norm_offset),
    Fault("fake_quant", "one projection run at lower precision (a quantized kernel picked by mistake)",
          "layer 0's down_proj rounded to a grid of m x its row's largest weight",
          "grid step relative to the row's largest weight (1/127 is int8, 1/7 int4)", QUANT,
          _fake_quant(0, "mlp.down_proj")),
    Fault("gate_up_swap", "the fused gate_up projection's shards loaded in the wrong order",
          "layer 0's gate_proj and up_proj swapped", "fraction of the swap",
          BLEND, _swap_pair(0, "mlp.gate_proj", "mlp.up_proj"), blend=True),
    Fault("qk_swap", "the fused qkv projection's q and k shards loaded in the wrong order",
          "layer 1's q_proj and k_proj swapped", "fraction of the swap",
          BLEND, _swap_pair(1, "self_attn.q_proj", "self_attn.k_proj"), blend=True),
    Fault("tied_embeddings", "the output projection tied to the embeddings although the config says untied",
          "lm_head replaced by embed_tokens", "fraction of the way to the embeddings", BLEND,
          _tied_embeddings, blend=True),
    Fault("embed_scale", "embeddings multiplied by a normalizer the architecture does not have (Gemma's)",
          "embed_tokens x (1 + m)", "relative error of the embeddings", SCALE + (0.5, 1.0),
          _scale(lambda c: ["model.embed_tokens.weight"])),
    Fault("layer_skip", "one layer's output lost (a pipeline stage boundary off by one)",
          "layer 0's o_proj and down_proj x (1 - m)", "fraction of the layer's output removed",
          BLEND, _layer_skip(0), blend=True),
)

BY_NAME = {f.name: f for f in CATALOGUE}


def fault(name: str) -> Fault:
    """The catalogue's fault named ``name``; an unknown name is refused in one line listing the catalogue."""
    if name not in BY_NAME:
        raise BadInput(f"no fault named {name!r} (catalogue: {', '.join(BY_NAME)})")
    return BY_NAME[name]
