"""`parity-kit calibrate`: measure each semantic case's clean variation and write calibration records.

Each case runs ``calibrate.ipynb`` in its own kernel (papermill, like every gate step), and again in a
fresh kernel for its second launch: the notebook scores the case's clean variants, one engine launch
each, with no compilation cache, appending every finished sample to
``<case>.samples.jsonl`` in the calibration directory. Here the samples become a record
(kit.core.noise.calibration), written as ``calibrations/<sha256>.json`` (never over another file), and the
line a descriptor needs to use it is printed. ``--resume DIR`` reuses every finished sample, in a directory
calibrate made for this descriptor (its ``calibration.json``, written before the first case runs) and only
for a case measured as it is set now; one calibration at a time holds a directory (kit.run.runlock).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rich.markup import escape

from kit import __version__
from kit.backends import registry
from kit.case.calibrate import finished
from kit.core.records import paths, rundir
from kit.core.baselines.baselinekind import of_golden
from kit.core.noise.calibration import MIN_SAMPLES, CalibrationRecord, Sample, case_device, noise_class, record_filename
from kit.core.errors import BadInput
from kit.core.records.fixture import load_fixture
from kit.core.records.jsonio import atomic_write_bytes, read_json_input, write_json
from kit.core.records.results import now_iso
from kit.core.host.runtime import accelerator, hardware, numeric_fingerprint
from kit.core.records.spec import CaseSpec
from kit.descriptor.load import LoadedDescriptor, load_descriptor
from kit.descriptor.plan import Outline, Plan, outline, resolve
from kit.run import lifecycle, output
from kit.run.notebook import run_notebook
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

CALIBRATE_NOTEBOOK = paths.NOTEBOOKS / "calibrate.ipynb"
INDEX = "calibration.json"
# What makes a folder a calibration directory that --resume may continue: its INDEX says so, and which
# descriptor it measured, from the start (it is written before the first case runs).
RUN_FORMAT = "parity-kit-calibrate-run/1"


@dataclass
class CaseCalibration:
    case: str
    record: CalibrationRecord | None
    path: Path | None  # where the record was written
    error: str | None = None
    notebook: Path | None = None


def calibration_dir(plan: Plan) -> Path:
    """Where a calibration of ``plan`` goes when no --out is given: a new folder under runs/."""
    return rundir.new_run_dir("calibrate", plan.name)


# Every launch compiles afresh: XLA's GPU autotuner picks kernels by timing, so two compiles of one
# program may compute it differently; a compiled program read back from a cache would hide that noise.
FRESH_COMPILES = {"JAX_ENABLE_COMPILATION_CACHE": "false"}


def by_launch(variants: list[dict]) -> dict[int, list[dict]]:
    """The variants grouped by launch, each group for a kernel of its own: a second launch in the same
    process would share the engine's process-wide state (XLA's autotuning results, allocator, compiled
    kernels) with the first and show none of the variation between two launches."""
    groups: dict[int, list[dict]] = {}
    for v in variants:
        groups.setdefault(int(v.get("launch") or 1), []).append(v)
    return dict(sorted(groups.items()))


def reproducing_command(command: Sequence[str]) -> list[str]:
    """The command as a record keeps it: what remakes the record. Where its samples were kept (``--out``,
    ``--resume``) is a scratch folder of the machine it ran on, which says nothing about the record."""
    out, skip = [], False
    for arg in command:
        if skip:
            skip = False
        elif arg in ("--out", "--resume"):
            skip = True
        elif not arg.startswith(("--out=", "--resume=")):
            out.append(arg)
    return out


def variants_for(spec: CaseSpec) -> list[dict]:
    """The backend's clean variants of this case (its options schema says which, and why)."""
    module, _, cls = registry.get(spec.backend).options.partition(":")
    options = getattr(importlib.import_module(module), cls).model_validate(spec.options)
    return options.calibration_variants(spec.calibration_launches)


def semantic_cases(stated: Outline, only: Sequence[str] | None) -> list[str]:
    """The cases to calibrate: the named ones (each must be semantic), else every semantic case."""
    if only:
        for name in only:
            if name not in stated.cases:
                raise BadInput(stated.no_case(name))
            if not of_golden(stated.cases[name].golden_kind).bounded:
                raise BadInput(f"{stated.cases[name].where.golden}: case {name} is judged bit for bit against "
                               "an exact golden: there is no bound to calibrate")
        return list(only)
    return [n for n, c in stated.cases.items() if of_golden(c.golden_kind).bounded]


def calibrate(descriptor: str | Path, only: Sequence[str] | None = None, out: str | Path | None = None,
              resume: str | Path | None = None, to: str | Path = "calibrations",
              command: Sequence[str] | None = None) -> list[CaseCalibration]:
    """Calibrate the descriptor's semantic cases (or ``only`` those): score each clean variant in its own launch,
    resumable from ``resume``, and write one record per case to ``to``; a case that fails says why, never
    stopping the others."""
    output.ensure()
    desc = load_descriptor(descriptor)
    names = semantic_cases(outline(desc), only)
    # The case as measured: its options and inputs, none of its bounds (which may come from an older record).
    plan = resolve(desc, names, resolve_calibration=False)
    specs = {name: case.spec for name, case in plan.cases.items()}
    to = Path(to)
    paths.check_dir_target(to, "--to")
    command = reproducing_command(command or ["parity-kit", "calibrate", str(descriptor)])
    index = resumed_index(plan, Path(resume), [specs[n] for n in names]) if resume is not None else None
    run_dir = Path(resume) if resume is not None else _new_run_dir(plan, out)
    done: list[CaseCalibration] = []

    def finish(outcome: str) -> None:
        """The index with each case measured so far and how the calibration ended (a stopped one too)."""
        if index is None:
            return
        index.update({"finished_at": now_iso(), "outcome": outcome})
        for c in done:
            index["cases"][c.case].update({"record": str(c.path) if c.path else None, "error": c.error,
                                           "notebook": str(c.notebook) if c.notebook else None})
        write_json(run_dir / INDEX, index)

    with lifecycle.owned(run_dir, command, "calibration", finish):
        index = begin_index(run_dir, plan, [specs[n] for n in names], command, index)
        paths.make_dir(to, "--to")
        for name in names:
            done.append(calibrate_case(plan, specs[name], run_dir, to, command))
    return done


def measured_as(spec: CaseSpec) -> dict:
    """What a case's samples depend on besides the engine's noise: a resumed sample is reused only for a
    case still set this way (a float32 sample is no measurement of a bfloat16 case)."""
    return {"backend": spec.backend, "kernel": spec.kernel, "options": dict(spec.options),
            "model_digest": spec.model_digest, "fixture": spec.fixture_path, "golden": spec.golden_path,
            "buckets": spec.buckets, "prompts": spec.prompt_ids, "top_n": spec.top_n,
            **({"decode": spec.decode} if spec.decode else {})}


def _new_run_dir(plan: Plan, out: str | Path | None) -> Path:
    return lifecycle.claim(Path(out) if out else calibration_dir(plan), "--out", "calibration",
                           hint="use --resume to continue a calibration")


def resumed_index(plan: Plan, run_dir: Path, specs: Sequence[CaseSpec]) -> dict:
    """The index of a calibration directory that --resume may continue with ``specs``: made by calibrate, for
    this descriptor, each case already in it measured as it is set now. Refused in one line otherwise,
    before anything in the folder is touched."""
    shown = f"--resume {paths.display(run_dir)}"
    if not run_dir.is_dir():
        raise BadInput(f"--resume {run_dir}: no such calibration directory")
    if not (run_dir / INDEX).is_file():
        raise BadInput(f"{shown}: not a calibration directory (no {INDEX}); resume only a folder calibrate made")
    index = read_json_input(run_dir / INDEX, f"{shown}: its {INDEX}")
    if not isinstance(index, dict) or index.get("format") != RUN_FORMAT or not isinstance(index.get("cases"), dict):
        raise BadInput(f"{shown}: its {INDEX} is not a calibration directory's index ({RUN_FORMAT}); resume only a "
                       "folder calibrate made")
    if index.get("descriptor") != str(plan.path):
        raise BadInput(f"{shown}: it calibrates {index.get('descriptor')}, not {paths.display(plan.path)}; "
                       "calibrate in a fresh directory (--out)")
    for spec in specs:
        entries = finished(run_dir / f"{spec.name}.samples.jsonl", spec.name)
        before = (index["cases"].get(spec.name) or {}).get("measured_as")
        if before is None and entries:
            raise BadInput(f"{shown}: case {spec.name} has samples there but its {INDEX} does not say how they were "
                           "measured; calibrate in a fresh directory (--out)")
        changed = _first_change(before, measured_as(spec)) if before is not None else None
        if changed:
            raise BadInput(f"{shown}: case {spec.name}'s samples there were measured with {changed}; "
                           "calibrate in a fresh directory (--out)")
        elsewhere = _measured_elsewhere(entries, spec)
        if elsewhere:
            raise BadInput(f"{shown}: case {spec.name}'s samples there were measured on {elsewhere}; a record holds "
                           "for the host that measured it: resume on that host, or calibrate in a fresh directory "
                           "(--out)")
        check_covers(spec, entries)
    return index


def _measured_elsewhere(entries: Sequence[dict], spec: CaseSpec) -> str | None:
    """Where finished samples were measured, in words, when that is not this host (its CPU, or the device the case
    computes on): known here without a kernel, unlike the packages, which the record's build compares."""
    here = {"hardware": hardware(), "accelerator": accelerator(case_device(spec.options)).get("name")}
    for e in entries:
        runtime = e.get("runtime") or {}
        there = {"hardware": runtime.get("hardware"), "accelerator": (runtime.get("accelerator") or {}).get("name")}
        for key, value in there.items():
            if value != here[key]:
                return f"{key} {value!r}, where this host has {here[key]!r}"
    return None


def _first_change(before: Any, now: dict) -> str | None:
    """The first setting in which ``now`` differs from ``before`` (an option by its name), in words."""
    if not isinstance(before, dict):
        return f"settings this kit cannot read ({before!r})"
    for key, value in now.items():
        if key == "options" and isinstance(before.get(key), dict):
            old = before[key]
            for option in sorted(set(old) | set(value)):
                if old.get(option) != value.get(option):
                    return f"{option} = {old.get(option)!r}, the case now sets {value.get(option)!r}"
        elif before.get(key) != value:
            return f"{key} {before.get(key)!r}, the case now has {value!r}"
    return None


def begin_index(run_dir: Path, plan: Plan | LoadedDescriptor, specs: Sequence[CaseSpec], command: list[str],
                index: dict | None) -> dict:
    """The directory's index as this calibration starts: which descriptor, and how each case is measured
    (what a later --resume holds the case to); a resumed directory keeps its other cases' entries."""
    index = dict(index or {"format": RUN_FORMAT, "descriptor": str(plan.path), "cases": {}})
    index.update(command=command, started_at=now_iso(), finished_at=None)
    for spec in specs:
        index["cases"][spec.name] = {**(index["cases"].get(spec.name) or {}), "measured_as": measured_as(spec)}
    write_json(run_dir / INDEX, index)
    return index


def calibrate_case(plan: Plan, spec: CaseSpec, run_dir: Path, to: Path,
                   command: list[str]) -> CaseCalibration:
    """Measure one case's clean noise and write its calibration record: each of its backend's clean variants
    runs through the calibrate notebook in the case's kernel, one kernel per engine launch, its sample appended
    to ``<case>.samples.jsonl`` (which --resume reuses); the record, bounds derived by the rule from the
    samples, is written to ``to`` only when enough distinct samples came. Bounds measured on the case's own
    settings and hardware are what let a gate tell a regression from the noise a healthy release has
    (docs/calibration.md). A failed notebook or too few samples is returned as the case's error, not raised,
    so the other cases still calibrate."""
    variants = variants_for(spec)
    samples_path = run_dir / f"{spec.name}.samples.jsonl"
    notebook = run_dir / f"{spec.name}.ipynb"
    names = [v["name"] + (f" (launch {v['launch']})" if v.get("launch", 1) > 1 else "") for v in variants]
    log.log(NOTICE, f"calibrate {spec.name}: {len(variants)} clean variants ({', '.join(names)}), one launch each",
            extra=MARKUP)
    entries, why, _ = measure_variants(plan, spec, variants, run_dir, spec.name)
    if why:
        error = (f"{why}; {len(entries)} of {len(variants)} samples kept in {paths.display(samples_path)} "
                 f"(resume with --resume {paths.display(run_dir)})")
        log.error(f"calibrate {spec.name}: [red]error[/red]: {error}", extra=MARKUP)
        return CaseCalibration(spec.name, None, None, error, notebook)
    record = build_record(spec, variants, entries, command)
    unique = record.drift["distinct_samples"]
    if unique < MIN_SAMPLES:
        error = (f"{unique} distinct samples of {len(entries)} (the others are bit-identical repeats); the rule "
                 f"needs {MIN_SAMPLES}: give the backend more implementation variants; no record written")
        log.error(f"calibrate {spec.name}: [red]error[/red]: {error}", extra=MARKUP)
        return CaseCalibration(spec.name, None, None, error, notebook)
    for miss in [x for x in record.drift.get("leave_one_out", []) if not x["passed"]]:
        p = f"p = {miss['p_value']:.2g}" if miss["p_value"] is not None else "by the range rule"
        log.warning(f"calibrate {spec.name}: [yellow]warning[/yellow]: variant {miss['variant']} fails the drift "
                    f"test against the other variants ({p}): the variants may not span the case's noise yet; a "
                    "healthy release like it would fail the gate", extra=MARKUP)
    path = write_record(record, to)
    record = dataclasses.replace(record, path=path)
    where = os.path.relpath(path, plan.path.parent)
    measured = record.fingerprint.get("runtime", {}).get("accelerator", {}).get("name", "this host")
    steps = f", decode steps' bounds {record.decode_reference()['step_bounds']}" if record.decode else ""
    log.log(NOTICE, escape(f"calibrate {spec.name}: bounds {record.bounds}{steps} from {len(entries)} samples on "
                           f"{measured}; record {paths.display(path)}\n  use it: [cases.{spec.name}] calibration = "
                           f"\"{where}\" (in place of bound), or add it to the case's list of one record per class of "
                           "hardware"), extra=MARKUP)
    return CaseCalibration(spec.name, record, path, None, notebook)


def measure_variants(plan: Plan, spec: CaseSpec, variants: list[dict], run_dir: Path,
                     stem: str) -> tuple[list[dict], str | None, str | None]:
    """Every variant's sample entry, scored through the calibrate notebook in the case's kernel, one kernel per
    launch, appended to ``<stem>.samples.jsonl`` in ``run_dir`` (finished ones reused); with why the
    measurement stopped short (a failed notebook, a killed kernel), or None; and the class name of the exception
    a cell raised when one stopped it (kit.run.notebook.NotebookOutcome.raised), or None."""
    samples_path = run_dir / f"{stem}.samples.jsonl"
    finished(samples_path, spec.name)  # a line that is no sample is refused before a kernel starts, not inside one
    why = raised = None
    backend = registry.get(spec.backend)
    # What the backend's libraries read when they load is in place before the kernel imports anything, as in a gate.
    env = {**FRESH_COMPILES, **backend.environment(spec.options)}
    for launch, group in by_launch(variants).items():
        name = stem if launch == 1 else f"{stem}.launch{launch}"
        outcome = run_notebook(CALIBRATE_NOTEBOOK, run_dir / f"{name}.ipynb",
                               {"spec": spec.to_dict(), "variants": group, "samples_path": str(samples_path),
                                "descriptor": str(plan.path), "case": spec.name},
                               spec.kernel, spec.timeout_s * len(group), rundir.kernel_log(run_dir, name),
                               env=env, imports=backend.imports(spec.options))
        if outcome.error or outcome.killed_by:
            why, raised = outcome.error or f"killed ({outcome.killed_by})", outcome.raised
            break
    wanted = {(v["name"], int(v.get("launch", 1))) for v in variants}
    # This measurement's variants only: a resumed file may hold samples of variants since dropped.
    entries = [e for e in finished(samples_path, spec.name)
               if (e["sample"]["variant"], e["sample"]["launch"]) in wanted]
    return entries, why, raised


def build_record(spec: CaseSpec, variants: list[dict], entries: list[dict], command: list[str]) -> CalibrationRecord:
    """The record of one case from its samples (all measured on one runtime, in one kernel)."""
    fixture = load_fixture(spec.fixture_path)
    selected = fixture.select(spec.prompt_ids, spec.buckets)
    # Compared as this kit keys a runtime (kit.core.host.runtime.numeric_fingerprint): samples an earlier kit wrote
    # with an engine's own variables in them still make a record when those are all that differs.
    inputs, runtime = entries[0]["inputs"], numeric_fingerprint(entries[0]["runtime"])
    for e in entries[1:]:
        if e["inputs"] != inputs:
            raise BadInput(f"case {spec.name}: its samples were measured on different inputs "
                           f"({e['inputs']} against {inputs}); calibrate again in a fresh directory")
        theirs = numeric_fingerprint(e["runtime"])
        if theirs != runtime:  # the record names one runtime: its samples must all be of it
            key = next(k for k in sorted(set(runtime) | set(theirs)) if runtime.get(k) != theirs.get(k))
            raise BadInput(f"case {spec.name}: its samples were measured on different runtimes ({key} "
                           f"{theirs.get(key)!r} against {runtime.get(key)!r}); calibrate again in a fresh "
                           "directory")
    check_covers(spec, entries)
    return CalibrationRecord.measured(
        buckets={p.id: p.bucket for p in selected}, decode_steps=spec.decode,
        case=spec.name, backend=spec.backend, noise_class=noise_class(spec.options), inputs=inputs,
        options=dict(spec.options),
        fingerprint={"release": entries[0]["release"], "runtime": runtime, "kit_version": __version__},
        command=command, variants=[{k: v.get(k) for k in ("name", "overrides", "why", "launch")} for v in variants],
        samples=[Sample.from_dict(e["sample"]) for e in entries], created_at=now_iso())


def check_covers(spec: CaseSpec, entries: Sequence[dict]) -> None:
    """Every sample measured every prompt the case scores (one measured before the fixture or the case's
    buckets changed did not)."""
    if not entries:
        return
    selected = load_fixture(spec.fixture_path).select(spec.prompt_ids, spec.buckets)
    for e in entries:
        missing = [p.id for p in selected if p.id not in e["sample"]["errors"]]
        if missing:
            raise BadInput(f"case {spec.name}: sample {e['sample']['variant']} (launch {e['sample']['launch']}) has "
                           f"no error for {len(missing)} of the case's prompts, first {missing[0]} (measured before "
                           "the case's prompts changed); calibrate again in a fresh directory (--out)")


def write_record(record: CalibrationRecord, to: Path) -> Path:
    """``to/<sha256>.json``; an existing file of that name holds these very bytes already."""
    path = to / record_filename(record)
    if not path.exists():
        atomic_write_bytes(path, record.canonical())
    return path


