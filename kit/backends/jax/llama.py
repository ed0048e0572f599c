"""A plain Llama forward in JAX, read from the same safetensors as transformers.

It exists to cross-check the hf backend with an implementation that shares no
code with it: its own weight reader, rotary embedding, attention and norms. It
follows the transformers Llama numerics where they matter for agreement (RMSNorm
in float32 then cast back before the weight; rotary tables computed in float32
and cast to the activation dtype), and nothing else.

Only the hidden state of each row's last real position is projected to the
vocabulary. Layers are stacked and run with ``lax.scan``: one compiled layer
instead of one per layer, so compiling a 16-layer model takes seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from kit.backends.jax.choices import Attention

# The chunked attention one block at a time (looped_causal_attention): chosen by the backend, not by a case, where
# the unrolled blocks would not fit the device's memory (kit.backends.jax.runtime).
LOOPED = "chunked-looped"
QUERY_BLOCK = 512  # rows of the score matrix held at once by the chunked attention (at least)
MAX_BLOCKS = 16  # query blocks per attention at most: each is its own matmul shape in the compiled program


@dataclass(frozen=True)
class LlamaShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    eps: float
    rope_theta: float
    tied: bool


def shape_from_config(config: dict) -> LlamaShape:
    """The shape of a transformers Llama config.json; refuse what this forward does not implement."""
    if config.get("model_type") != "llama":
        raise ValueError(f"model_type {config.get('model_type')!r}: only 'llama' is implemented")
    rope = config.get("rope_parameters") or {"rope_theta": config.get("rope_theta", 10000.0)}
    if rope.get("rope_type", "default") != "default" or config.get("rope_scaling"):
        raise ValueError(f"rope {rope.get('rope_type')!r} with scaling is not implemented, only 'default'")
    if config.get("attention_bias") or config.get("mlp_bias"):
        raise ValueError("attention or MLP biases are not implemented")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {config.get('hidden_act')!r}: only silu is implemented")
    heads = config["num_attention_heads"]
    return LlamaShape(
        hidden=config["hidden_size"], layers=config["num_hidden_layers"], heads=heads,
        kv_heads=config.get("num_key_value_heads", heads),
        head_dim=config.get("head_dim") or config["hidden_size"] // heads, mlp=config["intermediate_size"],
        vocab=config["vocab_size"], eps=config["rms_norm_eps"], rope_theta=float(rope["rope_theta"]),
        tied=bool(config.get("tie_word_embeddings", False)),
    )


_LAYER_TENSORS = {  # our name -> transformers name inside model.layers.<i>.
    "attn_norm": "input_layernorm.weight", "wq": "self_attn.q_proj.weight", "wk": "self_attn.k_proj.weight",
    "wv": "self_attn.v_proj.weight", "wo": "self_attn.o_proj.weight",
    "mlp_norm": "post_attention_layernorm.weight", "w_gate": "mlp.gate_proj.weight",
    "w_up": "mlp.up_proj.weight", "w_down": "mlp.down_proj.weight",
}


def load_params(model_dir: str | Path, dtype: str, device=None, place=None) -> tuple[LlamaShape, dict]:
    """The model's shape and its weights on ``device``, layers stacked along a leading axis.

    Weights keep the transformers [out, in] layout: the matmuls below contract over ``in``.
    ``place``, when given, names each weight's placement instead (``layers.wq``, ``embed``, ...):
    the shardings of a tensor-parallel case (kit.backends.jax.sharding).
    """
    import jax

    from kit.core.model.safetensors_io import read_tensors

    model_dir = Path(model_dir)
    shape = shape_from_config(json.loads((model_dir / "config.json").read_text()))
    tensors: dict[str, np.ndarray] = {}
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir} holds no .safetensors file")
    for f in files:
        tensors.update(read_tensors(f))
    np_dtype = np.float32 if dtype == "float32" else _bf16()

    def put(a: np.ndarray, name: str):
        return jax.device_put(np.asarray(a, dtype=np_dtype), device if place is None else place(name))

    layers = {k: put(np.stack([tensors[f"model.layers.{i}.{v}"] for i in range(shape.layers)]), f"layers.{k}")
              for k, v in _LAYER_TENSORS.items()}
    head = tensors["model.embed_tokens.weight"] if shape.tied else tensors["lm_head.weight"]
    params = {"embed": put(tensors["model.embed_tokens.weight"], "embed"), "layers": layers,
              "norm": put(tensors["model.norm.weight"], "norm"), "lm_head": put(head, "lm_head")}
    return shape, params


def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def rms_norm(x, weight, eps):
    """Llama's RMS norm, its statistics in float32 whatever the activations' dtype, as the reference
    implementation computes them."""
    import jax
    import jax.numpy as jnp

    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return weight * normed.astype(x.dtype)


def rotary_tables(seq: int, head_dim: int, theta: float, dtype):
    """cos and sin, [seq, head_dim], for positions 0..seq-1 (computed in float32)."""
    import jax.numpy as jnp

    inv_freq = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)


def rotate(x, cos, sin):
    """Rotary embedding on [batch, seq, heads, head_dim], halves convention of transformers."""
    import jax.numpy as jnp

    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


def query_block(seq: int) -> int:
    """Rows of the score matrix the chunked attention holds at once for a ``seq``-token program:
    QUERY_BLOCK, doubled while that leaves more than MAX_BLOCKS blocks and still divides ``seq`` (fewer,
    larger matmuls; each block is its own matmul shape in the compiled program); ``seq`` itself when
    QUERY_BLOCK does not divide it."""
    if seq % QUERY_BLOCK:
        return seq
    block = QUERY_BLOCK
    while seq // block > MAX_BLOCKS and seq % (2 * block) == 0:
        block *= 2
    return block


def chunked_causal_attention(q, k, v, precision):
    """Exact causal attention, one block of query rows at a time: never a [seq, seq] score matrix.

    Float32 long prompts need it: cuDNN's flash attention has no float32 kernel, and XLA's
    reference attention materializes all heads' [seq, seq] scores (128 GiB at 32K tokens).
    Query block ``i`` (rows ``[i * block, (i + 1) * block)``) is scored against keys
    ``[0, (i + 1) * block)`` only: the keys after its last row are masked for all of its rows, so
    they would add exact zeros to its softmax and to its product with v. Skipping them halves the
    work at long prompts; the result differs from the full rows only by float32 summation order.
    Query heads are grouped over their key/value head (head ``h`` reads key/value head
    ``h // group``, as transformers' ``repeat_kv``) instead of repeating k and v.
    """
    import jax
    import jax.numpy as jnp

    b, s, n, d = q.shape
    kv = k.shape[2]
    group = n // kv
    q = q.reshape(b, s, kv, group, d)
    block = query_block(s)
    scale = 1.0 / d ** 0.5
    out = []
    for start in range(0, s, block):
        end = start + block
        scores = jnp.einsum("bqhgd,bkhd->bhgqk", q[:, start:end], k[:, :end], precision=precision,
                            preferred_element_type=jnp.float32) * scale
        visible = jnp.arange(end)[None, :] <= jnp.arange(start, end)[:, None]  # [block, end]
        scores = jnp.where(visible, scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
        out.append(jnp.einsum("bhgqk,bkhd->bqhgd", probs, v[:, :end], precision=precision))
    return jnp.concatenate(out, axis=1).reshape(b, s, n, d)


def looped_causal_attention(q, k, v, precision):
    """The chunked attention's blocks one after another in a loop: one query block at a time (``lax.map``), and
    within it one key block at a time up to the diagonal (``lax.fori_loop``, a softmax kept online: the running
    maximum, the sum of exponentials and the weighted values, rescaled when the maximum grows). One score tile is
    in memory at a time, and only the blocks the causal mask leaves visible are computed: half the score work of
    every query block against every key.

    The unrolled blocks of ``chunked_causal_attention`` are one program in which XLA keeps every block's scores at
    once: about 38 GiB at 32K tokens for the 1.5B GPU model in float32 (benchmarks/attention_memory.py), more than an
    80 GiB GPU gives one process. The two differ by float32 summation order and the online softmax's rescaling,
    which stay in float32 throughout (the scores, the running sums and the accumulator)."""
    import jax
    import jax.numpy as jnp

    b, s, n, d = q.shape
    kv = k.shape[2]
    group = n // kv
    block = query_block(s)
    blocks = s // block
    rows = q.reshape(b, blocks, block, kv, group, d).transpose(1, 0, 2, 3, 4, 5)  # [blocks, b, block, kv, group, d]
    scale = 1.0 / d ** 0.5
    inside = jnp.arange(block)[None, :] <= jnp.arange(block)[:, None]  # the diagonal tile's visible keys

    def one(args):
        i, qb = args

        def step(j, carry):
            high, total, acc = carry  # [b, kv, group, block] twice, [b, kv, group, block, d]
            kb = jax.lax.dynamic_slice_in_dim(k, j * block, block, axis=1)
            vb = jax.lax.dynamic_slice_in_dim(v, j * block, block, axis=1)
            scores = jnp.einsum("bqhgd,bkhd->bhgqk", qb, kb, precision=precision,
                                preferred_element_type=jnp.float32) * scale
            scores = jnp.where((j < i) | inside, scores, -jnp.inf)
            new_high = jnp.maximum(high, scores.max(axis=-1))
            weights = jnp.exp(scores - new_high[..., None])
            rescale = jnp.exp(high - new_high)
            total = total * rescale + weights.sum(axis=-1)
            acc = acc * rescale[..., None] + jnp.einsum("bhgqk,bkhd->bhgqd", weights, vb.astype(jnp.float32),
                                                        precision=precision)
            return new_high, total, acc

        start = (jnp.full((b, kv, group, block), -jnp.inf, jnp.float32),
                 jnp.zeros((b, kv, group, block), jnp.float32), jnp.zeros((b, kv, group, block, d), jnp.float32))
        _, total, acc = jax.lax.fori_loop(0, i + 1, step, start)
        out = (acc / total[..., None]).astype(v.dtype)  # [b, kv, group, block, d]
        return out.transpose(0, 3, 1, 2, 4)  # [b, block, kv, group, d]

    out = jax.lax.map(one, (jnp.arange(blocks), rows))  # [blocks, b, block, kv, group, d]
    return out.transpose(1, 0, 2, 3, 4, 5).reshape(b, s, n, d)


def attend(q, k, v, attention: str, precision):
    """Causal attention by the implementation named: chunked (exact in float32), looped, or XLA's dot-product
    attention (its cuDNN or reference kernel)."""
    import jax

    if attention == Attention.CHUNKED:
        return chunked_causal_attention(q, k, v, precision)
    if attention == LOOPED:
        return looped_causal_attention(q, k, v, precision)
    return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=attention)


def float32_precision():
    """The precision of every float32 matmul: HIGHEST, true float32. Held in one place so that
    benchmarks/gpu_scoring.py can time the tensor-core algorithms that emulate float32 against it."""
    import jax

    return jax.lax.Precision.HIGHEST


FLOAT32_PRECISION = float32_precision


def _forward_parts(params: dict, ids, shape: LlamaShape, attention: str, tp=None):
    """What every forward over ``ids`` [batch, seq] shares: the matmul, and one decoder block as a
    function of the residual stream and one layer's weights, returning the stream after its attention
    and after its MLP (the points kit.core.noise.localize compares)."""
    import jax
    import jax.numpy as jnp

    dtype = params["embed"].dtype
    # Float32 means float32: without HIGHEST, a GPU may multiply float32 matrices in TF32.
    precision = FLOAT32_PRECISION() if dtype == jnp.float32 else jax.lax.Precision.DEFAULT
    mm = partial(jnp.einsum, precision=precision)
    b, s = ids.shape
    n, kv, d = shape.heads, shape.kv_heads, shape.head_dim
    cos, sin = rotary_tables(s, d, shape.rope_theta, dtype)
    heads = (lambda t: t) if tp is None else tp.heads  # q, k and v split by heads
    whole = (lambda t: t) if tp is None else tp.whole  # the residual stream, all-reduced after each block
    attention_of = partial(attend, attention=attention, precision=precision)
    if tp is not None:  # each device attends with its own heads
        attention_of = tp.on_own_heads(attention_of)

    def block(x, w):
        h = rms_norm(x, w["attn_norm"], shape.eps)
        q = heads(rotate(mm("bsh,oh->bso", h, w["wq"]).reshape(b, s, n, d), cos, sin))
        k = heads(rotate(mm("bsh,oh->bso", h, w["wk"]).reshape(b, s, kv, d), cos, sin))
        v = heads(mm("bsh,oh->bso", h, w["wv"]).reshape(b, s, kv, d))
        a = attention_of(q, k, v).reshape(b, s, n * d)
        x = whole(x + mm("bso,ho->bsh", a, w["wo"]))
        h = rms_norm(x, w["mlp_norm"], shape.eps)
        gated = jax.nn.silu(mm("bsh,mh->bsm", h, w["w_gate"])) * mm("bsh,mh->bsm", h, w["w_up"])
        return x, whole(x + mm("bsm,hm->bsh", gated, w["w_down"]))

    return mm, block


def last_logits(params: dict, ids, last, shape: LlamaShape, attention: str, tp=None, unroll: int = 1):
    """Float32 logits [batch, vocab] at position ``last[b]`` of each row of ``ids`` [batch, seq].

    Rows may be right-padded: causal attention never lets a real position see a later one.
    ``tp``: a ``sharding.TensorParallel`` whose split the activations are held to (None: one device).
    ``unroll``: layers per step of the scan, for benchmarks/gpu_scoring.py to measure whether that buys
    speed. The backend keeps 1: XLA then fuses across layers, and on CPU the logits change in the last bits.
    """
    import jax
    import jax.numpy as jnp

    mm, block = _forward_parts(params, ids, shape, attention, tp)
    x, _ = jax.lax.scan(lambda x, w: (block(x, w)[1], None), params["embed"][ids], params["layers"], unroll=unroll)
    b = ids.shape[0]
    h = rms_norm(x[jnp.arange(b), last], params["norm"], shape.eps)
    return mm("bh,vh->bv", h, params["lm_head"]).astype(jnp.float32)


def residual_stream(params: dict, ids, shape: LlamaShape, attention: str, tp=None):
    """The residual stream of ``ids`` [batch, seq] at every point kit.core.noise.localize reads: the embeddings
    [batch, seq, hidden], and after each layer's attention and after its MLP, [layers, batch, seq, hidden]
    each. The layers run through the same scan and block as ``last_logits``."""
    import jax

    _, block = _forward_parts(params, ids, shape, attention, tp)

    def step(x, w):
        after_attention, after_mlp = block(x, w)
        return after_mlp, (after_attention, after_mlp)

    x0 = params["embed"][ids]
    _, (attn, mlp) = jax.lax.scan(step, x0, params["layers"])
    return x0, attn, mlp
