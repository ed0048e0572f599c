"""The fault catalogue against the embedded gate: each fault's size and which of the gate's tests see it.

    .venv/bin/python benchmarks/fault_catalogue.py [--vllm | --vllm-smallest] [--faults a,b] [--write-doc]

For every fault of kit.faults.catalogue at every magnitude: its hf float32 effect (largest
max_probability_error against the semantic golden), that effect over the clean hf-bf16 case's largest
error, and the embedded hf-bf16 case's verdict on the faulted model with what failed it (a prompt over
its bound, a winner change, the drift test). With --vllm the vllm-pp1 case runs too, one launch per
magnitude whose effect is at least 3x (40-100 s each on a 2-core CPU); --vllm-smallest launches only the
smallest such magnitude per fault. Case results are kept beside the faulted copies (keyed by the case's
inputs), so a rerun, or a --vllm run after the hf one, only runs what it has not run.

--write-doc writes the table to docs/fault-catalogue.md.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from timing import ROOT

sys.path.insert(0, str(ROOT))

from kit.case.interpreter import run_case_fresh  # noqa: E402
from kit.case.runner import run_case  # noqa: E402
from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes  # noqa: E402
from kit.core.model.modeldigest import model_digest  # noqa: E402
from kit.core.records.records import CaseResult  # noqa: E402
from kit.core.model.faultcopy import on_model  # noqa: E402
from kit.core.records.spec import CaseSpec  # noqa: E402
from kit.faults.cache import default_cache_dir, faulted_copy  # noqa: E402
from kit.faults.catalogue import CATALOGUE, Fault  # noqa: E402
from kit.faults.effect import EmbeddedCases, embedded_cases, failed_by, healthy_noise, largest_error  # noqa: E402

HF, VLLM = "hf-bf16", "vllm-pp1"
HF_FACTOR, VLLM_FACTOR = 1.5, 3.0  # effect over clean hf-bf16 error from which each case must fail
DOC = ROOT / "docs" / "fault-catalogue.md"


@dataclass
class Verdict:
    status: str
    failed_by: tuple[str, ...]
    failed_prompts: int
    largest_error: float

    @classmethod
    def of(cls, r: CaseResult) -> "Verdict":
        return cls(r.status, failed_by(r), r.counts()["failed"], largest_error(r))

    def cell(self) -> str:
        if self.status == "passed":
            return "passed"
        return f"**{self.status}** ({', '.join(self.failed_by)}; {self.failed_prompts}/64)"


@dataclass
class Row:
    fault: str
    magnitude: float
    effect: float
    ratio: float
    cases: dict[str, Verdict] = field(default_factory=dict)


class Memo:
    """Case verdicts by the case's inputs (the model digest among them), kept in the cache folder."""

    def _read(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.is_file() else {}

    def __init__(self, path: Path, clean_digest: str):
        self.path = path
        self.clean_digest = clean_digest
        self.data = self._read()

    def key(self, spec: CaseSpec) -> str:
        d = {k: v for k, v in spec.to_dict().items() if k != "timeout_s"}
        if d.get("calibration"):  # carried over to the faulted copy (kit.core.model.faultcopy.on_model): key it as made
            d["calibration"] = {**d["calibration"],
                                "inputs": {**d["calibration"]["inputs"], "model_digest": self.clean_digest}}
        return sha256_bytes(canonical_bytes(d))

    def run(self, spec: CaseSpec, fresh: bool = False) -> Verdict:
        key = self.key(spec)
        if key not in self.data:
            r = run_case_fresh(spec) if fresh else run_case(spec)
            v = Verdict.of(r)
            entry = {"status": v.status, "failed_by": list(v.failed_by), "failed_prompts": v.failed_prompts,
                     "largest_error": v.largest_error}
            # Merged under a lock: an hf run and a vLLM run of the benchmark may share the cache.
            with open(self.path.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self.data = {**self._read(), key: entry}
                atomic_write_bytes(self.path, json.dumps(self.data, indent=1, sort_keys=True).encode())
        d = self.data[key]
        return Verdict(d["status"], tuple(d["failed_by"]), d["failed_prompts"], d["largest_error"])


def measure(faults: list[Fault], cases: EmbeddedCases, cache: Path, memo: Memo,
            vllm: str | None) -> tuple[dict, list[Row]]:
    source = cases.float32.model_path
    source_digest = model_digest(source)
    clean = {HF: memo.run(cases.cases[HF])}
    clean_error = healthy_noise(clean[HF].largest_error, cases.cases[HF])  # the threshold the test uses
    if vllm:
        clean[VLLM] = memo.run(cases.cases[VLLM], fresh=True)
    rows = []
    for fault in faults:
        for m in fault.magnitudes:
            t0 = time.perf_counter()
            folder = faulted_copy(fault, m, source, cache, source_digest)
            digest = model_digest(folder)
            effect = memo.run(on_model(cases.float32, folder, digest)).largest_error
            row = Row(fault.name, m, effect, effect / clean_error)
            row.cases[HF] = memo.run(on_model(cases.cases[HF], folder, digest))
            rows.append(row)
            print(f"{fault.name:<18} {m:<9g} effect {effect:.4f} ({row.ratio:5.1f}x)  {HF}: {row.cases[HF].cell()}"
                  f"  [{time.perf_counter() - t0:.1f} s]", flush=True)
        if vllm:
            due = [r for r in rows if r.fault == fault.name and r.ratio >= VLLM_FACTOR]
            for r in due[:1] if vllm == "smallest" else due:
                t0 = time.perf_counter()
                folder = faulted_copy(fault, r.magnitude, source, cache, source_digest)
                r.cases[VLLM] = memo.run(on_model(cases.cases[VLLM], folder), fresh=True)
                print(f"{fault.name:<18} {r.magnitude:<9g} {VLLM}: {r.cases[VLLM].cell()}"
                      f"  [{time.perf_counter() - t0:.1f} s]", flush=True)
    return clean, rows


def smallest(rows: list[Row], fault: str, test) -> str:
    hits = [r for r in rows if r.fault == fault and test(r)]
    return f"{hits[0].magnitude:g}" if hits else "none"


def caught(case: str):
    return lambda r: case in r.cases and r.cases[case].status == "failed"


def caught_from(rows: list[Row], fault: str, case: str) -> str:
    """The smallest magnitude from which every larger one fails ``case``: where the gate sees the fault for
    good, not where one prompt happened to cross its bound."""
    mine = [r for r in rows if r.fault == fault]
    for i, r in enumerate(mine):
        if all(caught(case)(x) for x in mine[i:]):
            return f"{r.magnitude:g}"
    return "none"


def markdown(faults: list[Fault], clean: dict, rows: list[Row], vllm: bool, spec: CaseSpec) -> str:
    e = clean[HF].largest_error
    noise = healthy_noise(e, spec)
    measured = ((spec.calibration or {}).get("fingerprint") or {}).get("runtime", {}).get("accelerator", {})
    out = ["# Fault catalogue against the embedded gate", "",
           "Made by `.venv/bin/python benchmarks/fault_catalogue.py --write-doc"
           f"{' --vllm-smallest' if vllm else ''}` (kit/faults/catalogue.py holds the faults).", "",
           "Each fault is written into a copy of `fixtures/tiny-llama` (config or weights), so every backend "
           "loads the same fault. *Effect* is the largest max_probability_error over the 64 prompts of the "
           "faulted model run by hf in float32 (the `checkpoint` case's settings) against the semantic golden; "
           f"*ratio* is the effect over the noise a healthy release shows here, {noise:.4f}: the largest clean error "
           f"of the `{HF}` case as set ({e:.4f}) and of every variant its calibration record measured on this "
           f"host's class ({measured.get('name', 'unknown')}), whichever is larger (kit.faults.effect.healthy_noise). "
           f"The issue asks that every fault at {HF_FACTOR:g}x or more fails `{HF}`, and at {VLLM_FACTOR:g}x or "
           f"more fails `{VLLM}`. A failed case names the tests that failed it (bound: a prompt over its bound; "
           "winner: a winner change outside a near-tie; missing: a golden token missing from the top 64; drift: the "
           "case's drift test) and how many prompts failed.",
           "", f"Clean model: `{HF}` {clean[HF].cell()}, largest error {e:.4f}"
           + (f"; `{VLLM}` {clean[VLLM].cell()}, largest error {clean[VLLM].largest_error:.4f}"
              if VLLM in clean else "")
           + ".", "",
           "Below the noise a fault can still fail the case on one prompt: bfloat16 rounding is chaotic per "
           "prompt, and a perturbation far smaller than the noise can tip one prompt across its bound, further "
           "than any calibrated variant moved it (docs/calibration.md, \"What the variants do not see\"). "
           "*Caught from* is therefore "
           "the smallest magnitude from which every larger one fails, *smallest failing* the smallest that failed "
           "at all.", "", "## Smallest magnitude caught", "",
           f"| fault | mimics | unit | smallest >= {HF_FACTOR:g}x | {HF} caught from | smallest failing {HF} |"
           + (f" smallest >= {VLLM_FACTOR:g}x | {VLLM} there |" if vllm else ""),
           "| --- | --- | --- | --- | --- | --- |" + (" --- | --- |" if vllm else "")]
    for f in faults:
        line = (f"| {f.name} | {f.mimics} | {f.unit} | {smallest(rows, f.name, lambda r: r.ratio >= HF_FACTOR)} "
                f"| {caught_from(rows, f.name, HF)} | {smallest(rows, f.name, caught(HF))} |")
        if vllm:
            first = [r for r in rows if r.fault == f.name and r.ratio >= VLLM_FACTOR][:1]
            there = first[0].cases[VLLM].cell() if first and VLLM in first[0].cases else "not run"
            line += f" {first[0].magnitude:g} | {there} |" if first else " none | |"
        out.append(line)
    out += ["", "## Every fault and magnitude", "",
            f"| fault | magnitude | effect | ratio | {HF} |" + (f" {VLLM} |" if vllm else ""),
            "| --- | --- | --- | --- | --- |" + (" --- |" if vllm else "")]
    for r in rows:
        line = f"| {r.fault} | {r.magnitude:g} | {r.effect:.4f} | {r.ratio:.1f} | {r.cases[HF].cell()} |"
        if vllm:
            line += f" {r.cases[VLLM].cell() if VLLM in r.cases else ''} |"
        out.append(line)
    out += ["", "## What each fault changes", "", "| fault | change in the checkpoint | magnitudes |",
            "| --- | --- | --- |"]
    out += [f"| {f.name} | {f.edit} | {', '.join(f'{m:g}' for m in f.magnitudes)} |" for f in faults]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--vllm", action="store_true", help=f"run {VLLM} at every magnitude of effect >= 3x")
    group.add_argument("--vllm-smallest", action="store_true", help=f"run {VLLM} at each fault's smallest such one")
    ap.add_argument("--faults", help="comma-separated fault names (default: the whole catalogue)")
    ap.add_argument("--cache", type=Path, default=default_cache_dir(), help="where faulted copies are kept")
    ap.add_argument("--write-doc", action="store_true", help=f"write the table to {DOC.relative_to(ROOT)}")
    args = ap.parse_args()
    names = args.faults.split(",") if args.faults else None
    faults = [f for f in CATALOGUE if names is None or f.name in names]
    vllm = "all" if args.vllm else "smallest" if args.vllm_smallest else None
    args.cache.mkdir(parents=True, exist_ok=True)
    cases = embedded_cases()
    memo = Memo(args.cache / "verdicts.json", cases.float32.model_digest)
    clean, rows = measure(faults, cases, args.cache, memo, vllm)
    text = markdown(faults, clean, rows, vllm is not None, cases.cases[HF])
    if args.write_doc:
        DOC.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
