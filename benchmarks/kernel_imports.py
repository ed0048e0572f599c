"""What a case kernel spends importing before it scores anything: CPU seconds of each layer of imports, each
in a fresh interpreter of the main environment.

    .venv/bin/python benchmarks/kernel_imports.py [--repeats 3] [--bytecode]

Every case runs in a kernel of its own, so this is paid once per case, by every gate and every test that runs
one. CPU time (user + sys of the child), not wall time: on a loaded 2-core machine wall time says more about
the load than about the imports. Each row adds to the one above it and is the least of ``--repeats``
interpreters (the cheapest is the one the load disturbed least); its cost is the difference to the row above.

``--bytecode`` times instead what Python's bytecode cache saves a fresh interpreter: each import compiled every time
(``PYTHONDONTWRITEBYTECODE`` set, an empty cache), against read from a cache it filled once (``PYTHONPYCACHEPREFIX``,
as make's commands set it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from timing import ROOT, print_rows, timed

PYTHON = str(ROOT / ".venv" / "bin" / "python")

# What the hf case notebook's kernel imports, layer by layer, each row's code added to the rows above it: ipykernel
# itself, its first cell's imports (scrapbook pulls in papermill and pandas), torch, and the model class
# (transformers' own imports come in with it: its hub-kernel and sharding integrations import
# torch.distributed.tensor, sympy and torch._dynamo).
LAYERS = (
    ("interpreter", "pass"),
    ("ipykernel", "import ipykernel.kernelapp"),
    ("+ the notebook's first cell (scrapbook, kit.case, kit.views)",
     "import scrapbook; from kit.case import runner; from kit.views import plots, summary"),
    ("+ torch", "import torch"),
    ("+ transformers' Llama (an hf case)", "from transformers import LlamaForCausalLM"),
)
ALONE = (("vllm, alone (a vLLM case adds this to the notebook's imports)", "import vllm"),
         ("jax, alone", "import jax"))
BYTECODE = (("torch and transformers' Llama (an hf kernel, golden make's maker)",
             "import torch; from transformers import LlamaForCausalLM"),
            ("vllm", "import vllm"),
            ("the gate command's imports", "import kit.cli, kit.gate.run, papermill, nbconvert"))


def cpu_seconds(code: str, env: dict[str, str] | None = None) -> float:
    before = os.times()
    _, proc = timed([PYTHON, "-c", code], env=env)
    after = os.times()
    if proc.returncode != 0:
        raise SystemExit(f"{code!r} failed: {proc.stderr.strip().splitlines()[-1]}")
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def bytecode_rows(repeats: int) -> list[tuple[str, str]]:
    rows = []
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as cache:
        each_time = {**base, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty}
        cached = {**base, "PYTHONPYCACHEPREFIX": cache}
        for label, code in BYTECODE:
            cpu_seconds(code, cached)  # fills the cache
            compiled = min(cpu_seconds(code, each_time) for _ in range(repeats))
            read = min(cpu_seconds(code, cached) for _ in range(repeats))
            rows.append((label, f"{compiled:5.2f} s CPU compiled each time, {read:5.2f} s from the cache "
                                f"({compiled / read:.1f}x)"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bytecode", action="store_true", help="what the bytecode cache saves each import")
    args = parser.parse_args()
    if args.bytecode:
        print(f"{sys.platform}, {os.cpu_count()} CPUs; least of {args.repeats} interpreters each")
        print_rows(bytecode_rows(args.repeats))
        return
    rows, previous, code = [], 0.0, ""
    for label, added in LAYERS:
        code = f"{code}; {added}" if code else added
        least = min(cpu_seconds(code) for _ in range(args.repeats))
        rows.append((label, f"{least:5.2f} s CPU (+{least - previous:.2f})"))
        previous = least
    for label, code in ALONE:
        rows.append((label, f"{min(cpu_seconds(code) for _ in range(args.repeats)):5.2f} s CPU"))
    print(f"{sys.platform}, {os.cpu_count()} CPUs; least of {args.repeats} interpreters each")
    print_rows(rows)


if __name__ == "__main__":
    main()
