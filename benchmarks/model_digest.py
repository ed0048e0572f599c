#!/usr/bin/env python
"""The model digest's wall time on a synthetic folder: one thread against the pool, then the run's cache.

The folder (by default 8 files of 64 MiB of random bytes) is written to a temporary directory and
hashed from the page cache, so the figures are hashing speed, not the disk's. Each way is timed
``--repeat`` times in alternation (serial, parallel, serial, ...) so that other load on the
machine hits both alike; the best and the median are printed. The cached way is what a case
kernel does after the executor's preflight: stat every file, read none. The script waits out
``modeldigest.RACY_NS`` after writing, since a file changed that recently is never cached.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import print_rows  # noqa: E402

from kit.core.model import modeldigest  # noqa: E402
from kit.core.model.modeldigest import DigestCache, model_digest  # noqa: E402


def write_folder(root: Path, files: int, mib: int) -> None:
    for i in range(files):
        with open(root / f"model-{i:05d}-of-{files:05d}.safetensors", "wb") as f:
            for _ in range(mib):
                f.write(os.urandom(1 << 20))


def seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--mib", type=int, default=64, help="size of each file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None, help="the pool's threads (default: as the gate)")
    args = ap.parse_args()
    workers = args.workers or modeldigest.default_workers()
    with tempfile.TemporaryDirectory(prefix="model-digest-bench-") as tmp:
        root = Path(tmp)
        write_folder(root, args.files, args.mib)
        time.sleep(modeldigest.RACY_NS / 1e9 + 0.1)
        serial_digest = model_digest(root, workers=1)  # also warms the page cache
        if model_digest(root, workers=workers) != serial_digest:
            raise SystemExit("parallel and serial digests differ")
        times: dict[str, list[float]] = {"serial": [], "parallel": []}
        for _ in range(args.repeat):
            times["serial"].append(seconds(lambda: model_digest(root, workers=1)))
            times["parallel"].append(seconds(lambda: model_digest(root, workers=workers)))
        cache = DigestCache()
        model_digest(root, workers=workers, cache=cache)
        times["cached"] = [seconds(lambda: model_digest(root, workers=workers, cache=cache))
                           for _ in range(args.repeat)]
    total = args.files * args.mib
    rows = [("folder", f"{args.files} files x {args.mib} MiB = {total} MiB"),
            ("cores / pool threads", f"{os.cpu_count()} / {workers}")]
    for way in ("serial", "parallel"):
        best = min(times[way])
        rows.append((way, f"best {best:.3f} s ({total / best:,.0f} MiB/s), "
                          f"median {statistics.median(times[way]):.3f} s"))
    rows.append(("cached (stat only)", f"best {min(times['cached']) * 1e3:.2f} ms, "
                                       f"median {statistics.median(times['cached']) * 1e3:.2f} ms"))
    rows.append(("speed-up parallel / serial", f"{min(times['serial']) / min(times['parallel']):.2f}x"))
    print_rows(rows)


if __name__ == "__main__":
    main()
