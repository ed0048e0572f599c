"""How the history scales with the number of runs: cold index build, warm (incremental) update with query, and
the `--json` command, for stores of 250, 500 and 1,000 run directories.

    .venv/bin/python benchmarks/history_scale.py [--from RUN_DIR] [--sizes 250 500 1000]

The runs are made from one real gate run of the embedded descriptor (default: the newest under runs/): its
manifest and every case result copied, each prompt's error scaled by a random factor, a start time an hour
later per run, a release every hundred runs, and a folder named as the gate names its own. Only what the
history reads is written (manifest, result.json, cases/*.json); result.json keeps the verdict, not the
case results the real one repeats, so the figures are those of the reading the history does.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from timing import ROOT, print_rows, timed

sys.path.insert(0, str(ROOT))

from kit.core.records import rundir  # noqa: E402
from kit.core.records.jsonio import write_json  # noqa: E402
from kit.history import index as history_index  # noqa: E402
from kit.history import queries  # noqa: E402
from kit.history.store import open_store  # noqa: E402


def newest_run() -> Path:
    runs = sorted(p.parent for p in (ROOT / "runs").glob(f"tiny-cpu-*/{rundir.MANIFEST}"))
    if not runs:
        sys.exit("no gate run of the embedded descriptor under runs/: run `parity-kit gate` once, or give --from")
    return runs[-1]


def synthesise(source: Path, root: Path, count: int, seed: int = 7) -> None:
    """``count`` run directories under ``root`` made from ``source``'s JSON (see the module)."""
    rng = random.Random(seed)
    manifest = json.loads((source / rundir.MANIFEST).read_text())
    cases = {c: json.loads((source / rundir.CASES / f"{c}.json").read_text()) for c in manifest["cases"]
             if (source / rundir.CASES / f"{c}.json").is_file()}
    start = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
    for i in range(count):
        at = start + _dt.timedelta(hours=i)
        run = root / f"tiny-cpu-{at:%Y%m%d-%H%M%S}-{i:04x}"
        release = f"r{i // 100}"
        write_json(run / rundir.MANIFEST, {**manifest, "started_at": at.isoformat(),
                                           "release": {"name": release}})
        for name, doc in cases.items():
            scale = rng.uniform(0.8, 1.2) * (1.3 if i >= count * 0.9 and name == "hf-bf16" else 1.0)
            prompts = [{**p, "max_probability_error": p["max_probability_error"] * scale}
                       if isinstance(p.get("max_probability_error"), (int, float)) else p for p in doc["prompts"]]
            write_json(run / rundir.CASES / f"{name}.json", {**doc, "prompts": prompts, "started_at": at.isoformat()})
        write_json(run / rundir.RESULT, {"name": manifest["name"], "verdict": "passed"})


def measure(source: Path, count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        synthesise(source, root, count)
        store = open_store(str(root))
        cold = history_index.update(store)
        t0 = time.perf_counter()
        warm = history_index.update(store)
        con = history_index.connect(warm.path, read_only=True)
        rows = queries.margins(con, queries.Selection("tiny-cpu"))
        queries.series(con, queries.Selection("tiny-cpu"))
        con.close()
        warm_s = time.perf_counter() - t0
        assert warm.read == 0 and rows, "a warm update read runs again, or the query found nothing"
        json_s, proc = timed([sys.executable, "-m", "kit", "-q", "history", "--runs", str(root), "--json"])
        assert proc.returncode == 0, proc.stderr
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        shutil.rmtree(root)
        return {"cold_s": cold.seconds, "warm_s": warm_s, "json_s": json_s, "mb": size / 1e6,
                "index_mb": cold.path.stat().st_size / 1e6 if cold.path.exists() else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", type=Path, help="a gate run of the embedded descriptor")
    parser.add_argument("--sizes", type=int, nargs="+", default=[250, 500, 1000])
    args = parser.parse_args()
    source = args.source or newest_run()
    rows = [("source run", source.name)]
    for n in args.sizes:
        m = measure(source, n)
        rows += [(f"{n} runs: store", f"{m['mb']:.0f} MB"),
                 (f"{n} runs: cold index build", f"{m['cold_s']:.2f} s ({1000 * m['cold_s'] / n:.1f} ms/run)"),
                 (f"{n} runs: warm update + queries", f"{m['warm_s']:.2f} s"),
                 (f"{n} runs: history --json (process)", f"{m['json_s']:.2f} s")]
    print_rows(rows)


if __name__ == "__main__":
    main()
