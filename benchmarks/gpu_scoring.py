#!/usr/bin/env python
"""Scoring speed and memory on a GPU, per bucket, against a bf16 matmul measured in the same run.

For each bucket one prompt of exactly that many tokens is scored (batch 1):

* hf, last position only (the kit's path), once per torch attention kernel;
* hf keeping the full [seq, vocab] logits (what the kit avoids);
* hf with each decoder layer under ``torch.compile`` (``kit.backends.hf.runtime.compile_layers``, the
  first kernel; ``--no-compile`` skips it), once with a static graph per bucket and once with
  the one dynamic-length graph the gate's ``compile = true`` uses: timed warm, the first call's
  seconds (tracing and compiling) reported apart, and its last-position probabilities compared
  with the uncompiled run's;
* jax (``kit.backends.jax.llama``, cuDNN attention), last position only.

FLOPs are counted, not measured, as the work the forward must do:

* matmuls: 2 x (parameters of the layers' projection matrices) x tokens, plus
  2 x hidden x vocab for every position projected to the vocabulary (1, or all
  of them for the full-logits run); the embedding is a lookup and counts nothing;
* attention: per layer and head, QK^T and PV over the causal triangle,
  2 x 2 x head_dim x seq (seq + 1) / 2.

The memory target: peak allocated memory at most weights + activations + 2 GiB,
where activations is the working set of one layer at its widest point (the MLP:
the residual stream, its norm, gate, up, silu(gate) and their product, each
[seq, width]); no [seq, vocab] tensor is part of it.

``--breakdown`` adds, at the largest bucket, the share of GPU time in matmuls, attention and
everything else, from torch's profiler, for the uncompiled and compiled runs.

``--parts`` times, at the largest bucket, what a layer is made of, each alone at the model's shapes, in
torch and in jax: the causal attention (cuDNN) and the layer's seven projections. Their rates say where the
"% of matmul" figure is capped: attention is about half the FLOPs at 32K, so the model cannot run faster than
its attention kernel allows even with every elementwise operation free (the "ceiling" line). ``--unroll``
adds a jax row with the layer scan unrolled that many layers per step.

``--float32 LENGTHS`` times only the float32 paths (jax-f32 before and after the 2026-12-04 change, hf-f32)
at those lengths, first call and warm, with each framework's float32 matmul rate. ``--score-fixture CASE``
scores a whole fixture as one case of descriptors/gpu-h200-64.toml would, bucket by bucket, outside the gate.

Prints a table; ``--json PATH`` also writes every number.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # jax must not take the GPU from torch

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GIB = 1024 ** 3


def cuda_time(fn, warmup: int, repeats: int) -> float:
    """Median seconds of ``fn`` between CUDA events, after warm-up runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return statistics.median(times)


def matmul_rate(n: int = 8192, repeats: int = 20) -> float:
    """bf16 TFLOP/s of an n x n x n product on random data (zeros run faster than real data)."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t = cuda_time(lambda: a @ b, warmup=5, repeats=repeats)
    return 2 * n ** 3 / t / 1e12


def model_flops(cfg, seq: int, projected: int) -> float:
    h, m, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    d = getattr(cfg, "head_dim", None) or h // heads
    per_layer = h * heads * d * 2 + h * kv * d * 2 + 3 * h * m  # q, o; k, v; gate, up, down
    matmuls = 2 * per_layer * layers * seq + 2 * h * cfg.vocab_size * projected
    attention = layers * heads * 2 * 2 * d * seq * (seq + 1) / 2
    return matmuls + attention


def activation_bytes(cfg, seq: int, dtype_bytes: int) -> int:
    return seq * (2 * cfg.hidden_size + 4 * cfg.intermediate_size) * dtype_bytes


def kernel_kind(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("fmha", "flash", "sdpa", "attention", "attn")):
        return "attention"
    if any(k in n for k in ("gemm", "nvjet", "cutlass", "xmma", "cublas")):
        return "matmul"
    return "fused (triton)" if n.startswith("triton") else "other"


def kernel_breakdown(forward, top: int = 3) -> tuple[dict[str, float], list[tuple[str, float, int]]]:
    """Seconds of GPU kernel time per kind in one call of ``forward``, and the ``top`` attention kernels
    by name (name, seconds, calls): which kernel a path really ran, not only how long attention took."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        forward()
        torch.cuda.synchronize()
    out: dict[str, float] = {}
    names: dict[str, list] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            kind = kernel_kind(e.name)
            out[kind] = out.get(kind, 0.0) + e.device_time / 1e6  # microseconds
            if kind == "attention":
                entry = names.setdefault(e.name, [0.0, 0])
                entry[0] += e.device_time / 1e6
                entry[1] += 1
    ranked = sorted(((n, s, c) for n, (s, c) in names.items()), key=lambda x: -x[1])[:top]
    return out, ranked


def part_flops(cfg, seq: int) -> dict[str, float]:
    """One layer's FLOPs at ``seq`` tokens: its causal attention and its seven projections."""
    h, m = cfg.hidden_size, cfg.intermediate_size
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    d = getattr(cfg, "head_dim", None) or h // heads
    return {"attention": heads * 2 * 2 * d * seq * (seq + 1) / 2,
            "projections": 2 * seq * (h * heads * d * 2 + h * kv * d * 2 + 3 * h * m)}


def torch_parts(cfg, seq: int, warmup: int, repeats: int) -> dict[str, float]:
    """Seconds of one layer's attention (cuDNN SDPA, causal, key/value heads repeated as the model's
    sdpa path does) and of its seven projections, each alone on random bfloat16 data."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    h, m = cfg.hidden_size, cfg.intermediate_size
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    d = getattr(cfg, "head_dim", None) or h // heads
    bf = dict(device="cuda", dtype=torch.bfloat16)
    q = torch.randn(1, heads, seq, d, **bf)
    k = torch.randn(1, kv, seq, d, **bf).repeat_interleave(heads // kv, dim=1)
    v = torch.randn(1, kv, seq, d, **bf).repeat_interleave(heads // kv, dim=1)

    # The closures below read tensors the `del` after the timings frees; ruff reads that as undefined (F821),
    # but each is called before it.
    def attention():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: F821

    x = torch.randn(seq, h, **bf)
    a = torch.randn(seq, heads * d, **bf)
    g = torch.randn(seq, m, **bf)
    w = {"q": torch.randn(heads * d, h, **bf), "k": torch.randn(kv * d, h, **bf), "v": torch.randn(kv * d, h, **bf),
         "o": torch.randn(h, heads * d, **bf), "gate": torch.randn(m, h, **bf), "up": torch.randn(m, h, **bf),
         "down": torch.randn(h, m, **bf)}

    def projections():
        return (x @ w["q"].T, x @ w["k"].T, x @ w["v"].T, a @ w["o"].T, x @ w["gate"].T, x @ w["up"].T,  # noqa: F821
                g @ w["down"].T)  # noqa: F821

    with torch.inference_mode():
        out = {"attention": cuda_time(attention, warmup, repeats),
               "projections": cuda_time(projections, warmup, repeats)}
    del q, k, v, x, a, g, w
    torch.cuda.empty_cache()
    return out


def jax_parts(shape, seq: int, warmup: int, repeats: int, platform: str = "gpu",
              attention: str = "cudnn", heads_first: bool = False) -> dict[str, float]:
    """The same two parts in jax (``jax.nn.dot_product_attention`` with ``attention``, grouped key/value
    heads as the backend passes them; the projections as its einsums). ``heads_first`` calls jax's own
    cuDNN attention (a private module) on [batch, heads, seq, dim] inputs, torch's layout, instead."""
    import jax
    import jax.numpy as jnp

    from kit.backends.jax.llama import attend

    device = jax.devices(platform)[0]
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 16))
    n, kv, d, h, m = shape.heads, shape.kv_heads, shape.head_dim, shape.hidden, shape.mlp

    def rand(*dims):
        return jax.device_put(jax.random.normal(next(keys), dims, dtype=jnp.bfloat16), device)

    q, k, v = rand(1, seq, n, d), rand(1, seq, kv, d), rand(1, seq, kv, d)
    x, a, g = rand(1, seq, h), rand(1, seq, n * d), rand(1, seq, m)
    w = {"wq": rand(n * d, h), "wk": rand(kv * d, h), "wv": rand(kv * d, h), "wo": rand(h, n * d),
         "w_gate": rand(m, h), "w_up": rand(m, h), "w_down": rand(h, m)}
    attn = jax.jit(partial(attend, attention=attention, precision=jax.lax.Precision.DEFAULT))
    if heads_first:
        from jax._src.cudnn.fused_attention_stablehlo import MaskType
        from jax._src.cudnn.fused_attention_stablehlo import dot_product_attention as cudnn_attention

        q, k, v = (jnp.swapaxes(t, 1, 2) for t in (q, k, v))
        q, k, v = (jax.block_until_ready(jnp.asarray(t, copy=True)) for t in (q, k, v))
        attn = jax.jit(partial(cudnn_attention, scale=1.0 / d ** 0.5, mask_type=MaskType.CAUSAL, qkv_layout="BNTH"))

    @jax.jit
    def projections(x, a, g, w):
        mm = jnp.einsum
        return (mm("bsh,oh->bso", x, w["wq"]), mm("bsh,oh->bso", x, w["wk"]), mm("bsh,oh->bso", x, w["wv"]),
                mm("bso,ho->bsh", a, w["wo"]), mm("bsh,mh->bsm", x, w["w_gate"]), mm("bsh,mh->bsm", x, w["w_up"]),
                mm("bsm,hm->bsh", g, w["w_down"]))

    return {"attention": wall_time(lambda: attn(q, k, v), warmup, repeats),
            "projections": wall_time(lambda: projections(x, a, g, w), warmup, repeats)}


def wall_time(fn, warmup: int, repeats: int) -> float:
    """Median seconds of ``fn`` until its jax outputs are ready, after warm-up runs."""
    import jax

    for _ in range(warmup):
        jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def parts_rows(impl: str, parts: dict[str, float], cfg, seq: int, whole_s: float | None, rate: float) -> dict:
    """The parts' rates, their share of the whole forward, and the ceiling: the model's rate as a fraction
    of the matmul rate if everything besides attention and projections took no time."""
    flops = part_flops(cfg, seq)
    layers = cfg.num_hidden_layers
    row = {"impl": impl, "seq": seq, "seconds": parts,
           "tflops": {k: flops[k] / parts[k] / 1e12 for k in parts}}
    row["fraction_of_matmul"] = {k: v / rate for k, v in row["tflops"].items()}
    floor_s = layers * (parts["attention"] + parts["projections"])
    row["ceiling_fraction"] = model_flops(cfg, seq, 1) / floor_s / 1e12 / rate
    if whole_s:
        row["whole_s"] = whole_s
        row["rest_s"] = whole_s - floor_s  # norms, rotary, SiLU, residual adds, the head, launches
    return row


def use_contiguous_sdpa(model) -> None:
    """Switch ``model`` to transformers' SDPA attention with q, k and v made contiguous first: under
    torch.compile the attention kernels took longer than the same kernels uncompiled, and the layout
    inductor hands them is the suspect."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def forward(module, query, key, value, attention_mask, **kwargs):
        return sdpa_attention_forward(module, query.contiguous(), key.contiguous(), value.contiguous(),
                                      attention_mask, **kwargs)

    AttentionInterface.register("sdpa_contiguous", forward)
    AttentionMaskInterface.register("sdpa_contiguous", sdpa_mask)
    model.set_attn_implementation("sdpa_contiguous")


def bench_hf(model_dir: str, buckets: list[int], kernels: list[str], warmup: int, repeats: int,
             compile: bool = True, breakdown: bool = False, contiguous: bool = False) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import AutoModelForCausalLM

    from kit.backends.hf.runtime import compile_layers

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16,
                                                 attn_implementation="sdpa").to("cuda").eval()
    cfg = model.config
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    choice = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
              "efficient": SDPBackend.EFFICIENT_ATTENTION}
    gen = torch.Generator().manual_seed(0)
    inputs = {seq: torch.randint(2, cfg.vocab_size, (1, seq), generator=gen).to("cuda") for seq in buckets}
    eager_probs = {}
    rows = []

    def measure(impl: str, seq: int, kernel: str, keep: int, first_call: bool = False,
                profile: bool = False) -> dict | None:
        ids = inputs[seq]
        ctx = (lambda: sdpa_kernel([choice[kernel]])) if kernel in choice else None

        def forward():  # `model` is freed by the `del` after every measure() call (F821 is ruff reading that)
            with torch.inference_mode():
                if ctx:
                    with ctx():
                        return model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits  # noqa: F821
                return model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits  # noqa: F821

        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        row: dict = {"impl": impl, "seq": seq}
        try:
            if first_call:  # compiling happens here, outside the timed calls
                t0 = time.perf_counter()
                forward()
                torch.cuda.synchronize()
                row["compile_s"] = time.perf_counter() - t0
                torch.cuda.reset_peak_memory_stats()  # compiling's own buffers are not scoring's peak
            t = cuda_time(forward, warmup, repeats)
            probs = torch.softmax(forward()[0, -1].float(), -1)
        except RuntimeError as exc:  # a kernel that refuses this shape is a result, not a crash
            rows.append({**row, "error": str(exc).splitlines()[0]})
            return None
        projected = 1 if keep == 1 else seq
        peak = torch.cuda.max_memory_allocated()
        row.update({
            "seconds": t, "tokens_per_s": seq / t, "tflops": model_flops(cfg, seq, projected) / t / 1e12,
            "peak_gib": peak / GIB, "weights_gib": weights / GIB, "above_weights_gib": (peak - base) / GIB,
            "activations_gib": activation_bytes(cfg, seq, 2) / GIB,
        })
        if profile:
            try:
                row["kernel_seconds"], row["attention_kernels"] = kernel_breakdown(forward)
            except Exception as exc:  # the profiler is a nicety: its failure must not lose the timings
                row["breakdown_error"] = repr(exc)
        if impl == f"hf/{kernels[0]}":
            eager_probs[seq] = probs
        elif seq in eager_probs:
            row["max_prob_diff_vs_uncompiled"] = (probs - eager_probs[seq]).abs().max().item()
        rows.append(row)
        return row

    largest = max(buckets)
    for seq in buckets:
        for kernel in kernels:
            measure(f"hf/{kernel}", seq, kernel, 1, profile=breakdown and seq == largest and kernel == kernels[0])
        measure(f"hf/{kernels[0]} full-logits", seq, kernels[0], 0)  # transformers keeps every position
    if compile:
        for dynamic, label in ((False, "layers compiled"), (True, "layers compiled, dynamic")):
            torch._dynamo.reset()  # forget the other variant's graphs
            compile_layers(model, dynamic=dynamic)
            for seq in buckets:
                measure(f"hf/{kernels[0]} {label}", seq, kernels[0], 1, first_call=True,
                        profile=breakdown and seq == largest)
        if contiguous:
            use_contiguous_sdpa(model)
            compile_layers(model, dynamic=True)
            for seq in buckets:
                measure(f"hf/{kernels[0]} compiled, q/k/v contiguous", seq, kernels[0], 1, first_call=True,
                        profile=breakdown and seq == largest)
    del model
    gc.collect()
    torch.cuda.empty_cache()
    return rows


def bench_jax(model_dir: str, buckets: list[int], warmup: int, repeats: int, unroll: int = 1) -> list[dict]:
    """jax with cuDNN attention per bucket; with ``unroll`` > 1 a second row per bucket with the layer
    scan unrolled that many layers per step."""
    import jax
    import numpy as np
    from transformers import AutoConfig

    from kit.backends.jax.llama import last_logits, load_params

    cfg = AutoConfig.from_pretrained(model_dir)
    device = jax.devices("gpu")[0]
    shape, params = load_params(model_dir, "bfloat16", device)
    weights = sum(x.nbytes for x in jax.tree_util.tree_leaves(params))
    rows = []
    variants = [("jax/cudnn", 1)] + ([(f"jax/cudnn unroll {unroll}", unroll)] if unroll > 1 else [])
    for seq in buckets:
        ids = jax.device_put(np.random.default_rng(0).integers(2, shape.vocab, (1, seq), dtype=np.int32), device)
        last = jax.device_put(np.array([seq - 1], dtype=np.int32), device)
        for impl, n in variants:
            fn = jax.jit(partial(last_logits, shape=shape, attention="cudnn", unroll=n))
            # Timed at once, in this iteration (B023), before the `del params` below (F821).
            t = wall_time(lambda: fn(params, ids, last), warmup, repeats)  # noqa: B023, F821
            stats = device.memory_stats() or {}
            peak = stats.get("peak_bytes_in_use", 0)
            rows.append({"impl": impl, "seq": seq, "seconds": t, "tokens_per_s": seq / t,
                         "tflops": model_flops(cfg, seq, 1) / t / 1e12, "peak_gib": peak / GIB,
                         "weights_gib": weights / GIB, "above_weights_gib": (peak - weights) / GIB,
                         "activations_gib": activation_bytes(cfg, seq, 2) / GIB})
    del params
    return rows


def rectangular_chunked_attention(q, k, v, precision, block=512):
    """The chunked attention as it was before 2026-12-04 (kept here to measure against): 512 query rows at a
    time through ``lax.map``, each scored against every key (the masked ones included), k and v repeated."""
    import jax
    import jax.numpy as jnp

    b, s, n, d = q.shape
    group = n // k.shape[2]
    k = jnp.repeat(k, group, axis=2)
    v = jnp.repeat(v, group, axis=2)
    block = block if s % block == 0 else s
    key_pos = jnp.arange(s)

    def one_block(start):
        qb = jax.lax.dynamic_slice_in_dim(q, start, block, axis=1)
        scores = jnp.einsum("bqnd,bknd->bnqk", qb, k, precision=precision,
                            preferred_element_type=jnp.float32) * (1.0 / d ** 0.5)
        query_pos = start + jnp.arange(block)
        scores = jnp.where(key_pos[None, None, None, :] <= query_pos[None, None, :, None], scores, -jnp.inf)
        probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
        return jnp.einsum("bnqk,bknd->bqnd", probs, v, precision=precision)

    blocks = jax.lax.map(one_block, jnp.arange(0, s, block))
    return jnp.moveaxis(blocks, 0, 1).reshape(b, s, n, d)


# name -> (attention: "rectangular" or None for the backend's, per-program XLA options, the dot algorithm preset of
# every float32 matmul: None for the backend's HIGHEST, or a jax.lax.DotAlgorithmPreset name that emulates float32
# on the tensor cores with several bfloat16 or TF32 products, whose time and agreement with hf-f32 are what is asked)
FLOAT32_VARIANTS = {
    "jax-f32 before (rectangular, lax.map, Triton GEMM)": ("rectangular", {}, None),
    "jax-f32 triangular, Triton GEMM": (None, {}, None),
    "jax-f32 triangular, cuBLAS (the backend's)": (None, {"xla_gpu_enable_triton_gemm": False}, None),
    "jax-f32 triangular, BF16x6 dots": (None, {}, "BF16_BF16_F32_X6"),
    "jax-f32 triangular, BF16x9 dots": (None, {}, "BF16_BF16_F32_X9"),
    "jax-f32 triangular, TF32x3 dots": (None, {}, "TF32_TF32_F32_X3"),
}


def bench_float32(model_dir: str, lengths: list[int], variants: list[str], repeats: int) -> list[dict]:
    """Float32, the gate's jax-f32 and hf-f32 paths, one prompt of each length: first call (tracing, compiling,
    autotuning) and warm seconds; and each path's f32 matmul rate (torch without TF32, jax at HIGHEST).

    Written 2026-12-04 beside the change it measures; that day's figures in docs/gpu-figures.md came from
    scoring the whole fixture instead (this section had not yet run on a GPU)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import kit.backends.jax.llama as llama
    from kit.backends.hf import attention as hf_attention

    rows = []
    n = 8192
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(n, n, device="cuda")
    rows.append({"impl": "matmul f32 torch (no TF32)", "tflops": 2 * n ** 3 / cuda_time(lambda: a @ a, 3, 10) / 1e12})  # noqa: F821
    del a
    x = jax.random.normal(jax.random.PRNGKey(0), (n, n), dtype=jnp.float32)
    mm = jax.jit(lambda x: jnp.matmul(x, x, precision=jax.lax.Precision.HIGHEST))
    rows.append({"impl": "matmul f32 jax HIGHEST", "tflops": 2 * n ** 3 / wall_time(lambda: mm(x), 3, 10) / 1e12})  # noqa: F821
    del x
    for r in rows:
        print(f"{r['impl']:<44} {r['tflops']:.1f} TFLOP/s", flush=True)

    from transformers import AutoConfig
    cfg = AutoConfig.from_pretrained(model_dir)
    device = jax.devices("gpu")[0]
    shape, params = llama.load_params(model_dir, "float32", device)
    backend_attention = llama.chunked_causal_attention
    for name in variants:
        fn_name, options, algorithm = FLOAT32_VARIANTS[name]
        llama.chunked_causal_attention = rectangular_chunked_attention if fn_name else backend_attention
        if algorithm is not None and not hasattr(jax.lax.DotAlgorithmPreset, algorithm):
            print(f"{name:<44} not in this jax ({jax.__version__})", flush=True)
            continue
        llama.FLOAT32_PRECISION = (llama.float32_precision if algorithm is None
                                   else partial(getattr, jax.lax.DotAlgorithmPreset, algorithm))
        for seq in lengths:
            ids = jax.device_put(np.random.default_rng(0).integers(2, shape.vocab, (1, seq), dtype=np.int32), device)
            last = jax.device_put(np.array([seq - 1], dtype=np.int32), device)
            # The backend's own choice at each length: the unrolled blocks, or the looped ones where those would not
            # fit the device (kit.backends.jax.runtime); out of memory here is retried looped, as the backend would.
            for attention in ("chunked", llama.LOOPED):
                fn = jax.jit(partial(llama.last_logits, shape=shape, attention=attention),
                             compiler_options=options or None)
                t0 = time.perf_counter()
                try:
                    out = jax.block_until_ready(fn(params, ids, last))
                    error = None
                    break
                except Exception as exc:  # an algorithm this XLA cannot lower, or memory: say so and go on
                    error = f"{type(exc).__name__}: {exc}"
                    if "RESOURCE_EXHAUSTED" not in error or fn_name:
                        break
            if error is not None:
                print(f"{name:<44}{seq:>7}  failed: {error.splitlines()[0][:160]}", flush=True)
                rows.append({"impl": name, "seq": seq, "error": error[:500]})
                continue
            first = time.perf_counter() - t0
            t = wall_time(lambda: fn(params, ids, last), 0, repeats)  # noqa: B023, F821
            probs = np.asarray(jax.nn.softmax(out[0]))
            row = {"impl": name, "seq": seq, "attention": attention, "first_s": first, "seconds": t,
                   "tflops": model_flops(cfg, seq, 1) / t / 1e12, "probs": probs}
            rows.append(row)
            print(f"{name:<44}{seq:>7}  first call {first:7.2f} s  warm {t:.4f} s  {row['tflops']:.1f} TFLOP/s",
                  flush=True)
    llama.chunked_causal_attention = backend_attention
    llama.FLOAT32_PRECISION = llama.float32_precision
    del params
    gc.collect()

    from transformers import AutoModelForCausalLM

    hf_attention.register()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation=hf_attention.NAME).to("cuda").eval()
    for seq in lengths:
        ids = torch.from_numpy(np.random.default_rng(0).integers(2, shape.vocab, (1, seq), dtype=np.int64)).cuda()

        def forward():
            with torch.inference_mode():
                return model(input_ids=ids, logits_to_keep=1, use_cache=False).logits  # noqa: B023, F821

        t0 = time.perf_counter()
        out = forward()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        t = cuda_time(forward, 0, repeats)
        probs = torch.softmax(out[0, -1].float(), -1).cpu().numpy()
        row = {"impl": "hf-f32 (sdpa_repeat_kv)", "seq": seq, "first_s": first, "seconds": t,
               "tflops": model_flops(cfg, seq, 1) / t / 1e12}
        for r in rows:  # every jax variant against hf at this length: they must agree to float32 rounding
            if r.get("seq") == seq and "probs" in r:
                r["max_prob_diff_vs_hf"] = float(np.abs(r.pop("probs") - probs).max())
        rows.append(row)
        print(f"{row['impl']:<44}{seq:>7}  first call {first:7.2f} s  warm {t:.4f} s  {row['tflops']:.1f} TFLOP/s",
              flush=True)
    for r in rows:
        if "max_prob_diff_vs_hf" in r:
            print(f"{r['impl']:<44}{r['seq']:>7}  max |dp| vs hf-f32 {r['max_prob_diff_vs_hf']:.3g}")
    del model
    gc.collect()
    torch.cuda.empty_cache()
    return rows


def score_fixture(model_dir: str, fixture: str, case: str, out: Path | None, padding: str = "auto") -> dict:
    """One gate case's backend scoring every prompt of ``fixture``, bucket by bucket, outside the gate (no
    notebook, no papermill): the seconds of loading and of each bucket, compiling included, as the case's
    "scoring" time counts them; ``out`` receives the top log-probabilities per prompt (JSON), to compare
    with the golden or with another run. Cases: hf-f32 (sdpa_repeat_kv), hf-bf16 (layers compiled), jax-f32,
    jax-bf16, as descriptors/gpu-h200-64.toml sets them. How the 2026-12-04 float32 figures were taken
    (several at once, in separate processes, for the four-case figure). ``padding``: the jax cases' option
    (kit.backends.jax.options), to time one padding against another in one run."""
    from kit.core.records.fixture import load_fixture

    prompts = load_fixture(fixture).prompts
    dtype = "float32" if case.endswith("f32") else "bfloat16"
    t0 = time.perf_counter()
    if case.startswith("hf"):
        from kit.backends.hf.runtime import HfBackend

        attn = {"attn_implementation": "sdpa_repeat_kv"} if dtype == "float32" else {"compile": True}
        backend = HfBackend(model_dir, dtype, device="cuda", **attn)
    else:
        from kit.backends.jax.runtime import JaxBackend

        backend = JaxBackend(model_dir, dtype, platform="gpu", padding=padding)
    times = {"load": time.perf_counter() - t0}
    observed = {}
    for bucket in sorted({p.bucket for p in prompts}):
        t = time.perf_counter()
        batch = [p for p in prompts if p.bucket == bucket]
        observed.update({p.id: o.top_logprobs for p, o in zip(batch, backend.observe(batch, 64))})
        times[str(bucket)] = time.perf_counter() - t
        print(case, bucket, f"{times[str(bucket)]:.1f} s", flush=True)
    times["scoring"] = sum(v for k, v in times.items() if k != "load")
    print(case, "load", f"{times['load']:.1f} s", "scoring", f"{times['scoring']:.1f} s", flush=True)
    if out:
        out.write_text(json.dumps({"case": case, "seconds": times, "top_logprobs": observed}) + "\n")
    return times


def measure_parts(model_dir: str, seq: int, rows: list[dict], rate: float, warmup: int, repeats: int,
                  jax_too: bool, heads_first: bool = False) -> list[dict]:
    """parts_rows for torch and jax at ``seq``, each beside its whole forward's time from ``rows``."""
    from transformers import AutoConfig

    from kit.backends.jax.llama import shape_from_config

    cfg = AutoConfig.from_pretrained(model_dir)
    whole = {r["impl"]: r["seconds"] for r in rows if r.get("seq") == seq and "seconds" in r}
    torch_whole = next((s for impl, s in whole.items() if impl.startswith("hf/cudnn") and "compiled" not in impl
                        and "full" not in impl), None)
    out = [parts_rows("parts: torch cuDNN SDPA", torch_parts(cfg, seq, warmup, repeats), cfg, seq, torch_whole, rate)]
    if jax_too:
        shape = shape_from_config(json.loads((Path(model_dir) / "config.json").read_text()))
        out.append(parts_rows("parts: jax cuDNN", jax_parts(shape, seq, warmup, repeats), cfg, seq,
                              whole.get("jax/cudnn"), rate))
        if heads_first:
            out.append(parts_rows("parts: jax cuDNN, BNTH layout",
                                  jax_parts(shape, seq, warmup, repeats, heads_first=True), cfg, seq, None, rate))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--buckets", default="4096,16384,32768")
    ap.add_argument("--kernels", default="auto,flash,cudnn", help="torch SDPA kernels to time; the first "
                    "also runs the full-logits comparison")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile'd hf rows")
    ap.add_argument("--breakdown", action="store_true", help="GPU time per kernel kind at the largest bucket")
    ap.add_argument("--parts", action="store_true", help="attention and projections alone at the largest bucket, "
                    "and the rate they cap the model at")
    ap.add_argument("--unroll", type=int, default=1, help="also time jax with the layer scan unrolled this much")
    ap.add_argument("--contiguous", action="store_true", help="also time hf compiled with q, k and v made "
                    "contiguous before SDPA, and jax's cuDNN attention alone on [batch, heads, seq, dim] inputs")
    ap.add_argument("--float32", default="", help="only the float32 paths (jax-f32, hf-f32) at these comma-separated "
                    "lengths: first-call and warm seconds per variant (--f32-variants), f32 matmul rates")
    ap.add_argument("--f32-variants", default=";".join(FLOAT32_VARIANTS), help="semicolon-separated names of "
                    "FLOAT32_VARIANTS (the names hold commas)")
    ap.add_argument("--score-fixture", metavar="CASE", help="only score every prompt of --fixture as this case of "
                    "descriptors/gpu-h200-64.toml would (hf-f32, hf-bf16, jax-f32, jax-bf16); --json gets its outputs")
    ap.add_argument("--fixture", help="the fixture --score-fixture scores",
                    default="fixtures/819217be9528f0da14324cf54cd89028ff0bb3e0226b83c666487dd457760374.json")
    ap.add_argument("--padding", default="auto", choices=("auto", "bucket", "steps"),
                    help="--score-fixture's padding of the jax cases (kit.backends.jax.options)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    buckets = [int(b) for b in args.buckets.split(",")]
    if args.score_fixture:
        score_fixture(args.model, args.fixture, args.score_fixture, args.json, args.padding)
        return 0
    if args.float32:
        rows = bench_float32(args.model, [int(x) for x in args.float32.split(",")], args.f32_variants.split(";"),
                             args.repeats)
        if args.json:
            args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                             "rows": rows}, indent=1) + "\n")
        return 0

    rate = matmul_rate()
    rows = bench_hf(args.model, buckets, args.kernels.split(","), args.warmup, args.repeats,
                    compile=not args.no_compile, breakdown=args.breakdown, contiguous=args.contiguous)
    if not args.no_jax:
        rows += bench_jax(args.model, buckets, args.warmup, args.repeats, unroll=args.unroll)
    parts = []
    if args.parts:
        parts = measure_parts(args.model, max(buckets), rows, rate, args.warmup, args.repeats, not args.no_jax,
                              heads_first=args.contiguous)
    device = torch.cuda.get_device_name()
    print(f"{device}; torch {torch.__version__}; bf16 matmul 8192^3: {rate:.0f} TFLOP/s")
    print(f"{'impl':<34}{'tokens':>7}{'s':>9}{'tok/s':>10}{'TFLOP/s':>9}{'% mm':>6}"
          f"{'peak GiB':>10}{'weights':>9}{'act est':>9}{'target':>8}")
    for r in rows:
        if "error" in r:
            print(f"{r['impl']:<34}{r['seq']:>7}  refused: {r['error'][:80]}")
            continue
        r["fraction_of_matmul"] = r["tflops"] / rate
        within = r["peak_gib"] <= r["weights_gib"] + r["activations_gib"] + 2
        r["memory_target_met"] = within
        print(f"{r['impl']:<34}{r['seq']:>7}{r['seconds']:>9.4f}{r['tokens_per_s']:>10.0f}{r['tflops']:>9.0f}"
              f"{100 * r['fraction_of_matmul']:>5.0f}%{r['peak_gib']:>10.2f}{r['weights_gib']:>9.2f}"
              f"{r['activations_gib']:>9.2f}{'ok' if within else 'MISSED':>8}"
              + (f"  compile {r['compile_s']:.1f} s" if "compile_s" in r else "")
              + (f"  max |dp| vs uncompiled {r['max_prob_diff_vs_uncompiled']:.3g}"
                 if "max_prob_diff_vs_uncompiled" in r else ""))
        if "kernel_seconds" in r:
            ks = r["kernel_seconds"]
            total = sum(ks.values())
            print(" " * 34 + f"GPU time {total:.4f} s: " + ", ".join(
                f"{k} {v:.4f} s ({100 * v / total:.0f}%)" for k, v in sorted(ks.items(), key=lambda kv: -kv[1])))
            for name, s, calls in r.get("attention_kernels", []):
                print(" " * 34 + f"  {s:.4f} s in {calls} calls of {name[:110]}")
    for p in parts:
        fr, tf = p["fraction_of_matmul"], p["tflops"]
        print(f"{p['impl']:<34}{p['seq']:>7}  attention alone {p['seconds']['attention']:.4f} s/layer "
              f"{tf['attention']:.0f} TFLOP/s ({100 * fr['attention']:.0f}% mm); projections alone "
              f"{p['seconds']['projections']:.4f} s/layer {tf['projections']:.0f} TFLOP/s "
              f"({100 * fr['projections']:.0f}% mm); ceiling {100 * p['ceiling_fraction']:.0f}%"
              + (f"; rest of the forward {p['rest_s']:.4f} s" if "rest_s" in p else ""))
    if args.json:
        args.json.write_text(json.dumps({"device": device, "torch": torch.__version__, "matmul_tflops": rate,
                                         "rows": rows, "parts": parts}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
