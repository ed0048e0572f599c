"""The memory a float32 jax forward asks XLA for at a long prompt, by the chunked attention's query block.

XLA allocates a program's intermediate values as one block (its temp size), decided when it compiles: this compiles
``kit.backends.jax.llama.last_logits`` with the chunked attention for a model shape on abstract inputs (nothing is
computed, no weights are needed) and reads the compiled program's memory analysis, for the query block the backend
chooses and for the others given, unrolled (``chunked``) and one block at a time (``chunked-looped``). On a CPU this
is XLA's CPU buffer assignment, not a GPU's; what it shows is how the need grows with the block and with the way
the blocks run, against one block's scores (heads x block x seq floats).

    python benchmarks/attention_memory.py [--seq 32768] [--blocks 512,1024,2048] [--json OUT]

The default shape is the seeded 1.5B GPU model of scripts/make_gpu_model.py.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

log = logging.getLogger("attention_memory")
GPU_MODEL = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 16,
             "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 8192, "vocab_size": 128256,
             "rms_norm_eps": 1e-5,
             "rope_theta": 500000.0, "tie_word_embeddings": False}


def temp_bytes(config: dict, seq: int, block: int | None = None, attention: str = "chunked") -> dict:
    import jax
    import jax.numpy as jnp

    from kit.backends.jax import llama

    shape = llama.shape_from_config(config)
    chosen = llama.query_block
    if block is not None:
        llama.query_block = lambda s: block  # noqa: E731 (the rule replaced for this compile only)
    try:
        return _compiled_temp(jax, jnp, llama, shape, seq, attention) | {"block": block or chosen(seq),
                                                                          "attention": attention}
    finally:
        llama.query_block = chosen


def _compiled_temp(jax, jnp, llama, shape, seq: int, attention: str) -> dict:
    f32 = jnp.float32
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    layers = {"attn_norm": (shape.hidden,), "wq": (q, shape.hidden), "wk": (kv, shape.hidden),
              "wv": (kv, shape.hidden), "wo": (shape.hidden, q), "mlp_norm": (shape.hidden,),
              "w_gate": (shape.mlp, shape.hidden), "w_up": (shape.mlp, shape.hidden),
              "w_down": (shape.hidden, shape.mlp)}
    params = {"embed": jax.ShapeDtypeStruct((shape.vocab, shape.hidden), f32),
              "layers": {k: jax.ShapeDtypeStruct((shape.layers, *v), f32) for k, v in layers.items()},
              "norm": jax.ShapeDtypeStruct((shape.hidden,), f32),
              "lm_head": jax.ShapeDtypeStruct((shape.vocab, shape.hidden), f32)}
    ids, last = jax.ShapeDtypeStruct((1, seq), jnp.int32), jax.ShapeDtypeStruct((1,), jnp.int32)

    def forward(p, i, n):
        return llama.last_logits(p, i, n, shape=shape, attention=attention)

    compiled = jax.jit(forward).lower(params, ids, last).compile()
    scores = shape.heads * seq * 4  # bytes of one query row's float32 scores, every head
    return {"temp_bytes": compiled.memory_analysis().temp_size_in_bytes, "row_scores_bytes": scores}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", type=int, default=32768)
    ap.add_argument("--blocks", default="512,1024,2048", help="comma-separated query blocks to compile beside the "
                    "backend's own choice")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    gib = 2 ** 30
    from kit.backends.jax.llama import LOOPED

    rows = [temp_bytes(GPU_MODEL, args.seq)] + [temp_bytes(GPU_MODEL, args.seq, int(b), a) for a in ("chunked", LOOPED)
                                                for b in args.blocks.split(",")]
    log.info(f"seq {args.seq} (the backend's block: {rows[0]['block']} rows)")
    log.info("| attention | query block | temp (GiB) | one block's scores (GiB) |\n| --- | ---: | ---: | ---: |")
    for r in rows[1:]:
        log.info(f"| {r['attention']} | {r['block']} | {r['temp_bytes'] / gib:.2f} | "
                 f"{r['block'] * r['row_scores_bytes'] / gib:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({"seq": args.seq, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
