"""Calibration, inside the case's kernel: score the case's clean variants and keep every sample.

Each variant is the case with some options changed that a healthy release may legitimately change
(kit.backends.<name>.options says which and why), scored in its own engine launch. Every finished
sample is appended to a JSON-lines file at once, so an interrupted calibration loses nothing and a
rerun with the same file takes up where it stopped. The main environment turns the samples into a
record (kit.calibrate.run); this module only measures.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from kit.case import interpreter
from kit.case.runner import resolve_spec, run_case
from kit.core.records import paths
from kit.core.noise.calibration import Sample, case_device
from kit.core.records.recordcheck import Wrong, check_sample
from kit.core.errors import BadInput
from kit.core.records.records import CaseResult
from kit.core.host.runtime import numerics_fingerprint
from kit.core.records.spec import CaseSpec


def clean(spec: CaseSpec) -> CaseSpec:
    """The case with nothing to judge: no bound, no calibration, no repeats; only errors are wanted."""
    return dataclasses.replace(spec, bound=None, bucket_bounds={}, calibration=None, drift=False, repeats=1,
                               repeat_launches=1, repeat_prompts=None, exact_repeats=False)


def finished(samples_path: str | Path, case: str | None = None) -> list[dict]:
    """The samples already in the file; a line cut short by a kill is dropped (it is measured again). A
    whole line that is no sample was not written by calibrate, and with ``case`` given a sample of another case
    must not stand for one of it (the variants have the same names): each is refused in one line naming it,
    since reusing it (or measuring around it) would make a record of something else. A sample that names no
    case was written before samples named theirs, into a file calibrate names after its case."""
    path = Path(samples_path)
    if not path.is_file():
        return []
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        problem = entry_problem(entry)
        if problem:
            raise BadInput(f"{path}:{number}: not a sample of parity-kit calibrate ({problem}); calibrate again "
                           "in a fresh directory")
        if case is not None and entry.get("case", case) != case:
            raise BadInput(f"{path}:{number}: a sample of case {entry['case']}, not of {case}; calibrate {case} "
                           "with a samples file of its own")
        out.append(entry)
    return out


def entry_problem(entry: object) -> str | None:
    """Why one samples line is not what ``calibrate_case`` appends, or None."""
    if not isinstance(entry, dict):
        return f"expected an object, got {type(entry).__name__}"
    for key in ("sample", "inputs", "release", "runtime"):
        if not isinstance(entry.get(key), dict):
            return f"{key}: expected an object, got {entry.get(key)!r}"[:200]
    try:
        check_sample(entry["sample"], "sample")
    except Wrong as exc:
        return exc.text
    return None


def sample_of(variant: str, launch: int, result: CaseResult, faulted: bool = False) -> Sample:
    """One clean variant's result as a calibration sample: per prompt its error and shift (a faulted sample's
    lost shift as 0), a decode case's per-step errors with them."""
    # A prompt whose golden winner the variant lost has no shift (None): the record check refuses the sample
    # with its key (kit.core.records.recordcheck), as it refuses any value out of its type. A faulted model may lose
    # it (that is a catch, kept in the entry's ``no_shift``), so there it is written as 0 and never read. A decode
    # case's sample also keeps each prompt's error per decode step compared (kit.core.noise.stepnoise), as the decode
    # check scored them.
    shifts = {p.id: p.top_probability_shift for p in result.prompts}
    if faulted:
        shifts = {pid: 0.0 if x is None else x for pid, x in shifts.items()}
    steps = {d.id: list(d.step_errors) for d in result.decode} if result.decode else None
    return Sample(variant, launch, 1, {p.id: p.max_probability_error for p in result.prompts},
                  shifts, steps)  # type: ignore[arg-type]


def append(samples_path: str | Path, entry: dict) -> None:
    """One sample as one line; a line a kill cut short is ended first, so the new sample stands on its own
    line instead of joining the broken one (and being dropped with it)."""
    path = Path(samples_path)
    cut = path.is_file() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    with open(samples_path, "a") as f:
        f.write(("\n" if cut else "") + json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def variant_samples(spec: CaseSpec, variants: list[dict], samples_path: str | Path) -> list[dict]:
    """Every variant's sample (those in ``samples_path`` reused), in variant order.

    A variant is ``{"name", "overrides", "launch"}``; one engine launch each."""
    base = clean(spec)
    # The runtime as this kernel was given it, before any engine starts here: an engine sets variables of its own in
    # the process it runs in (vLLM's CPU worker a process group name drawn at every start, VLLM_DIST_IDENT; its
    # settings the case's options decide, which the record holds as options), so read after one started, no two
    # launches of a case would name the same runtime.
    runtime = numerics_fingerprint(case_device(base.options))
    done = {(e["sample"]["variant"], e["sample"]["launch"]): e for e in finished(samples_path, spec.name)}
    out = []
    for v in variants:
        key = (v["name"], int(v.get("launch", 1)))
        if key in done:
            print(f"{v['name']} (launch {key[1]}): reused from {Path(samples_path).name}")
            out.append(done[key])
            continue
        # Overrides replace options as given, None included (a variant may unset what the case sets).
        result = run_case(dataclasses.replace(base, options={**base.options, **v.get("overrides", {})}))
        bad = [p.id for p in result.prompts if p.failures]
        # A faulted model's variant (what a power measurement scores) may fail outright: that is what is measured.
        faulted = bool(v.get("faulted"))
        failing = bad + [d.id for d in result.decode if d.failures]  # a decode step's failure too
        # A clean variant failing outright is a fault, not noise: it must not widen the bound.
        if failing and not faulted:
            raise RuntimeError(f"variant {v['name']} fails prompts {', '.join(failing[:5])}: "
                               f"{result.failures[0]}; it cannot be calibrated as noise")
        entry: dict[str, Any] = {"case": spec.name, "sample": sample_of(v["name"], key[1], result, faulted).to_dict(),
                 "release": result.release,
                 "inputs": {"fixture_sha256": result.fixture_sha256, "golden_sha256": result.golden_sha256,
                            "model_digest": result.model_digest},
                 "runtime": runtime,
                 "scoring_s": result.scoring_s, "duration_s": result.duration_s}
        if faulted:
            entry["failed_prompts"] = bad
            entry["no_shift"] = [p.id for p in result.prompts if p.top_probability_shift is None]
            if result.decode:  # judged with no bound: only what no bound decides (a divergence, a short continuation)
                entry["decode_failed"] = [d.id for d in result.decode if d.failures]
        append(samples_path, entry)
        print(f"{v['name']} (launch {key[1]}): largest error {result.max_probability_error:.4g}")
        out.append(entry)
    return out


def notebook_calibration(spec: dict | None, variants: list[dict] | None, descriptor: str | None, case: str,
                         samples_path: str | Path | None) -> list[dict]:
    """What calibrate.ipynb does: resolve the case (injected, or read from the descriptor by hand) and its
    variants (injected, or asked of the main environment, which holds the options schemas), then measure.

    `parity-kit calibrate` injects a samples file of the case's own in its calibration directory. Run by hand
    with none, the samples go to a fresh folder of their own, named in one line: never into the notebook's
    folder, and never into a file an earlier run (of this case or, its parameters changed, another) left, whose
    samples would be reused as this case's."""
    resolved = resolve_spec(spec, descriptor, case)
    if variants is None:
        variants = _variants_from_main_environment(str(paths.descriptor_path(descriptor)), resolved.name)
    if samples_path is None:
        samples_path = fresh_samples_path(resolved.name)
        print(f"samples of case {resolved.name} go to {samples_path} (set samples_path to continue that file)")
    return variant_samples(resolved, variants, samples_path)


def fresh_samples_path(case: str) -> Path:
    """``<case>.samples.jsonl`` in a new temporary folder: one calibration run by hand, kept nowhere else."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=f"parity-kit-calibrate-{case}-")) / f"{case}.samples.jsonl"


def _variants_from_main_environment(descriptor: str, case: str) -> list[dict]:
    main = interpreter.main_python()
    proc = interpreter.run_python(main, ["-m", "kit.cli", "calibrate", str(descriptor), "--case", case,
                                         "--list-variants"])
    if proc.returncode != 0:
        reason = interpreter.last_line(proc.stderr, f"exit {proc.returncode}")
        raise BadInput(f"cannot list the variants of case {case} of {descriptor} with {main}: {reason}")
    return json.loads(proc.stdout)
