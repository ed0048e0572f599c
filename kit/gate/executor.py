"""Run a gate: one papermill execution per case, side by side, each with a timeout.

A case notebook writes its own result; the executor records ``timeout`` (the
kernel's process tree was killed) or ``error`` (the kernel died or a cell
raised) itself, with the kind of error (kit.core.outcomes) the notebook's
outcome or the executor's own failure gives it, never one read from its text.
In every outcome the executed, possibly partial, notebook stays in the run
directory, and a finished case result is never overwritten.

What a case is (``execute_case``) is the same for every executor registered in
kit.gate.executors; the local one (``LocalExecutor``: threads on this machine,
whole GPUs of its own per GPU case) is here, beside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import platform
import socket
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from kit import __version__
from kit.backends import registry
from kit.core.records import contract, paths, rundir
from kit.core.model import faultcopy
from kit.core import outcomes
from kit.core.verdict.borrowed import judged_under_borrowed_bounds
from kit.core.noise.calibration import hardware_change
from kit.descriptor.baselines import make_command
from kit.core.verdict.coverage import Expected, coverage_problem, rejudged
from kit.core.errors import BadInput, ParityKitError
from kit.core.records.fixture import Prompt
from kit.core.records.jsonio import sha256_file, write_json
from kit.core.records.phases import with_executor_phases
from kit.core.records.records import CaseResult, Status
from kit.core.verdict.detectable import judged_by_power
from kit.core.records.results import kernel_result, now_iso, save_case_result
from kit.core.verdict.scoring import bound_for
from kit.core.records.spec import CaseSpec
from kit.descriptor.host import Host, hardware_record
from kit.descriptor.load import LoadedDescriptor, packaged_notebook
from kit.descriptor.standing import plan_rows
from kit.descriptor.plan import CasePlan, Plan, outline, resolve
from kit.gate import resume
from kit.gate.executors.interface import DEFAULT, Executor, GateRun, RunProgress, Share, executors
from kit.gate.preflight import Inputs, check_inputs
from kit.run import compilecache, devices, lifecycle
from kit.run.devices import DevicePool, Gpu, Inventory, Request, Slots, Unavailable, WaitStopped
from kit.run.notebook import describe_failure, run_notebook, stop_all, stopping
from kit.core.records.records import GoldenMode

log = logging.getLogger(__name__)

def default_run_dir(desc: LoadedDescriptor | Plan) -> Path:
    """Where a gate run of ``desc`` goes when no --out is given: a new folder under runs/."""
    return rundir.new_run_dir("", desc.name)


@dataclass(frozen=True)
class Checked:
    """A run's plan and its inputs, checked: what may run, known before anything is written, and the executor
    that checked what it can give them (the one that runs them)."""
    plan: Plan
    inputs: Inputs
    gpus: Inventory | None = None  # the node's GPUs, listed when a case asks for some (local executor)
    executor: Executor = field(default_factory=lambda: executors.get(DEFAULT))

    @property
    def specs(self) -> list[CaseSpec]:
        """The checked plan's case specs, in the descriptor's order."""
        return self.plan.specs


def check_run(desc: LoadedDescriptor, only: Sequence[str] | None = None, executor: str = DEFAULT,
              release: str | None = None) -> Checked:
    """The preflight of one run (one release): its cases resolve into a plan, and every input they read
    exists and is what the descriptor pins. Writes nothing."""
    return check_plan(resolve(desc, only, release), executor)


def check_plan(plan: Plan, executor: str = DEFAULT) -> Checked:
    """The preflight of a resolved plan: what the executor can give, and the outside world (files, digests,
    kernels, GPUs)."""
    chosen = executors.get(executor)
    gpus = chosen.check(plan)
    return Checked(plan, check_inputs(plan), gpus, chosen)


def check_local_resources(plan: Plan) -> Inventory | None:
    """What the local executor cannot give is refused before anything runs: several nodes, a fraction
    of a GPU, more GPUs than this node has. Returns the node's GPUs when some case asks for them."""
    wanted = {}
    for case in plan.cases.values():
        res, where = case.resources, case.where.resources
        if res.nodes > 1:
            raise BadInput(f"{where}: case {case.name} asks for {res.nodes} nodes; only `--executor ray` can "
                           "place a multi-node case")
        wanted[case.name] = devices.whole_gpus(res.num_gpus, case.name, where)
    if not any(wanted.values()):
        return None
    inventory = devices.discover()
    for name, n in wanted.items():
        devices.check_fits(name, n, inventory, plan.cases[name].where.resources)
    return inventory


def prepare_run(desc: LoadedDescriptor, out: str | Path | None, only: Sequence[str] | None = None,
                resume_dir: str | Path | None = None, command: Sequence[str] | None = None,
                executor: str = DEFAULT, release: str | None = None, checked: Checked | None = None) -> GateRun:
    """Validate everything (a fresh run's caller may pass the ``checked`` preflight it already did),
    then claim the run directory and lock it for this process.

    A fresh run claims a new or empty directory (an earlier run's is never written into); a
    resumed run locks the earlier run's directory and reuses what it may.
    """
    if resume_dir is None:  # an --out that cannot be created is refused before the preflight's work
        paths.check_dir_target(Path(out) if out else default_run_dir(desc), "run directory")
    selected = None
    if resume_dir is not None:  # a resumed run's verdict covers every case of its directory, not only --case
        selected = list(only) if only else None
        only = resume.covered_cases(Path(resume_dir), outline(desc), only)
    checked = checked or check_run(desc, only, executor, release)
    return claim_run(checked, out, resume_dir, selected, command, release)


def claim_run(checked: Checked, out: str | Path | None = None, resume_dir: str | Path | None = None,
              selected: Sequence[str] | None = None, command: Sequence[str] | None = None,
              release: str | None = None) -> GateRun:
    """Claim (or, resumed, lock) the run directory of a checked plan, to be run by the executor that checked it;
    ``selected``: the cases a resumed run may run again (None: all)."""
    plan, specs, inputs = checked.plan, checked.specs, checked.inputs
    fingerprints = {k: resume.release_fingerprint(k) for k in sorted({s.kernel for s in specs})}
    if resume_dir is not None:
        run = _resume(plan, Path(resume_dir), specs, inputs, fingerprints, command, selected)
    else:
        run = _claim(plan, Path(out) if out else default_run_dir(plan), specs, inputs, command)
    inputs.digests.save(run.run_dir / rundir.MODEL_DIGESTS)  # the kernels' model checks read it
    unjudged = {spec.name: saved(no_baseline_result(spec), rundir.case_file(run.cases_dir, spec.name))
                for spec in specs if spec.no_baseline}
    return dataclasses.replace(
        run, fingerprints=fingerprints, executor=checked.executor, release=release, gpus=checked.gpus,
        infrastructure_retries=plan.infrastructure_retries, expected=expectations(specs, inputs),
        custom_notebooks=custom_notebooks(specs), results={**run.results, **unjudged})


@dataclass(frozen=True)
class RunRequest:
    """One gate run asked for, as every command that runs a gate asks it: what it runs (a descriptor's path, the
    descriptor loaded, or a plan whose preflight is done, ``Checked``), its run directory (``out``; None: a new
    one under runs/), the cases (``only``; None: all), the release, the executor, an earlier run directory to
    resume, and ``infra_retries`` (None: the descriptor's [defaults] infrastructure_retries)."""

    source: str | Path | LoadedDescriptor | Checked  # a path is loaded once, by the session
    out: str | Path | None = None
    only: Sequence[str] | None = None
    release: str | None = None
    executor: str = DEFAULT
    resume: str | Path | None = None
    infra_retries: int | None = None


def open_run(request: RunRequest, command: Sequence[str] = ()) -> GateRun:
    """A run begun: its descriptor checked (``prepare_run``; a ``Checked`` plan's preflight is already done, by
    its executor), its directory claimed and locked, and its manifest's start written, with the time it started,
    the baselines its cases stand on and the hardware they were resolved for. ``request.source`` is loaded
    already (the session loads a path once)."""
    source, out, release, executor = request.source, request.out, request.release, request.executor
    assert isinstance(source, (LoadedDescriptor, Checked)), "the session loads a descriptor's path"
    if isinstance(source, Checked):
        if executor != source.executor.name:  # a caller's mistake, not the user's: the check was that executor's
            raise ValueError(f"a plan checked by executor {source.executor.name!r} cannot be run by {executor!r}")
        paths.check_dir_target(Path(out) if out else default_run_dir(source.plan), "run directory")
        run = claim_run(source, out, command=command, release=release)
    else:
        run = prepare_run(source, out, request.only, resume_dir=request.resume, command=command, executor=executor,
                          release=release)
    infra_retries = request.infra_retries
    retries = run.infrastructure_retries if infra_retries is None else infra_retries
    run = dataclasses.replace(run, started_at=now_iso(), baselines=_baselines(run.plan), hardware=_hardware(run.specs),
                              infrastructure_retries=retries)
    write_manifest(run, command)
    return run


def no_baseline_result(spec: CaseSpec) -> CaseResult:
    """The record of a case that cannot be judged here: no golden holds on its runtime, or no calibration record was
    measured on its class of hardware."""
    now, missing = now_iso(), spec.no_baseline
    assert missing is not None  # only such a case is recorded so
    notes = [f"runtime: {spec.runtime}"] if spec.runtime else []
    return CaseResult(case=spec.name, backend=spec.backend, status=Status.NO_BASELINE, golden_kind=spec.golden_kind,
                      error=missing.text, remedy=missing.command, options=dict(spec.options), started_at=now,
                      finished_at=now, duration_s=0.0, notes=notes)


def expectations(specs: Sequence[CaseSpec], inputs: Inputs) -> dict[str, Expected]:
    """Per case, what its verdict must cover: the prompts it selects and the inputs the preflight checked,
    and the bound each prompt is held to (by the bucket the fixture, not the result, gives it)."""
    golden_sha256 = {str(g.path): g.sha256 for g in inputs.goldens.values()}
    return {s.name: expectation(s, inputs.fixture.select(s.prompt_ids, s.buckets),
                                s.inputs_digest(inputs.fixture.sha256, golden_sha256.get(s.golden_path, "")))
            for s in specs}


def expectation(spec: CaseSpec, prompts: Sequence[Prompt], inputs_digest: str) -> Expected:
    """What one case's verdict must cover: ``prompts`` (its selection of the fixture), its inputs, and the bound
    each prompt is held to by the bucket the fixture gives it."""
    return Expected(spec.name, spec.backend, tuple(p.id for p in prompts), inputs_digest,
                    {p.id: bound_for(p.bucket, spec.bound, spec.bucket_bounds) for p in prompts},
                    exact=spec.golden_kind == GoldenMode.EXACT)


def custom_notebooks(specs: Sequence[CaseSpec]) -> dict[str, dict]:
    """The case notebooks that are not the kit's own, named with their digest: code a reader must be
    able to identify when weighing the verdict."""
    return {s.name: {"path": s.notebook, "sha256": sha256_file(s.notebook)}
            for s in specs if not packaged_notebook(s.notebook)}


def _claim(plan: Plan, run_dir: Path, specs: list[CaseSpec], inputs: Inputs,
           command: Sequence[str] | None) -> GateRun:
    # creating cases/ is the atomic claim: of two runs started at once, one gets it
    lock = lifecycle.claim_locked(run_dir, "run directory", "gate run", command, "choose another --out, or --resume it",
                                  rundir.CASES)
    return GateRun(run_dir.resolve(), plan, specs, inputs, lock=lock)


def _resume(plan: Plan, run_dir: Path, specs: list[CaseSpec], inputs: Inputs,
            fingerprints: dict[str, str | None], command: Sequence[str] | None,
            selected: Sequence[str] | None = None) -> GateRun:
    resume.earlier_manifest(run_dir, plan.name)
    lock = lifecycle.locked(run_dir, command, "gate run")
    try:
        earlier = resume.earlier_manifest(run_dir, plan.name)  # again, now that no other run writes it
        cases_dir = run_dir / "cases"
        cases_dir.mkdir(exist_ok=True)
        goldens = {str(g.path): g.sha256 for g in inputs.goldens.values()}
        kept = resume.plan(resume.ResumeInputs(
            cases_dir, specs, inputs.fixture.sha256, goldens, fingerprints, earlier.get("kernel_fingerprints") or {},
            expectations(specs, inputs), {n: c["sha256"] for n, c in (earlier.get("notebooks") or {}).items()},
            {n: c["sha256"] for n, c in custom_notebooks(specs).items()}, selected))
        for name in kept.superseded:
            resume.set_aside(cases_dir, name)
    except BaseException:
        lock.release()
        raise
    history = [*earlier.get("history", []),
               {k: earlier.get(k) for k in ("started_at", "finished_at", "command", "executor")}]
    return GateRun(run_dir.resolve(), plan, specs, inputs, results={**kept.reused, **kept.kept_results},
                   lock=lock, reused=kept.reused, rerun=kept.rerun, kept=kept.kept, history=history)


def manifest(run: GateRun, command: Sequence[str]) -> dict:
    """The run's manifest: what ran (descriptor and its digest, cases, kernels, inputs, release, executor,
    hardware, baselines, the stated false-failure rate), when, by which command; finished, the digests that seal
    it."""
    doc = {
        "name": run.plan.name,
        "descriptor": str(run.plan.path),
        "descriptor_sha256": run.plan.sha256,
        "cases": [s.name for s in run.specs],
        "kernels": {s.name: s.kernel for s in run.specs},
        # The named release's builds, per backend, as the descriptor states them.
        "release": run.plan.release.identity() if run.release is not None and run.plan.release is not None else None,
        "fixture": str(run.inputs.fixture.path),
        "fixture_sha256": run.inputs.fixture.sha256,
        "model": str(run.plan.model.path),
        "model_digest": run.inputs.model_digest,
        "models": run.inputs.models,
        # Per model digest, the provenance of each model folder that is a fault copy (`parity-kit fault inject`):
        # a run of one is known bad, which a backtest of a new baseline reads here (kit.baselines.archive).
        "model_faults": faultcopy.model_faults([(run.plan.model.path, run.inputs.model_digest), *(
            (run.plan.models[name].path, digest) for name, digest in run.inputs.models.items())]),
        "goldens": {k: {"path": str(g.path), "sha256": g.sha256} for k, g in run.inputs.goldens.items()},
        "kit_version": __version__,
        "host": socket.gethostname(),
        "platform": f"{platform.system()} {platform.machine()} python {platform.python_version()}",
        "command": list(command),
        "started_at": run.started_at,
        "finished_at": run.finished_at or None,
        "duration_s": run.duration_s or None,
        "executor": run.executor.name,
        "kernel_fingerprints": run.fingerprints,
        # A resumed run says which results it took over and why the others ran again.
        "reused": {n: {"status": r.status, "finished_at": r.finished_at} for n, r in run.reused.items()},
        "rerun": run.rerun,
        "kept": run.kept,
        # The cases run again after an infrastructure failure (kit.gate.retry): case -> why.
        "infrastructure_retries": run.infrastructure_retries,
        "retried": run.retried,
        # Case notebooks from outside the kit's notebooks folder: code the descriptor trusted, by digest.
        "notebooks": run.custom_notebooks,
        "history": run.history,
        "placements": run.placements,
        "gpus": run.gpus.to_dict() if run.gpus is not None else None,  # what the node offered the cases
        "baselines": run.baselines if run.baselines is not None else _baselines(run.plan),
        # Per case, the hardware its baselines were chosen for (kit.descriptor.host): what `parity-kit verify`
        # resolves the descriptor for again.
        "hardware": run.hardware if run.hardware is not None else _hardware(run.specs),
        # The gate's stated false-failure rate, its split over the drift cases and the bounds' measured rate.
        "false_failure_rate": run.plan.false_failure_statement(),
    }
    # Finished, the files its verdict rests on and the manifest itself, sealed by digest (`parity-kit verify`
    # checks them).
    return rundir.sealed(run.run_dir, doc) if run.finished_at else {**doc, "files": None, "root_sha256": None}


def _baselines(plan: Plan) -> list[dict]:
    """The baselines a run's cases stand on (its ``plan``): worked out once, as the run begins (``open_run``), or for
    a run not begun by it (a test's) for its manifest."""
    return [row.to_dict() for row in plan_rows(plan)]


def _hardware(specs: Sequence[CaseSpec]) -> dict[str, dict]:
    """The hardware a run's cases (``specs``) were resolved for, as ``_baselines`` is worked out."""
    return hardware_record(specs, Host())


def execute_case(spec: CaseSpec, cases_dir: Path, expected: Expected | None = None,
                 gpus: Sequence[Gpu] = (), clock_from: float | None = None) -> CaseResult:
    """One papermill execution of the case's notebook in the case's kernel, bounded by its timeout.
    A verdict the notebook wrote counts only if it covers ``expected`` (what this case was asked).
    ``gpus``: the GPUs the case holds, the only ones its kernel sees. ``clock_from``: the ``time.monotonic()``
    at which the case's timeout started counting, when that was before this call (a Ray task's attempt is
    recorded, and its driver starts counting, before the task imports the executor)."""
    notebook = rundir.case_file(cases_dir, spec.name, rundir.CASE_NOTEBOOK)
    result_path = rundir.case_file(cases_dir, spec.name)
    started, t0, launched = now_iso(), time.perf_counter(), time.time()
    env = {contract.MODEL_DIGEST_CACHE_ENV: str(cases_dir.parent / rundir.MODEL_DIGESTS),
           contract.RESULT_PATH_ENV: str(result_path), **compilecache.cache_env(),
           # What the backend's libraries read once, when they load (an hf case's pinned kernels), must be in place
           # before the kernel imports anything.
           **registry.get(spec.backend).environment(spec.options)}
    outcome = run_notebook(spec.notebook, notebook, contract.case_parameters(spec.to_dict(), str(result_path)),
                           spec.kernel, _time_left(spec.timeout_s, clock_from),
                           rundir.kernel_log(cases_dir, spec.name),
                           log_prefix=str(cases_dir / spec.name),
                           env={**env, **(devices.gpu_env(gpus) if gpus else {})},
                           imports=registry.get(spec.backend).imports(spec.options))
    duration = time.perf_counter() - t0
    shown = paths.display(notebook)

    if outcome.timed_out:
        result = CaseResult(case=spec.name, backend=spec.backend, status=Status.TIMEOUT,
                            error_kind=outcomes.Outcome.TIMEOUT,
                            error=f"exceeded its timeout of {spec.timeout_s:g} s; its kernel was killed; "
                                  f"partial notebook {shown}")
    elif outcome.killed_by and not outcome.started:
        result = CaseResult(case=spec.name, backend=spec.backend, status=Status.ERROR,
                            error_kind=outcomes.Outcome.INTERRUPTED,
                            error="interrupted before its kernel started")
    elif outcome.killed_by:
        result = CaseResult(case=spec.name, backend=spec.backend, status=Status.ERROR,
                            error_kind=outcomes.Outcome.INTERRUPTED,
                            error=f"interrupted; its kernel was killed; partial notebook {shown}")
    elif outcome.error is None and (written := kernel_result(cases_dir, spec.name)) is not None:
        result = judged_again(written, spec, expected)
    elif outcome.kind == outcomes.Outcome.NO_BASELINE:  # the kernel found hardware the plan did not (kit.core.errors)
        result = CaseResult(case=spec.name, backend=spec.backend, status=Status.NO_BASELINE,
                            golden_kind=spec.golden_kind,
                            error=outcome.message, remedy=make_command(Path(spec.descriptor), spec.name),
                            options=dict(spec.options))
    else:
        error = outcome.error or "the notebook finished without writing its case result"
        result = CaseResult(case=spec.name, backend=spec.backend, status=Status.ERROR,
                            error_kind=outcome.kind or outcomes.Outcome.CASE_ERROR,
                            error=f"{error}; partial notebook {shown}")
    if result.status in (Status.ERROR, Status.TIMEOUT):
        result = verdict_written(result, cases_dir, launched, spec, expected)
    # What the executor alone knows of the case, added to what its kernel wrote.
    result = dataclasses.replace(
        result, log_tail=outcome.log_tail, notebook=str(notebook), started_at=result.started_at or started,
        finished_at=now_iso(), duration_s=duration, bound=result.bound if result.bound is not None else spec.bound,
        golden_kind=result.golden_kind or spec.golden_kind, devices=[g.record() for g in gpus],
        phases=with_executor_phases(result.phases, result.kernel_span, launched, time.time()))
    return saved(result, result_path)


def verdict_written(unfinished: CaseResult, cases_dir: Path, launched: float, spec: CaseSpec,
                    expected: Expected | None) -> CaseResult:
    """A failed verdict the case's kernel wrote in this attempt, kept whatever happened to its process afterwards:
    a numeric failure is the engine's answer, and reading it as a dead kernel would retry it until it passes. Its
    result carries what ended the process as a note. Anything else (no verdict written, an unreadable or earlier
    one, a pass followed by a crash) leaves ``unfinished`` as it is: a pass is only a pass when the notebook
    finished."""
    try:
        written = kernel_result(cases_dir, spec.name, written_since=launched - 1)
    except (OSError, ParityKitError, ValueError, KeyError, TypeError):  # damaged: the executor's account stands
        return unfinished
    if written is None or written.status != Status.FAILED:
        return unfinished
    judged = judged_again(written, spec, expected)
    if judged.status != Status.FAILED:
        return unfinished  # a verdict that does not cover the case claims nothing
    after = (f"after it wrote its verdict, the case ended with {unfinished.status}: {unfinished.error}; "
             "the verdict stands")
    return dataclasses.replace(judged, notes=[*judged.notes, after])


def judged_again(result: CaseResult, spec: CaseSpec, expected: Expected | None,
            here: Mapping[str, str] | None = None) -> CaseResult:
    """The notebook's result, judged again from its own numbers under the case's bounds, or an error saying
    what it does not cover (the notebook is code: it may write a verdict on fewer prompts, on another case's
    inputs, or one its numbers contradict). ``here``: the accelerator the case computed on, when a run recorded
    it (`parity-kit verify`); else this host's is asked."""
    problem = coverage_problem(result, expected) if expected is not None else None
    if problem is None:
        judged = rejudged(result, expected) if expected is not None else result
        judged = judged_by_hardware(judged, spec, here)
        return judged_by_power(judged, getattr(spec, "power", None), getattr(spec, "detectable_limit", None),
                               f"cases.{spec.name}.detectable_limit")
    return CaseResult(case=spec.name, backend=spec.backend, status=Status.ERROR, error=problem.text,
                      error_kind=outcomes.Outcome.CASE_ERROR, started_at=result.started_at, notes=result.notes)


def judged_by_hardware(result: CaseResult, spec: CaseSpec, here: Mapping[str, str] | None = None) -> CaseResult:
    """A failure under bounds measured on another class of hardware than this host's, judged by
    kit.core.verdict.borrowed: asked here, on the case's host, since only it knows what it computes on (``here``: the
    accelerator a run recorded for it instead)."""
    calibration = getattr(spec, "calibration", None)
    if result.status != Status.FAILED or not calibration:
        return result
    change = hardware_change(calibration, spec.options, here)
    if change is None:
        return result
    command = make_command(Path(spec.descriptor), spec.name)
    # A calibration launches the case once per sample it keeps; the backtest and the evidence gate add about two.
    variants = len((calibration.get("drift") or {}).get("samples") or ()) or 3
    expected_s = (variants + 2) * result.duration_s if result.duration_s else None
    return judged_under_borrowed_bounds(result, *change, command, expected_s)


def saved(result: CaseResult, path: Path) -> CaseResult:
    """``result`` written to ``path``; if it cannot be (a full disk, a read-only folder) the case ends as an
    error, and no result of an earlier write stays behind for a resume to take as this attempt's."""
    try:
        save_case_result(result, path)
        return result
    except OSError as exc:
        error = f"its result could not be written to {paths.display(path)}: {exc.strerror or exc}"
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)  # e.g. the kernel's own verdict, which this run no longer vouches for
    log.error(f"parity-kit: case {result.case}: {error}")
    joined = error if result.error is None else f"{result.error}; {error}"
    return dataclasses.replace(result, status=Status.ERROR, error=joined, error_kind=outcomes.Outcome.EXECUTOR)


def run_cases(progress: RunProgress, jobs: int | None = None,
              on_start: Callable[[str], None] | None = None,
              on_done: Callable[[str, CaseResult], None] | None = None,
              pool: DevicePool | None = None, cores: int | None = None) -> None:
    """Every pending case, side by side, each recorded in ``progress`` as it ends: at most ``jobs`` at once when
    given; otherwise the cases that ask for GPUs as many as the free GPUs allow, the others at most ``cores``
    (default: this machine's). ``pool`` holds the node's GPUs; runs executed together share one."""
    run, pending = progress.run, progress.pending
    if not pending:
        return
    pool = pool or DevicePool(run.gpus)
    asked = {s.name: gpus_asked(run.plan.cases[s.name]) for s in pending}
    if jobs:
        slots = dict.fromkeys((s.name for s in pending), Slots(max(1, jobs)))
    else:
        gpu_slots, cpu_slots = Slots(None), Slots(max(1, cores or os.cpu_count() or 1))
        slots = {s.name: gpu_slots if asked[s.name] else cpu_slots for s in pending}
    # Queued in the run's order before any case waits: the cases start in that order as room comes.
    requests = {s.name: pool.request(s.name, asked[s.name], slots[s.name]) for s in pending}
    with ThreadPoolExecutor(max_workers=len(pending)) as threads:  # each case waits for its turn in its thread
        futures = {threads.submit(execute_scheduled, spec, Scheduled(run.cases_dir, run.expected.get(spec.name),
                                                                     run.plan.cases[spec.name].resources.max_wait_s),
                                  pool, requests[spec.name], on_start): spec
                   for spec in pending}
        try:
            for fut in as_completed(futures):
                spec, result = futures[fut], fut.result()
                if result is None:  # the run was stopped before the case started
                    continue
                progress.results[spec.name] = result
                if on_done:
                    on_done(spec.name, result)
        except KeyboardInterrupt:
            for fut in futures:
                fut.cancel()
            stop_all()  # the running cases then end as errors, their partial notebooks kept; waiting ones never start
            for fut, spec in futures.items():  # their kernels are dead: each ends now, recorded
                if not fut.cancelled() and (ended := fut.result()) is not None:
                    progress.results[spec.name] = ended
            raise


class LocalExecutor(Executor):
    """Cases side by side on this machine, each in a thread holding its kernel; GPU cases get whole GPUs of
    their own from the node's (the session's ``Share.pool``, so runs executed together never share one)."""

    name = "local"

    def check(self, plan: Plan) -> Inventory | None:
        """Refuse what this machine cannot give the plan (several nodes, part of a GPU, more GPUs than it
        has); the node's GPUs where a case asks for some."""
        return check_local_resources(plan)

    def run_cases(self, progress: RunProgress, on_start: Callable[[str], None] | None = None,
                  on_done: Callable[[str, CaseResult], None] | None = None, share: Share | None = None) -> None:
        """Run the pending cases on this machine, side by side within the session's share of cases, cores and GPUs."""
        share = share or Share()
        run_cases(progress, share.jobs, on_start, on_done, share.pool, share.cores)


def gpus_asked(case: CasePlan) -> int:
    """How many whole GPUs a case asks for (a fraction of one refused where the local executor cannot give it)."""
    return devices.whole_gpus(case.resources.num_gpus, case.name, case.where.resources)


@dataclass(frozen=True)
class Scheduled:
    """What a scheduled case reads of its run, taken from the run's plan when it is queued: the folder of its files,
    what its verdict must cover, and how long it may wait for its GPUs."""

    cases_dir: Path
    expected: Expected | None
    max_wait_s: float | None


def execute_scheduled(spec: CaseSpec, at: Scheduled, pool: DevicePool, req: Request,
                      on_start: Callable[[str], None] | None) -> CaseResult | None:
    """The case once its GPUs and slot are free, holding them until it ends; None if the run was stopped
    while it waited. A case whose GPUs will not come ends as an error naming why."""
    try:
        gpus = pool.wait(req, stopping, at.max_wait_s)
    except WaitStopped:
        return None
    except Unavailable as exc:
        if on_start:
            on_start(spec.name)  # progress reports pair each end with a start
        result = CaseResult(case=spec.name, backend=spec.backend, status=Status.ERROR, error=f"cannot start: {exc}",
                            error_kind=outcomes.Outcome.EXECUTOR, finished_at=now_iso(), bound=spec.bound,
                            golden_kind=spec.golden_kind)
        return saved(result, rundir.case_file(at.cases_dir, spec.name))
    try:
        return execute_guarded(spec, at.cases_dir, on_start, at.expected, gpus)
    finally:
        pool.release(req)


def record(cases_dir: Path, result: CaseResult, expected: Expected | None = None) -> CaseResult:
    """Save an executor's own account of a case, unless the case already saved a finished result that
    covers ``expected`` (a worker lost after the notebook finished must not turn a verdict into an error)."""
    path = rundir.case_file(cases_dir, result.case)
    if path.is_file():
        try:
            done = kernel_result(cases_dir, result.case)
        except (OSError, ParityKitError, ValueError, TypeError):
            done = None
        if done is not None and done.status in (Status.PASSED, Status.FAILED) and (
                expected is None or coverage_problem(done, expected) is None):
            again = rejudged(done, expected) if expected is not None else done
            return done if again is done else saved(again, path)
    return saved(result, path)


def _time_left(timeout_s: float, clock_from: float | None) -> float:
    """What is left of a timeout that started counting at ``clock_from`` (never less than a second, so that
    the kernel is still started and killed, and its partial notebook kept, like any other timeout's)."""
    return timeout_s if clock_from is None else max(timeout_s - (time.monotonic() - clock_from), 1.0)


def execute_guarded(spec: CaseSpec, cases_dir: Path, on_start: Callable[[str], None] | None,
                    expected: Expected | None = None, gpus: Sequence[Gpu] = (),
                    clock_from: float | None = None) -> CaseResult:
    """A case executed so that nothing it raises costs the other cases theirs: a bug in the executor ends this
    case as an executor error, its traceback logged."""
    try:
        if on_start:
            on_start(spec.name)
        return execute_case(spec, cases_dir, expected, gpus, clock_from)
    except Exception as exc:  # a bug here must not cost the other cases their results
        log.error(traceback.format_exc().rstrip("\n"))  # the traceback alone, as print_exc writes it
        result = CaseResult(case=spec.name, backend=spec.backend, status=Status.ERROR,
                            error_kind=outcomes.Outcome.EXECUTOR,
                            error=f"executor failed: {describe_failure(exc)}")
        return saved(result, rundir.case_file(cases_dir, spec.name))


def write_manifest(run: GateRun, command: Sequence[str]) -> dict:
    """Write the run's manifest (its start, or its finish) into the run directory and return it."""
    doc = manifest(run, command)
    write_json(run.run_dir / rundir.MANIFEST, doc)
    return doc
