"""`parity-kit baseline deepen`: more clean samples in a case's calibration record, blessed like any new record.

A calibration record is a sample of clean launches, and what it can see grows with its size: with 3 distinct samples
the drift test has 2 degrees of freedom and the bound rule widens each bucket's spread by d2(10)/d2(3) = 1.8, so an
error a 9-sample record catches passes (docs/calibration.md, "Records that deepen"). A record made in one sitting on
a scarce machine stays thin; so a record grows instead, from two sources:

- **further launches here**: each of the case's clean variants again, one engine launch per round, numbered after
  the launches the record already holds; every sample is kept as it finishes (``--resume`` goes on from there), so a
  call cut short still leaves progress;
- **passed control runs of the pin** (``--history DIR``): the current-pin side of a control is a clean launch of the
  pinned release. One is taken only when it is verified (`parity-kit verify`: its seal and verdict re-derived), its
  verdict passed, the case passed on bounds of its own class with its drift test run, on the record's inputs,
  options, release and class of hardware; never a candidate's run, a failed one, one on borrowed bounds or with no
  baseline, or one of another card or runtime. Each is named in the new record by its run's root digest.

The deeper record supersedes the one in use through the lineage, judged as `baseline make` judges every new record
(kit.baselines.make.bless): the backtest over the archive and the superseded record's samples, its bounds' moves
against the record it supersedes, and an evidence gate of the deepened cases. Nothing is placed unless all pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from kit.baselines import steps
from kit.baselines.archive import runs_under
from kit.baselines.made import Made, Making
from kit.baselines.make import (Blessing, MakeOutcome, _archive, _begin, _folders, _render_evidence, _resumed,
                                bless)
from kit.calibrate.run import build_record, measure_variants, variants_for, write_record
from kit.case.calibrate import sample_of
from kit.core.baselines.baselinekind import CALIBRATION
from kit.core.baselines.lineageclaims import ACCEPT_LOOSER, reason_problem
from kit.core.host.runtime import numeric_fingerprint
from kit.core.errors import BadInput
from kit.core.noise.calibration import CalibrationRecord, load_record, measured_on
from kit.core.records import paths, rundir
from kit.core.records.records import BoundKind, CaseResult, Status
from kit.core.records.results import RunDir, Verdict
from kit.core.records.spec import CaseSpec
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import Plan, resolve
from kit.descriptor.standing import Standing, plan_rows
from kit.gate.executor import check_run
from kit.run import lifecycle
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

DEEPEN_DIR = "deepen"  # the working directory's folder of samples measured here, one file per case
HISTORY_VARIANT = "control-run"  # the variant name of a sample taken from a control's current-pin run


@dataclass(frozen=True)
class DeepenRequest:
    """One `baseline deepen`: the descriptor and its cases (none: every case with a record of this host's class),
    how many further rounds of launches to measure here, the folders of runs whose passed control runs of the pin
    are taken as samples, the reason the new records keep, and how the make's other options set it."""

    descriptor: str | Path
    reason: str
    cases: tuple[str, ...] = ()
    launches: int = 1
    history: tuple[Path, ...] = ()
    archives: tuple[Path, ...] = ()
    skip_unreadable: bool = False
    accept_flips: str | None = None
    accept_looser: str | None = None
    jobs: int | None = None
    out: Path | None = None
    resume: Path | None = None
    command: tuple[str, ...] = ()
    signer: Any = None  # signs each lineage entry written (kit.run.signing.load_signer); None: unsigned


@dataclass(frozen=True)
class HistorySample:
    """A passed control run of the pin, as one clean sample of a case: its run's root digest names it."""

    entry: dict  # as calibrate's samples file holds a sample (sample, release, inputs, runtime)
    root: str
    source: str


def deepen(request: DeepenRequest) -> MakeOutcome:
    """Deepen each selected case's record of this host's class (see the module) and bless the deeper record on the
    make's evidence. Bad input (no reason, nothing to add, a case with no record here to deepen, a history that is no
    folder) is refused before anything runs."""
    if (problem := reason_problem(request.reason)) is not None:
        raise BadInput(f"--reason: {problem}; a baseline keeps why it was made (\"more launches on the H100\")")
    for flag, given in (("--accept-flips", request.accept_flips), (ACCEPT_LOOSER, request.accept_looser)):
        if given is not None and (problem := reason_problem(given)) is not None:
            raise BadInput(f"{flag}: {problem}; an acceptance needs its reason, in words")
    if request.launches < 0:
        raise BadInput(f"--launches {request.launches}: expected 0 or more rounds of launches")
    if request.launches == 0 and not request.history:
        raise BadInput("--launches 0 and no --history: nothing to deepen the records with")
    for folder in request.history:
        if not folder.is_dir():
            raise BadInput(f"--history {paths.display(folder)}: no such folder of runs")
    desc = load_descriptor(request.descriptor)
    plan = resolve(desc, list(request.cases) or None)
    folders = _folders(plan)
    before = plan_rows(plan)
    targets = _targets(plan, before, request.cases)
    command = list(request.command) or ["parity-kit", "baseline", "deepen", str(request.descriptor), "--reason",
                                        request.reason]
    check_run(desc)
    roots = list(request.archives) or ([paths.runs_root()] if paths.runs_root().is_dir() else [])
    archived = {case: _archive(roots, case, request.skip_unreadable) for case in targets}
    work_dir = _resumed(request.resume, plan) if request.resume is not None else _begin(
        lifecycle.claim(request.out or rundir.new_run_dir("baseline", plan.name), "--out", "baseline deepen",
                        command), plan)
    with lifecycle.owned(work_dir, command, "baseline deepen"):
        making = Making(desc, plan, work_dir, command, steps.StepClock(work_dir, len(targets) + 1), None)
        history = ", ".join(map(paths.display, request.history))
        log.log(NOTICE, f"baseline deepen in {paths.display(work_dir)}: {', '.join(targets)}; "
                        f"{request.launches} round(s) of launches"
                        f"{', control runs of the pin from ' + history if history else ''}; then the backtest and an "
                        f"evidence gate of the deepened cases (resume an interrupted deepen with --resume "
                        f"{paths.display(work_dir)})", extra=MARKUP)
        measuring = resolve(desc, list(targets), resolve_calibration=False)  # as measured: no bounds
        for case, superseded in targets.items():
            making.made.append(_deepen_case(making, measuring.case(case).spec, superseded, request))
        outcome = bless(making, Blessing(before, archived, roots, request.reason, request.accept_flips,
                                         request.accept_looser, request.jobs,
                                         "not measured: a deepened record keeps the power record measured against "
                                         "the record it supersedes until `baseline make` measures one against it",
                                         list(targets), request.signer), folders)
    _render_evidence(work_dir)
    return outcome


def _targets(plan: Plan, rows: Sequence, asked: Sequence[str]) -> dict[str, Path]:
    """Case -> the record of this host's class it uses now, for every case asked (each must have one), or every
    case that has one."""
    own = {r.case: Path(r.file) for r in rows if r.kind is CALIBRATION and r.standing == Standing.MATCH and r.file}
    for case in asked:
        if case not in own:
            raise BadInput(f"case {case}: no calibration record of this host's class to deepen; `parity-kit "
                           f"baseline make {paths.display(plan.path)} --case {case} --reason ...` makes one")
    targets = {c: own[c] for c in asked} if asked else own
    if not targets:
        raise BadInput(f"{paths.display(plan.path)}: no case has a calibration record of this host's class to deepen")
    return targets


def further_variants(spec: CaseSpec, record: CalibrationRecord, rounds: int) -> list[dict]:
    """``rounds`` further launches of each of the case's clean variants (the case as set and its backend's
    implementation variants), numbered after the last launch the record holds: launch n of every variant runs in
    one kernel, so each round is a launch of each."""
    first = max((s.launch for s in record.samples), default=1) + 1
    base = [v for v in variants_for(spec) if int(v.get("launch") or 1) == 1]
    return [{**v, "launch": n, "why": f"{v['why']}; launch {n}, deepening the record"}
            for n in range(first, first + rounds) for v in base]


def _deepen_case(making: Making, spec: CaseSpec, superseded: Path, request: DeepenRequest) -> Made:
    """The case's deeper record, staged: the record's samples, the further launches measured here, the control runs
    taken from the history; an error (samples kept for --resume) when a launch failed or nothing was added."""
    record = load_record(superseded)
    runtime = measured_on({"fingerprint": record.fingerprint}) or "this host"
    variants = further_variants(spec, record, request.launches)
    what = f"deepen {spec.name}: {len(variants)} further launches"
    entries: list[dict] = []
    if variants:
        with making.clock.step(CALIBRATION.name, spec.name, what):
            folder = paths.make_dir(making.work_dir / DEEPEN_DIR, "samples folder")
            entries, why, _ = measure_variants(making.plan, spec, variants, folder, spec.name)
        if why:
            return Made(CALIBRATION, spec.name, runtime, None, superseded,
                        f"{why}; {len(entries)} of {len(variants)} further samples kept (resume with --resume "
                        f"{paths.display(making.work_dir)})")
    taken = history_samples(record, spec, request.history, making.plan.path)
    old = [{"inputs": record.inputs, "runtime": record.fingerprint["runtime"], "release": record.fingerprint["release"],
            "sample": s.to_dict()} for s in record.samples]
    _same_release(record, [*entries, *(h.entry for h in taken)], spec.name)
    added = [*variants, *({"name": h.entry["sample"]["variant"], "overrides": {}, "launch": None,
                           "why": f"a passed control run of the pin: run {h.root}"} for h in taken)]
    deeper = build_record(spec, [*record.variants, *added], [*old, *entries, *(h.entry for h in taken)],
                          making.command)
    gained = deeper.drift["distinct_samples"] - record.drift["distinct_samples"]
    if not entries and not taken:
        return Made(CALIBRATION, spec.name, runtime, None, superseded,
                    "nothing to deepen it with: no further launch was asked for and the history holds no passed "
                    "control run of the pin that is a sample of this record (run with -v to see why each was left)")
    if gained <= 0:
        return Made(CALIBRATION, spec.name, runtime, None, superseded,
                    f"no new distinct sample: the {len(entries)} further launch(es) and {len(taken)} control run(s) "
                    "each repeat one the record holds bit for bit (a deterministic engine here: its record is as "
                    "deep as its variants make it)")
    staged = write_record(deeper, paths.make_dir(making.work_dir / "calibrations", "calibrations directory"))
    log.log(NOTICE, f"deepen {spec.name}: {record.drift['distinct_samples']} -> {deeper.drift['distinct_samples']} "
                    f"distinct samples ({len(entries)} launched here, {len(taken)} control runs); bounds "
                    f"{dict(record.bounds)} -> {dict(deeper.bounds)}", extra=MARKUP)
    return Made(CALIBRATION, spec.name, runtime, staged, superseded, bounds=dict(deeper.bounds),
                command=making.command)


def _same_release(record: CalibrationRecord, entries: Sequence[dict], case: str) -> None:
    """Every new sample measured on the release the record measured: a record deepened with another pin's samples
    would mix two engines' noise (the runtime, inputs and hardware are held to it by the record's build)."""
    for e in entries:
        key = release_change(record.fingerprint["release"], e["release"], record.options)
        if key is not None:
            raise BadInput(f"case {case}: a new sample was measured on another release ({key} "
                           f"{e['release'].get(key)!r}, the record's {record.fingerprint['release'].get(key)!r}): "
                           "deepen a record only with launches of the release it measured; `baseline make --again` "
                           "makes a record of the new one")


def release_change(recorded: dict, now: dict, options: dict) -> str | None:
    """The first key of a release (engine and library versions, device name) both name with different values; None
    when none does. A key only one of them names was added to what a kit records after the other was written (a
    record of an earlier kit lacks it), which says nothing of the engine; one that is also a case option (attention,
    dtype) is how the variant was set, which its overrides decide and the options compare."""
    return next((k for k in sorted(set(recorded) & set(now) - set(options)) if recorded[k] != now[k]), None)


def history_samples(record: CalibrationRecord, spec: CaseSpec, roots: Sequence[Path],
                    descriptor: Path) -> list[HistorySample]:
    """The passed control runs of the pin under ``roots`` that are clean samples of ``record`` (see the module), each
    verified against ``descriptor`` (the one being deepened, never one a run names), in the order found, each run
    once; every run looked at and left out is said in a line at info level, why."""
    from kit.gate.verify.runcheck import verify  # the re-derivation of a run: imported where a history is given only

    out: list[HistorySample] = []
    seen: set[str] = set()
    for root in roots:
        found, unreadable, skipped = runs_under(root)
        for u in [*unreadable, *skipped]:
            log.info(f"deepen {spec.name}: {u.source} not read: {u.reason}")
        for run_dir, kind, _ in found:
            if kind != rundir.RunRole.CONTROL_CURRENT:
                continue
            why, taken = _control_sample(record, spec, run_dir, lambda d: verify(d, descriptor))
            if taken is None:
                log.info(f"deepen {spec.name}: {paths.display(run_dir)} not taken: {why}")
                continue
            if taken.root in seen:
                continue
            seen.add(taken.root)
            out.append(taken)
    log.log(NOTICE, f"deepen {spec.name}: {len(out)} passed control run(s) of the pin taken as samples", extra=MARKUP)
    return out


def _control_sample(record: CalibrationRecord, spec: CaseSpec, run_dir: Path,
                    verify) -> tuple[str, HistorySample | None]:
    """Why a control's current-pin run is no clean sample of ``record``, or the sample it is."""
    try:
        verified = verify(run_dir)
    except BadInput as exc:
        return f"cannot be verified: {exc}", None
    if not verified.ok:
        return f"not verified ({verified.problems[0]})", None
    if verified.verdict != Verdict.PASSED:
        return f"verified {verified.verdict}, not passed", None
    run = RunDir.local(run_dir)
    result = run.case_result(spec.name, run.manifest().get("kit_version"))
    if result is None:
        return "the run holds no result of the case", None
    problem = _not_a_sample(record, dict(spec.options), result)
    if problem is not None:
        return problem, None
    sample = sample_of(f"{HISTORY_VARIANT} {verified.root[:12]}", 1, result).to_dict()
    entry = {"case": spec.name, "sample": sample, "release": result.release,
             "inputs": {"fixture_sha256": result.fixture_sha256, "golden_sha256": result.golden_sha256,
                        "model_digest": result.model_digest},
             "runtime": record.fingerprint["runtime"]}
    assert verified.root is not None  # a verified run has one
    return "", HistorySample(entry, verified.root, paths.display(run_dir))


def _not_a_sample(record: CalibrationRecord, options: dict, result: CaseResult) -> str | None:
    """Why a passed case result is no clean sample of ``record`` for the case set with ``options`` now (the launches
    measured here are of the case so set, and so is the deeper record): a status other than passed, bounds not its
    own class's (borrowed, hand-set), no drift test run, another class of hardware, runtime, release, options or
    inputs, or a prompt the record measures that it lacks."""
    if result.status != Status.PASSED:
        return f"the case {result.status}"
    if result.bound_kind is not BoundKind.CALIBRATED:
        return f"the case was judged on {result.bound_kind} bounds, not a calibration record"
    if result.drift is None:
        return f"the case ran no drift test ({result.drift_skipped or 'none recorded'}): its bounds were not its own " \
               "class's"
    measured = (result.bound_source or {}).get("measured_on")
    if numeric_fingerprint(measured) != numeric_fingerprint(record.fingerprint["runtime"]):
        return f"judged under a record of another runtime ({measured_on({'fingerprint': {'runtime': measured}})})"
    if (key := release_change(record.fingerprint.get("release") or {}, result.release, record.options)) is not None:
        return f"another release of the engine ({key} {result.release.get(key)!r})"
    if dict(result.options) != dict(options):
        changed = next(k for k in sorted(set(result.options) | set(options)) if result.options.get(k) != options.get(k))
        return f"the case was set otherwise ({changed})"
    inputs = {"fixture_sha256": result.fixture_sha256, "golden_sha256": result.golden_sha256,
              "model_digest": result.model_digest}
    if inputs != dict(record.inputs):
        return "other inputs (fixture, golden or model) than the record's"
    scored = {p.id for p in result.prompts if p.top_probability_shift is not None}
    missing = sorted(set(record.prompts) - scored)
    if missing:
        return f"no error and shift for {len(missing)} of the record's prompts, first {missing[0]}"
    return None
