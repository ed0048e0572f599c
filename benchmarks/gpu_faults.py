"""Engine-like faults against a GPU descriptor's calibrated cases: which each card's records catch, and by which test.

    python benchmarks/gpu_faults.py [--descriptor descriptors/gpu-h200-64.toml] [--case jax-bf16 ...]
                                    [--faults logit_scale=0.02,0.05 norm_offset=0.05 ...] [--json OUT]

For each case, the clean case first, then every fault of the catalogue (kit/faults/catalogue.py) at each magnitude
given, written into a copy of the descriptor's model (one copy per fault, reused by every case) and scored by the case
in a fresh interpreter, as the gate scores it, under the bounds and drift reference of the record this card resolves.
Each row: the case's largest error on the faulted model, its ratio over the clean case's largest error, the verdict
and the tests that failed it (bound, winner, missing, drift) with the drift test's p value. The standard to meet: every
fault at 1.5x the clean error or more fails the case (docs/gpu-figures.md keeps each card's table). The default set is
the engine-like faults a JAX path can have: the logit and temperature scale, normalization, the rotary base, attention
scaling and the embedding rows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from timing import ROOT

sys.path.insert(0, str(ROOT))

from kit.case.interpreter import run_case_fresh  # noqa: E402
from kit.core.host.runtime import accelerator  # noqa: E402
from kit.core.model.modeldigest import model_digest  # noqa: E402
from kit.core.noise.calibration import case_device  # noqa: E402
from kit.core.records.records import CaseResult  # noqa: E402
from kit.core.records.spec import on_model  # noqa: E402
from kit.descriptor.load import load_descriptor  # noqa: E402
from kit.descriptor.plan import resolve  # noqa: E402
from kit.faults.cache import faulted_copy  # noqa: E402
from kit.faults.catalogue import BY_NAME  # noqa: E402
from kit.faults.effect import failed_by, largest_error  # noqa: E402

DEFAULT_FAULTS = ("logit_scale=0.02,0.05", "norm_offset=0.02,0.05", "attention_scale=0.02,0.05",
                  "rope_base=0.02,0.05", "embedding_swap=0.2,1")
STANDARD = 1.5  # the ratio over the clean error from which every fault must fail the case


def parse_faults(given: list[str]) -> list[tuple[str, float]]:
    out = []
    for item in given:
        name, _, magnitudes = item.partition("=")
        if name not in BY_NAME:
            raise SystemExit(f"--faults {item}: no such fault (parity-kit fault list)")
        out += [(name, float(m)) for m in magnitudes.split(",") if m]
    return out


def row(result: CaseResult, clean: float | None) -> dict:
    drift = result.drift or {}
    error = largest_error(result)
    return {"status": result.status, "failed_by": list(failed_by(result)), "largest_error": error,
            "ratio": error / clean if clean else None, "drift_p": drift.get("p_value"),
            "failed_prompts": sum(1 for p in result.prompts if p.failures), "scoring_s": result.scoring_s}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--descriptor", default=str(ROOT / "descriptors" / "gpu-h200-64.toml"))
    ap.add_argument("--case", action="append", dest="cases", help="a calibrated case (repeatable; default jax-bf16)")
    ap.add_argument("--faults", nargs="*", default=list(DEFAULT_FAULTS), help="NAME=M1,M2 ... (catalogue faults)")
    ap.add_argument("--cache", default="/tmp/parity-kit-gpu-faults", help="where the faulted copies are written")
    ap.add_argument("--json", help="write every row here, as it finishes")
    args = ap.parse_args()
    cases = args.cases or ["jax-bf16"]
    plan = resolve(load_descriptor(args.descriptor), cases)
    source = Path(plan.case(cases[0]).spec.model_path)
    digest = model_digest(source)
    card = accelerator(case_device(plan.case(cases[0]).spec.options))["name"]
    rows: list[dict] = []
    out = {"card": card, "descriptor": args.descriptor, "standard": STANDARD, "rows": rows}

    def keep(entry: dict) -> None:
        rows.append(entry)
        print(json.dumps(entry), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))

    clean: dict[str, float] = {}
    for name in cases:
        spec = plan.case(name).spec
        t0 = time.perf_counter()
        r = row(run_case_fresh(spec), None)
        clean[name] = r["largest_error"]
        keep({"case": name, "fault": "clean", "magnitude": 0, **r,
              "record": (spec.calibration or {}).get("sha256", "")[:12], "wall_s": round(time.perf_counter() - t0, 1)})
    for fault, magnitude in parse_faults(args.faults):
        t0 = time.perf_counter()
        folder = faulted_copy(BY_NAME[fault], magnitude, source, args.cache, digest)
        copy_digest = model_digest(folder)
        for name in cases:
            result = run_case_fresh(on_model(plan.case(name).spec, folder, copy_digest))
            keep({"case": name, "fault": fault, "magnitude": magnitude, **row(result, clean[name]),
                  "wall_s": round(time.perf_counter() - t0, 1)})
        shutil.rmtree(folder, ignore_errors=True)  # a 1B model's copy is gigabytes
    missed = [r for r in rows if r["fault"] != "clean" and r["ratio"] is not None and r["ratio"] >= STANDARD
              and r["status"] != "failed"]
    print(f"{card}: {len(rows) - len(cases)} faulted runs; at {STANDARD}x the clean error or more, "
          f"{len(missed)} passed: {[(r['case'], r['fault'], r['magnitude']) for r in missed]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
