"""Measure every catalogued fault's hf effect on the embedded model and write the table the catalogue test
reads (tests/support/fault_effects.json): runtime -> fault -> magnitude -> effect.

The effect is deterministic on one runtime (kit.faults.effect.effect_runtime: what decides the bits of the
hf case that measures it). On a CPU that case computes in float64 and rounds to float32, so its runtime is the
portable one and one entry serves every host; on a GPU an effect moves across GPU models, so the table holds one
entry per runtime and this script writes only this host's, keeping the others. The test reads its own
runtime's entry instead of measuring 126 faulted copies on every run; it re-measures the magnitudes it relies
on, measures a fault's row itself on a runtime the table holds no entry for, and refuses a table whose faulted
copies are no longer the ones the catalogue writes (kit.faults.cache.copies_digest: another model, or an edit
that changes a copy's bytes).

    python benchmarks/fault_effects.py [--faults a,b]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kit.core.records.jsonio import write_json
from kit.faults.cache import copies_digest, default_cache_dir, faulted_copy
from kit.faults.catalogue import CATALOGUE
from kit.faults.effect import effect_runtime, embedded_cases, hf_float32_effect

TABLE = Path(__file__).resolve().parents[1] / "tests" / "support" / "fault_effects.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", help="comma-separated fault names (default: the whole catalogue)")
    args = ap.parse_args()
    wanted = set(args.faults.split(",")) if args.faults else None
    cases = embedded_cases()
    runtime = effect_runtime(cases)
    old = json.loads(TABLE.read_text()) if TABLE.is_file() else {}
    copies = copies_digest(cases.float32.model_path, default_cache_dir(), cases.float32.model_digest)
    runtimes = dict(old.get("runtimes", {})) if old.get("copies") == copies else {}  # other copies: all stale
    effects = dict(runtimes.get(runtime, {}))
    t0 = time.perf_counter()
    for fault in CATALOGUE:
        if wanted and fault.name not in wanted:
            continue
        row = {}
        for m in fault.magnitudes:
            folder = faulted_copy(fault, m, cases.float32.model_path, default_cache_dir())
            row[f"{m:g}"] = hf_float32_effect(folder, cases)
        effects[fault.name] = row
        print(f"{fault.name}: " + ", ".join(f"{m} {e:.4g}" for m, e in row.items()), flush=True)
    runtimes[runtime] = effects
    write_json(TABLE, {"copies": copies, "model_digest": cases.float32.model_digest, "runtimes": runtimes})
    print(f"{TABLE}: {runtime} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
