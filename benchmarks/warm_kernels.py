"""What a case's kernel costs started cold and forked from a warm process (kit/run/warmkernels.py), in one run.

    .venv/bin/python benchmarks/warm_kernels.py [--runs 3]

Each run executes, through the kit's own notebook runner, a notebook whose one cell imports what an hf case's
kernel imports (scrapbook, the case runner, torch, transformers' Llama) and glues a scrap. Rows: the wall seconds
of a cold kernel, of the first warm one (which starts the warm process and waits for its imports) and of the
warm ones after it, each the median of ``--runs``, and the ratio of cold to warm. Wall, not CPU: a forked kernel
is the warm process's child, whose CPU this process is never told. Run it on a quiet machine; the ratio is what
carries over to another.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from timing import ROOT, print_rows

sys.path.insert(0, str(ROOT))

from kit.backends import registry  # noqa: E402
from kit.core.records import paths  # noqa: E402
from kit.run import warmkernels  # noqa: E402
from kit.run.notebook import run_notebook  # noqa: E402

CELL = ("import scrapbook as sb\nfrom kit.case import runner\nimport torch\n"
        "from transformers.models.llama.modeling_llama import LlamaForCausalLM\nsb.glue('ok', 1)")


def notebook(folder: Path) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    nb.metadata["kernelspec"] = {"name": paths.MAIN_KERNEL, "display_name": paths.MAIN_KERNEL, "language": "python"}
    path = folder / "imports.ipynb"
    nbformat.write(nb, str(path))
    return path


def once(nb: Path, folder: Path, name: str) -> float:
    t0 = time.perf_counter()
    outcome = run_notebook(nb, folder / f"{name}.ipynb", {}, paths.MAIN_KERNEL, 600, folder / f"{name}.log",
                           imports=registry.get("hf").warm_imports)
    if outcome.error or outcome.killed_by:
        raise SystemExit(f"{name}: {outcome.error or outcome.killed_by}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="warm-bench-") as tmp, tempfile.TemporaryDirectory(dir="/tmp") as run:
        folder = Path(tmp)
        nb = notebook(folder)
        os.environ["XDG_RUNTIME_DIR"] = run  # warm processes of this benchmark alone: the first one starts here
        os.environ[warmkernels.ENABLED_ENV] = "0"
        cold = statistics.median(once(nb, folder, f"cold{i}") for i in range(args.runs))
        os.environ[warmkernels.ENABLED_ENV] = "1"
        first = once(nb, folder, "warm-first")
        warm = statistics.median(once(nb, folder, f"warm{i}") for i in range(args.runs))
        for pid_file in Path(run).glob("*/*.pid"):
            os.kill(int(pid_file.read_text()), 15)
    print(f"{sys.platform}, {os.cpu_count()} CPUs; median of {args.runs} kernels each")
    print_rows([("cold kernel", f"{cold:6.2f} s"), ("first warm kernel (starts the warm process)", f"{first:6.2f} s"),
                ("warm kernel", f"{warm:6.2f} s"), ("cold / warm", f"{cold / warm:6.1f}x")])


if __name__ == "__main__":
    main()
