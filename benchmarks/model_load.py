#!/usr/bin/env python
"""Where a GPU case's "model load" phase goes: each loading path timed step by step in a fresh process.

The gate's phase timeline showed hf spending 14-19 s loading the 1.5B model that jax loads in 2.4 s from
the same files. A case kernel is a fresh process, so every path here runs in one of its own (the page
cache stays warm: the files were just read) and reports, in order: importing torch, importing transformers'
model class, reading the checkpoint, moving it to the GPU (with the first CUDA call), and the whole.

Paths: ``hf-cpu-then-cuda`` (from_pretrained on the host, then ``.to("cuda")``), ``hf-device-map``
(from_pretrained with ``device_map``, which places each tensor on the GPU as it is read), and ``jax``
(kit.backends.jax.llama.load_params). Each for bfloat16 and float32.

    python benchmarks/model_load.py --model models/llama-1b-seeded [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
path, model, dtype = sys.argv[1], sys.argv[2], sys.argv[3]
t = {}
t0 = last = time.perf_counter()
def mark(name):
    global last
    now = time.perf_counter(); t[name] = round(now - last, 3); last = now
if path == "jax":
    import jax
    mark("import")
    from kit.backends.jax.llama import load_params
    device = jax.devices("gpu")[0]
    mark("first device call")
    shape, params = load_params(model, dtype, device)
    jax.block_until_ready(params)
    mark("read and place")
else:
    import torch
    mark("import")
    from transformers import AutoModelForCausalLM
    mark("import model class")
    torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
    mark("first device call")
    kw = dict(dtype=getattr(torch, dtype), attn_implementation="sdpa")
    if path == "hf-device-map":
        m = AutoModelForCausalLM.from_pretrained(model, device_map="cuda", **kw).eval()
        torch.cuda.synchronize()
        mark("read and place")
    else:
        m = AutoModelForCausalLM.from_pretrained(model, **kw)
        mark("read")
        m = m.to("cuda").eval(); torch.cuda.synchronize()
        mark("place")
t["total"] = round(time.perf_counter() - t0, 3)
print(json.dumps(t))
"""

PATHS = ("hf-cpu-then-cuda", "hf-device-map", "jax")


def run(path: str, model: str, dtype: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    proc = subprocess.run([sys.executable, "-c", CHILD, path, model, dtype], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rows = []
    for dtype in args.dtypes.split(","):
        for path in PATHS:
            r = run(path, args.model, dtype)
            rows.append({"path": path, "dtype": dtype, **r})
            steps = ", ".join(f"{k} {v:.2f} s" for k, v in r.items() if k not in ("total", "error"))
            print(f"{path:<18} {dtype:<9} " + (f"refused: {r['error']}" if "error" in r
                                               else f"total {r['total']:.2f} s: {steps}"), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
