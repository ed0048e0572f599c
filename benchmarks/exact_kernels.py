"""What the kernels a host may choose do to an exact result: float32 against float64 rounded to float32.

Each configuration of torch's CPU kernels this host allows (ATen's capability, oneDNN's instruction set, MKL's
reproducibility branch, the thread count) runs the embedded model over the embedded fixture in a fresh
interpreter (the settings are read once, when torch starts), in float32 and in float64 (kit.core.host.portable).
Per configuration it prints how many prompts' reported top-k differ from the first configuration's, the largest
difference of the float64 logprobs before rounding, and the float64 result's margin (how far its values may move before
a float32 bit changes). docs/exact-baselines.md holds the figures.

    python benchmarks/exact_kernels.py [--top-k 25] [--json OUT] [--golden GOLDEN] [--dtypes float64]
                                       [--configs "native,aten default,..."]

``--golden`` also counts, per configuration, the prompts whose float64 result differs from that exact golden, and
exits 1 when any does (tests/e2e/gate/test_portable_exact.py runs it so).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "fixtures/tiny-llama"
FIXTURE = ROOT / "fixtures/44a3d799c03bd48c42dbda1f1b3a1739f398158ff2523764f33599ec2e872c8f.json"


def configurations(flags: set[str]) -> dict[str, dict[str, str]]:
    """Every kernel choice worth trying on a CPU with ``flags``: each library's widest and narrowest code it
    runs here, MKL's branches, and two threads."""
    out = {"native": {}, "aten default": {"ATEN_CPU_CAPABILITY": "default"},
           "aten avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
           "onednn sse41": {"ONEDNN_MAX_CPU_ISA": "SSE41"}, "onednn avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
           "mkl compatible": {"MKL_CBWR": "COMPATIBLE"}, "mkl avx2": {"MKL_CBWR": "AVX2"},
           "mkl auto": {"MKL_CBWR": "AUTO"},
           "avx2 pin": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"},
           "2 threads": {"PARITY_KIT_PROBE_THREADS": "2"}}
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        out["onednn avx512"] = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}
        out["mkl avx512"] = {"MKL_CBWR": "AVX512"}
    return out


def one(top_k: int, dtypes: list[str]) -> dict:
    """This interpreter's results: per dtype, each prompt's reported top-k, and the float64 values unrounded."""
    sys.path.insert(0, str(ROOT))
    import torch

    from kit.backends.hf.runtime import HfBackend
    from kit.core.records.fixture import load_fixture

    threads = int(os.environ.get("PARITY_KIT_PROBE_THREADS", "1"))
    prompts = load_fixture(FIXTURE).prompts
    out: dict = {"capability": torch.backends.cpu.get_cpu_capability(), "threads": threads}
    for dtype in dtypes:
        engine = HfBackend(str(MODEL), dtype=dtype, threads=threads)
        out[dtype] = {o.prompt_id: o.top_logprobs for o in engine.observe(prompts, top_k)}
        if dtype == "float64":
            out["raw"] = [values[:top_k] for values, _ in engine._candidates]
            out["margin"] = engine.release().get("portable_margin")
        engine.close()
    return out


def run(env: dict[str, str], top_k: int, dtypes: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--one", "--top-k", str(top_k), "--dtypes", ",".join(dtypes)],
                          env={**os.environ, **env}, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"a configuration failed: {env}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def differing(a: dict, b: dict) -> int:
    return sum(tuple(map(tuple, a[p])) != tuple(map(tuple, b[p])) for p in a)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top-k", type=int, default=25)
    parser.add_argument("--json", help="write every configuration's figures here")
    parser.add_argument("--golden", help="an exact float64 golden every configuration must reproduce")
    parser.add_argument("--dtypes", default="float32,float64", help="which of float32 and float64 to run")
    parser.add_argument("--configs", help="comma-separated configurations to run (default: every one)")
    args = parser.parse_args(argv)
    dtypes = args.dtypes.split(",")
    sys.path.insert(0, str(ROOT))
    from kit.core.host.runtime import _cpuinfo

    model, flags = _cpuinfo()
    print(f"CPU: {model}; configurations run in a fresh interpreter each, top {args.top_k}")
    golden = None
    if args.golden:
        from kit.core.baselines.golden import load_golden

        loaded = load_golden(args.golden)
        golden = {p: [list(t) for t in loaded.prompts[p]] for p in loaded.ids}
    first, rows, bad = None, [], 0
    every = configurations(flags or set())
    chosen = args.configs.split(",") if args.configs else list(every)
    unknown = [c for c in chosen if c not in every]
    if unknown:
        parser.error(f"unknown configuration {unknown[0]!r} (known here: {', '.join(every)})")
    for label in chosen:
        got = run(every[label], args.top_k, dtypes)
        first = first or got
        row = {"configuration": label, "capability": got["capability"], "threads": got["threads"]}
        for dtype in dtypes:
            row[f"{dtype}_prompts_differing"] = differing(got[dtype], first[dtype])
        if "float64" in dtypes:
            row["float64_largest_move"] = max(abs(x - y) for a, b in zip(got["raw"], first["raw"])
                                              for x, y in zip(a, b))
            row["margin"] = got["margin"]
        if golden is not None:
            row["prompts_differing_from_golden"] = sum(
                [list(t) for t in got["float64"][p][: len(golden[p])]] != golden[p] for p in golden)
            bad += row["prompts_differing_from_golden"]
        rows.append(row)
        print(json.dumps(row))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    if "--one" in sys.argv:
        k = int(sys.argv[sys.argv.index("--top-k") + 1])
        print(json.dumps(one(k, sys.argv[sys.argv.index("--dtypes") + 1].split(","))))
    else:
        sys.exit(main())
