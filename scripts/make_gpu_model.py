#!/usr/bin/env python
"""Generate the GPU descriptor's model (a 1B-class Llama) and its long-prompt fixture from a seed.

The model is not committed (3 GB); it is rebuilt wherever the GPU gate runs, and
``descriptors/gpu-h200.toml`` pins its digest, so a rebuild that differs by one
bit is refused before anything is scored. To make that possible the bytes are
produced by this file's own code alone:

* weights come from numpy's PCG64 bit stream (``random_raw``: raw 64-bit words,
  whose sequence numpy keeps stable across releases, unlike its distribution
  samplers), mapped to uniform floats and rounded to bfloat16 here, bit by bit;
* the safetensors file, config.json and tokenizer.json are written by
  ``kit.core.model.safetensors_io`` and ``json.dumps(sort_keys=True)``, not by a library
  whose header layout may change.

Shape: hidden 2048, 16 layers, 16 heads of 128 (8 key/value heads), MLP 8192,
vocab 128256, untied output layer: 1.53 B parameters, stored in bfloat16 like a
released checkpoint. head_dim 128 because that is what fast attention kernels on
Hopper are built for.

A random-init model has nearly flat next-token distributions, which would make
every parity bound vacuous. The output layer is scaled so that the logits at the
last position have a standard deviation of about ``LOGIT_STD``: the final RMSNorm
makes the hidden state's norm sqrt(hidden), so a uniform output layer of standard
deviation LOGIT_STD / sqrt(hidden) gives logits of that spread whatever the
layers below did. Over 128K Gaussian logits of spread 5 the top token leads the
runner-up by about 1 nat on average: peaked, but not saturated, so a numerical
fault moves probabilities visibly.

The fixtures are random tokens (no tokenizer is trained), bos first. ``small``:
three prompts per bucket of 4K and 16K tokens and two of 32K, lengths fixed below
(``descriptors/gpu-h200.toml``). ``gate``: the real gate's shape, 64 prompts over
buckets of 256, 1K, 4K, 16K and 32K tokens (12 of 256, 13 of each other), each
bucket's first prompt filling it exactly and the others of seeded random lengths
above the bucket below (``descriptors/gpu-h200-64.toml``). The tokenizer is a
word-level vocabulary ``w<id>`` so that each prompt's text maps back to exactly
its token ids.

Usage (from the repo root): ``python scripts/make_gpu_model.py`` writes
``models/llama-1b-seeded/`` and prints its digest; ``--fixture-out fixtures``
also writes the fixture (committed; ``--fixture-shape gate`` for the 64 prompts,
``--fixture-only`` to skip the weights, which the fixture does not need). No
network is needed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kit.core.model.safetensors_io import write_tensors  # noqa: E402

SEED = 20251
HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, MLP, VOCAB = 2048, 16, 16, 8, 128, 8192, 128256
ROPE_THETA, RMS_EPS, MAX_POSITIONS = 500000.0, 1e-5, 32768
INIT_STD = 0.02
# The projections that write into the residual stream start smaller (GPT-2's scaled init): with
# all weights at 0.02 each layer's update outgrows the stream, and the random network amplifies
# rounding, so that float32 against float32 moved probabilities by 1e-4 and bfloat16 by 0.13.
RESIDUAL_STD = INIT_STD / (2 * LAYERS) ** 0.5
LOGIT_STD = 5.0
BOS_ID, EOS_ID = 0, 1
PROMPT_SEED = 777
# (bucket, lengths in tokens including bos): the longest of each bucket fills it exactly.
PROMPT_LENGTHS = {4096: (4096, 3999, 3085), 16384: (16384, 15001, 12289), 32768: (32768, 30000)}
# The gate shape: prompts per bucket; lengths are drawn above the bucket below (64 tokens for the first).
GATE_PROMPT_SEED = 778
GATE_COUNTS = {256: 12, 1024: 13, 4096: 13, 16384: 13, 32768: 13}
CHUNK = 1 << 24  # elements generated at a time: bounds memory at about 0.5 GB


def tensor_specs() -> list[tuple[str, tuple[int, ...], float | None]]:
    """(name, shape, std); std None means a norm weight of ones."""
    specs = [("model.embed_tokens.weight", (VOCAB, HIDDEN), INIT_STD)]
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        specs += [
            (p + "input_layernorm.weight", (HIDDEN,), None),
            (p + "self_attn.q_proj.weight", (HEADS * HEAD_DIM, HIDDEN), INIT_STD),
            (p + "self_attn.k_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), INIT_STD),
            (p + "self_attn.v_proj.weight", (KV_HEADS * HEAD_DIM, HIDDEN), INIT_STD),
            (p + "self_attn.o_proj.weight", (HIDDEN, HEADS * HEAD_DIM), RESIDUAL_STD),
            (p + "post_attention_layernorm.weight", (HIDDEN,), None),
            (p + "mlp.gate_proj.weight", (MLP, HIDDEN), INIT_STD),
            (p + "mlp.up_proj.weight", (MLP, HIDDEN), INIT_STD),
            (p + "mlp.down_proj.weight", (HIDDEN, MLP), RESIDUAL_STD),
        ]
    specs += [("model.norm.weight", (HIDDEN,), None),
              ("lm_head.weight", (VOCAB, HIDDEN), LOGIT_STD / HIDDEN ** 0.5)]
    return specs


def to_bfloat16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, round to nearest even (no NaN or inf can occur here)."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype("<u2")


def tensor_bytes(seed: int, name: str, shape: tuple[int, ...], std: float | None) -> bytes:
    n = int(np.prod(shape))
    if std is None:
        return to_bfloat16_bits(np.ones(n, np.float32)).tobytes()
    # One stream per tensor, keyed by its name: a tensor's values do not depend on the others' order.
    gen = np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode())]))
    half_width = std * 3 ** 0.5  # uniform on [-a, a) has standard deviation a / sqrt(3)
    parts = []
    for start in range(0, n, CHUNK):
        raw = gen.random_raw(min(CHUNK, n - start))
        unit = (raw >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))  # [0, 1), 53 bits
        parts.append(to_bfloat16_bits(((unit * 2.0 - 1.0) * half_width).astype(np.float32)).tobytes())
    return b"".join(parts)


def config() -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "dtype": "bfloat16",
        "head_dim": HEAD_DIM, "hidden_act": "silu", "hidden_size": HIDDEN, "initializer_range": INIT_STD,
        "intermediate_size": MLP, "max_position_embeddings": MAX_POSITIONS, "mlp_bias": False,
        "num_attention_heads": HEADS, "num_hidden_layers": LAYERS, "num_key_value_heads": KV_HEADS,
        "pretraining_tp": 1, "rms_norm_eps": RMS_EPS,
        "rope_parameters": {"rope_theta": ROPE_THETA, "rope_type": "default"},
        "tie_word_embeddings": False, "use_cache": True, "vocab_size": VOCAB,
    }


def tokenizer() -> dict:
    """A word-level tokenizer: token i is the word ``w<i>`` (0 and 1 are bos and eos)."""
    vocab = {f"w{i}": i for i in range(VOCAB)}
    vocab["<|bos|>"], vocab["<|eos|>"] = vocab.pop("w0"), vocab.pop("w1")
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for t, i in (("<|bos|>", 0), ("<|eos|>", 1))]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
            "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
            "decoder": None, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<|eos|>"}}


def write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, sort_keys=True, indent=1) + "\n", encoding="utf-8")


def write_model(out: Path, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "config.json", config())
    write_json(out / "tokenizer.json", tokenizer())
    specs = tensor_specs()
    with open(out / "model.safetensors", "wb") as f:
        write_tensors(f, [(name, "BF16", shape, lambda name=name, shape=shape, std=std:
                           tensor_bytes(seed, name, shape, std)) for name, shape, std in specs],
                      metadata={"format": "pt", "seed": str(seed)})


def gate_lengths() -> dict[int, tuple[int, ...]]:
    """The gate shape's prompt lengths (bos included): each bucket's first fills it exactly."""
    rng = random.Random(GATE_PROMPT_SEED)
    out, below = {}, 64
    for bucket, count in GATE_COUNTS.items():
        out[bucket] = (bucket, *(rng.randint(below + 1, bucket) for _ in range(count - 1)))
        below = bucket
    return out


def bucket_name(bucket: int) -> str:
    return f"{bucket // 1024}k" if bucket >= 1024 else str(bucket)


def prompts(shape: str = "small") -> list[dict]:
    """Random tokens (never bos or eos); ``make_fixture`` prepends bos, so each text has length - 1 words."""
    rng = random.Random(PROMPT_SEED if shape == "small" else GATE_PROMPT_SEED + 1)
    out = []
    for bucket, lengths in (PROMPT_LENGTHS if shape == "small" else gate_lengths()).items():
        for i, n in enumerate(lengths):
            words = " ".join(f"w{rng.randrange(2, VOCAB)}" for _ in range(n - 1))
            out.append({"id": f"random-{bucket_name(bucket)}-{i:02d}", "prompt": words})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("models/llama-1b-seeded"))
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--fixture-out", type=Path, help="also write the prompt fixture into this folder")
    ap.add_argument("--fixture-shape", choices=("small", "gate"), default="small",
                    help="small: 8 prompts of 4K-32K tokens; gate: 64 prompts of 256-32K tokens")
    ap.add_argument("--fixture-only", action="store_true",
                    help="write only config.json and tokenizer.json into --out (what the fixture needs), no weights")
    args = ap.parse_args(argv)
    from kit.core.model.modeldigest import model_digest

    t0 = time.time()
    if args.fixture_only:
        if not args.fixture_out:
            ap.error("--fixture-only needs --fixture-out")
        args.out.mkdir(parents=True, exist_ok=True)
        write_json(args.out / "config.json", config())
        write_json(args.out / "tokenizer.json", tokenizer())
    else:
        write_model(args.out, args.seed)
        n_params = sum(int(np.prod(s)) for _, s, _ in tensor_specs())
        print(f"model: {args.out}  {n_params / 1e9:.3f} B parameters  {time.time() - t0:.1f} s")
        print(f"digest {model_digest(args.out)}")
    if args.fixture_out:
        from kit.core.records.fixture import load_fixture, make_fixture, summary_rows

        buckets = sorted(PROMPT_LENGTHS if args.fixture_shape == "small" else GATE_COUNTS)
        path = make_fixture(prompts(args.fixture_shape), args.out, args.fixture_out, buckets=buckets)
        for row in summary_rows(load_fixture(path)):
            print(f"  bucket {row['bucket']}: {row['cases']} cases, {row['min_tokens']}-{row['max_tokens']} tokens")
        print(f"fixture {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
