"""The embedded gate with vLLM's engine imported by the warm process its vllm kernels fork from, against each
vllm kernel importing it itself (the way before), alternately in one run.

    .venv/bin/python benchmarks/vllm_warm_import.py [--rounds N]

The way before is the rule's own exception: a vllm case with an environment of its own imports vLLM in its
kernel (kit.backends.vllm.engine.warm_imports), so the second descriptor is the embedded one with a variable no
library reads set on each vllm case. Each way runs once first, unmeasured, so that its warm processes and
compile caches exist; then the two alternate. Printed per way: the gate's wall time (the command, and its cases
phase), each vllm case's time and its kernel's import of vLLM (the case record's ``import_s``), medians over the
rounds, and whether every case passed with the same largest error both ways.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

from timing import ROOT, print_rows, timed

EMBEDDED = ROOT / "descriptors" / "tiny-cpu.toml"
# Read by nothing: it only gives each vllm case an environment of its own.
COLD = 'env = { PARITY_KIT_BENCHMARK_COLD_VLLM_IMPORT = "1" }'


def cold_descriptor() -> Path:
    """The embedded descriptor with ``COLD`` in each vllm case, beside it so that its relative paths hold."""
    text = re.sub(r"^(\[cases\.vllm[^\]]*\]\n)", lambda m: m.group(1) + COLD + "\n", EMBEDDED.read_text(),
                  flags=re.MULTILINE)
    handle = tempfile.NamedTemporaryFile("w", suffix=".toml", prefix=".bench-cold-vllm-", dir=EMBEDDED.parent,
                                         delete=False)
    with handle:
        handle.write(text)
    return Path(handle.name)


def gate(descriptor: Path, out: Path) -> dict:
    wall, proc = timed([sys.executable, "-m", "kit.cli", "gate", str(descriptor), "--out", str(out),
                        "--no-summary"])
    if proc.returncode != 0:
        sys.exit(f"gate {descriptor.name} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    result = json.loads((out / "result.json").read_text())
    vllm = {n: c for n, c in result["cases"].items() if c["backend"] == "vllm"}
    return {"command_s": wall, "cases_phase_s": result["duration_s"],
            "case_s": {n: c["duration_s"] for n, c in vllm.items()},
            "import_s": {n: (c.get("details") or {}).get("import_s") for n, c in vllm.items()},
            "errors": {n: c.get("max_probability_error") for n, c in result["cases"].items()}}


def median_row(runs: list[dict], field: str, name: str | None = None) -> str:
    values = [r[field][name] if name else r[field] for r in runs]
    if any(v is None for v in values):
        return "-"
    return f"{statistics.median(values):.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    cold = cold_descriptor()
    ways = {"engine imported by the warm process": EMBEDDED, "each kernel imports vLLM (before)": cold}
    runs: dict[str, list[dict]] = {w: [] for w in ways}
    try:
        with tempfile.TemporaryDirectory(prefix="pkvllm-") as tmp:
            for way, descriptor in ways.items():  # unmeasured: warm processes and compile caches
                gate(descriptor, Path(tmp) / f"first-{len(runs[way])}-{descriptor.stem}")
            for i in range(args.rounds):
                for way, descriptor in ways.items():
                    runs[way].append(gate(descriptor, Path(tmp) / f"{i}-{descriptor.stem}"))
    finally:
        cold.unlink()
    rows = [("rounds (medians below)", str(args.rounds))]
    for way, measured in runs.items():
        rows += [(f"{way}: gate, whole command", median_row(measured, "command_s")),
                 (f"{way}: gate, cases phase", median_row(measured, "cases_phase_s"))]
        for name in measured[0]["case_s"]:
            rows.append((f"{way}: {name} (its import of vLLM)",
                         f"{median_row(measured, 'case_s', name)} ({median_row(measured, 'import_s', name)})"))
    first = [r["errors"] for rs in runs.values() for r in rs]
    rows.append(("largest error of every case the same in every run", str(all(e == first[0] for e in first))))
    print_rows(rows)


if __name__ == "__main__":
    main()
