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


def kernel_breakdown(forward) -> dict[str, float]:
    """Seconds of GPU kernel time per kind in one call of ``forward``."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        forward()
        torch.cuda.synchronize()
    out: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            kind = kernel_kind(e.name)
            out[kind] = out.get(kind, 0.0) + e.device_time / 1e6  # microseconds
    return out


def bench_hf(model_dir: str, buckets: list[int], kernels: list[str], warmup: int, repeats: int,
             compile: bool = True, breakdown: bool = False) -> list[dict]:
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

        def forward():
            with torch.inference_mode():
                if ctx:
                    with ctx():
                        return model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits
                return model(input_ids=ids, logits_to_keep=keep, use_cache=False).logits

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
                row["kernel_seconds"] = kernel_breakdown(forward)
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
    del model
    gc.collect()
    torch.cuda.empty_cache()
    return rows


def bench_jax(model_dir: str, buckets: list[int], warmup: int, repeats: int) -> list[dict]:
    from functools import partial

    import jax
    import numpy as np
    from transformers import AutoConfig

    from kit.backends.jax.llama import last_logits, load_params

    cfg = AutoConfig.from_pretrained(model_dir)
    device = jax.devices("gpu")[0]
    shape, params = load_params(model_dir, "bfloat16", device)
    weights = sum(x.nbytes for x in jax.tree_util.tree_leaves(params))
    rows = []
    for seq in buckets:
        fn = jax.jit(partial(last_logits, shape=shape, attention="cudnn"))
        ids = jax.device_put(np.random.default_rng(0).integers(2, shape.vocab, (1, seq), dtype=np.int32), device)
        last = jax.device_put(np.array([seq - 1], dtype=np.int32), device)
        for _ in range(warmup):
            fn(params, ids, last).block_until_ready()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(params, ids, last).block_until_ready()
            times.append(time.perf_counter() - t0)
        t = statistics.median(times)
        stats = device.memory_stats() or {}
        peak = stats.get("peak_bytes_in_use", 0)
        rows.append({"impl": "jax/cudnn", "seq": seq, "seconds": t, "tokens_per_s": seq / t,
                     "tflops": model_flops(cfg, seq, 1) / t / 1e12, "peak_gib": peak / GIB,
                     "weights_gib": weights / GIB, "above_weights_gib": (peak - weights) / GIB,
                     "activations_gib": activation_bytes(cfg, seq, 2) / GIB})
    return rows


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
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    buckets = [int(b) for b in args.buckets.split(",")]

    rate = matmul_rate()
    rows = bench_hf(args.model, buckets, args.kernels.split(","), args.warmup, args.repeats,
                    compile=not args.no_compile, breakdown=args.breakdown)
    if not args.no_jax:
        rows += bench_jax(args.model, buckets, args.warmup, args.repeats)
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
    if args.json:
        args.json.write_text(json.dumps({"device": device, "torch": torch.__version__, "matmul_tflops": rate,
                                         "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
