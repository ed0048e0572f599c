"""`parity-kit refresh`: build, qualify, then the control of the new release against today's pin.

A refresh directory keeps every step's executed notebook: ``build.ipynb`` (with
``build/``: the replay worktree, range-diff, build log), ``qualify.ipynb`` (with
``qualify/``: the layered venv, its kernel, the short parity case), ``control/``
(a control directory: both gate runs and the diagnosis), then ``refresh.json``,
``next-steps.sh`` and ``summary.ipynb``/``summary.html`` covering all of it.

The diagnosis is authoritative: a release that built and qualified is still not
qualified when the control says otherwise. Nothing remote is touched; the
commands a person runs next are printed and written down.
"""

from __future__ import annotations

import logging
import shlex
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Sequence

# Reasons carry build-log lines and paths: as markup, "[/tmp/x]" raises and "[end of output]" vanishes.
from rich.markup import escape

from kit import __version__
from kit.control.run import ControlRequest, build_control_notebook, run_control
from kit.core.records import paths, rundir
from kit.core.verdict.diagnosis import DIAGNOSIS_EXIT_CODES, ControlVerdict
from kit.core.exitcodes import ExitCode
from kit.core.records.jsonio import read_json, write_json
from kit.core.records.results import now_iso
from kit.descriptor.load import derive, load_descriptor
from kit.descriptor.plan import resolve
from kit.gate import report
from kit.refresh import build, qualify
from kit.run import lifecycle, output
from kit.run.notebook import run_notebook
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

BUILD_NOTEBOOK = paths.NOTEBOOKS / "build.ipynb"
QUALIFY_NOTEBOOK = paths.NOTEBOOKS / "qualify.ipynb"
EXIT_BUILD, EXIT_NOT_QUALIFIED = ExitCode.BUILD_STOPPED, ExitCode.NOT_QUALIFIED


class RefreshStop(StrEnum):
    """Where a refresh stopped before its control could judge the release: its build, or its qualification. A
    refresh's verdict is one of these or the control's (``ControlVerdict``: ``INCOMPLETE`` too where a step's
    notebook did not finish)."""
    BUILD_STOPPED = "build-stopped"
    NOT_QUALIFIED = "qualification-failed"


@dataclass(frozen=True)
class RefreshRun:
    run_dir: Path
    verdict: RefreshStop | ControlVerdict
    reason: str
    exit_code: int
    next_steps: list[str]


def default_refresh_dir(name: str) -> Path:
    """Where a refresh of ``name`` goes when no --out is given: a new folder under runs/."""
    return rundir.new_run_dir("refresh", name)


@dataclass(frozen=True)
class RefreshRequest:
    """`parity-kit refresh` as asked: the descriptor, the fork's repository and the upstream ref to replay its
    overlay onto, and the options of its build, qualification and control (as `parity-kit refresh --help` words
    them)."""

    descriptor: str | Path
    fork_repo: str | Path
    upstream_ref: str
    base: str | None = None
    tip: str | None = None
    fork: str | None = None
    out: str | Path | None = None
    store: str | Path | None = None
    current: str = "current"
    backend: str | None = None
    only: Sequence[str] | None = None
    qualify_case: str | None = None
    qualify_bucket: int | None = None
    build_command: Sequence[str] | None = None
    branch: str = build.overlay.REPLAY_BRANCH
    jobs: int | None = None
    build_timeout_s: float = 3600
    qualify_timeout_s: float = 1800
    command: Sequence[str] | None = None


def run_refresh(request: RefreshRequest) -> RefreshRun:
    """Replay the fork's overlay onto ``upstream_ref`` and build its wheels, qualify them (verify, install,
    import, one parity case in a fresh kernel), then run the control of today's pin (``current``) against the
    release just built, each step a notebook kept in the refresh directory. Whatever a later step would refuse
    (the cases, the qualify case) is refused before the build, which may take an hour; a step that stops the
    refresh (a conflict, a failed qualification, a notebook that did not finish) ends it there, with its own
    verdict and the commands a person runs next. The control's diagnosis has the last word: a release that
    built and qualified is still not qualified when the control says otherwise."""
    descriptor, fork_repo, upstream_ref = request.descriptor, request.fork_repo, request.upstream_ref
    base, tip, fork, out, store = request.base, request.tip, request.fork, request.out, request.store
    current, backend, only, qualify_case = request.current, request.backend, request.only, request.qualify_case
    qualify_bucket, build_command, branch = request.qualify_bucket, request.build_command, request.branch
    jobs, build_timeout_s, qualify_timeout_s = request.jobs, request.build_timeout_s, request.qualify_timeout_s
    command = request.command
    output.ensure()
    desc = load_descriptor(descriptor)
    # Whatever the later steps would refuse is refused now, before a build that may take an hour.
    resolve(desc, only)
    qualify.pick_case(desc, qualify.pick_backend(desc, current, backend), qualify_case, qualify_bucket)
    inputs = build.resolve_inputs(fork_repo, upstream_ref, base, tip, fork)
    run_dir = lifecycle.claim(out or default_refresh_dir(desc.name), "refresh directory", "refresh", command)
    store = Path(store).resolve() if store else (run_dir.parent / "releases").resolve()
    command = list(command or ["parity-kit", "refresh", str(descriptor)])
    started = now_iso()
    timings: dict[str, float] = {}  # seconds per step, written with the record
    record: dict[str, object] = {
        "kind": "refresh", "name": desc.name, "descriptor": str(desc.path), "inputs": inputs.to_dict(),
        "store": str(store), "current": current, "command": command, "kit_version": __version__,
        "started_at": started, "timings_s": timings}
    log.log(NOTICE, f"refresh [bold]{escape(desc.name)}[/]: fork {escape(str(inputs.repo))} "
                    f"({inputs.base[:12]}..{inputs.tip[:12]}) onto {escape(upstream_ref)} ({inputs.upstream[:12]}) "
                    f"-> {escape(str(run_dir))}", extra=MARKUP)

    def stopped(outcome: str) -> None:
        """A refresh stopped (or failed) before its verdict still leaves its record, saying so."""
        if outcome != lifecycle.Ended.FINISHED and "finished_at" not in record:
            record.update(verdict=ControlVerdict.INCOMPLETE, reason=f"the refresh {outcome} before it finished",
                          next_steps=[], exit_code=DIAGNOSIS_EXIT_CODES[ControlVerdict.INCOMPLETE],
                          finished_at=now_iso())
            write_json(run_dir / rundir.REFRESH, record)

    with lifecycle.owned(run_dir, command, "refresh", stopped):
        # 1. build
        log.log(NOTICE, f"[bold][1/4] build[/]: replaying the overlay on {escape(branch)}, building wheels",
                extra=MARKUP)
        params: dict[str, object] = {
            "fork_repo": str(inputs.repo), "upstream_ref": upstream_ref, "base": inputs.base, "tip": inputs.tip,
            "fork": inputs.fork, "build_command": list(build_command) if build_command else None,
            "branch": branch, "step_dir": str(run_dir / "build"), "store": str(store)}
        error = _step(BUILD_NOTEBOOK, run_dir, "build", params, build_timeout_s, timings)
        if not (run_dir / "build" / build.RECORD).is_file():
            return _unfinished(run_dir, record, "build", error)
        built = build.load_build(run_dir / "build")
        style = "green" if built.built else "red"
        log.log(NOTICE, f"  [{style}]{built.status}[/]: {escape(built.reason)} ({timings['build']:.1f} s)",
                extra=MARKUP)
        if not built.built:
            return _finish(run_dir, record, RefreshStop.BUILD_STOPPED, f"build {built.status}: {built.reason}",
                           EXIT_BUILD, _conflict_steps(built))

        # 2. qualify
        log.log(NOTICE, f"[bold][2/4] qualify[/]: {built.tag}: verify, install, import, one parity case", extra=MARKUP)
        params = {"manifest": built.manifest, "descriptor": str(desc.path), "current": current, "backend": backend,
                  "case": qualify_case, "bucket": qualify_bucket, "step_dir": str(run_dir / "qualify")}
        error = _step(QUALIFY_NOTEBOOK, run_dir, "qualify", params, qualify_timeout_s, timings)
        if not (run_dir / "qualify" / qualify.RECORD).is_file():
            return _unfinished(run_dir, record, "qualify", error)
        q = qualify.load_qualify(run_dir / "qualify")
        style = "green" if q.qualified else "red"
        log.log(NOTICE, f"  [{style}]{'qualified' if q.qualified else 'not qualified'}[/]: {escape(q.reason)} "
                        f"({timings['qualify']:.1f} s)", extra=MARKUP)
        if not q.qualified:
            return _finish(run_dir, record, RefreshStop.NOT_QUALIFIED,
                           f"qualification of {built.tag} failed: {q.reason}",
                           EXIT_NOT_QUALIFIED, [])

        # 3. control: today's pin against the release just built, in the kernel qualification registered
        log.log(NOTICE, f"[bold][3/4] control[/]: {current} against {built.tag}", extra=MARKUP)
        t0 = time.perf_counter()
        manifest = read_json(built.manifest)
        manifest["_path"] = built.manifest
        backend, release = qualify.candidate_release(desc, current, backend, manifest, q.kernel)
        qualify.use_jupyter_path(q.jupyter_path)
        control = run_control(ControlRequest(derive(desc, {built.tag: release}), out=run_dir / "control", jobs=jobs,
                                             only=only, current=current, candidate=built.tag, command=command,
                                             summary=False))
        notebook = build_control_notebook(control.control_dir)
        if notebook.error:  # the control's diagnosis is on disk; the refresh's summary is built again below
            log.error(report.summary_failure(control.control_dir, notebook.error))
        timings["control"] = time.perf_counter() - t0
        d = control.diagnosis
        qualified = d.verdict == ControlVerdict.QUALIFIED
        next_steps = _publish_steps(built, run_dir, desc.path, current, backend, q) if qualified else []
        return _finish(run_dir, record, d.verdict, d.reason, d.exit_code, next_steps)


def _step(notebook: Path, run_dir: Path, name: str, params: dict, timeout_s: float,
          timings: dict[str, float]) -> str | None:
    """Run the refresh's step ``name`` (``<name>.ipynb`` and its kernel log in ``run_dir``), its seconds kept in
    ``timings``; what went wrong, or None."""
    t0 = time.perf_counter()
    outcome = run_notebook(notebook, run_dir / f"{name}.ipynb", params, paths.MAIN_KERNEL, timeout_s,
                           rundir.kernel_log(run_dir, name))
    timings[name] = time.perf_counter() - t0
    if outcome.timed_out:
        return f"timed out after {timeout_s:g} s"
    return outcome.error


def _unfinished(run_dir: Path, record: dict, name: str, error: str | None) -> RefreshRun:
    """The refresh ended incomplete because step ``name``'s notebook wrote no record."""
    return _finish(run_dir, record, ControlVerdict.INCOMPLETE, f"the {name} notebook did not finish: {error}; "
                   f"partial notebook {run_dir / f'{name}.ipynb'}", DIAGNOSIS_EXIT_CODES[ControlVerdict.INCOMPLETE], [])


def _finish(run_dir: Path, record: dict, verdict: RefreshStop | ControlVerdict, reason: str, code: int,
            next_steps: list[str]) -> RefreshRun:
    record.update(verdict=verdict, reason=reason, exit_code=code, next_steps=next_steps, finished_at=now_iso())
    write_json(run_dir / rundir.REFRESH, record)
    if next_steps:
        (run_dir / "next-steps.sh").write_text("# Run by a person, after reading summary.html.\n"
                                               + "\n".join(next_steps) + "\n")
    log.log(NOTICE, "[bold][4/4] summary[/]", extra=MARKUP)
    built = report.build_summary(run_dir)
    if built.error:  # refresh.json and every step's record are already on disk, and stand
        log.error(report.summary_failure(run_dir, built.error))
    style = "green" if verdict == ControlVerdict.QUALIFIED else "red"
    page = built.html or run_dir / rundir.REFRESH
    log.log(NOTICE, f"[{style}]refresh {verdict}[/]: {escape(reason)} -> {escape(str(page))}", extra=MARKUP)
    if next_steps:
        log.log(NOTICE, "next, by hand (nothing was pushed, tagged or opened):", extra=MARKUP)
        for line in next_steps:
            log.log(NOTICE, f"  {line}")
    return RefreshRun(run_dir, verdict, reason, code, next_steps)


def _publish_steps(built: build.BuildOutcome, run_dir: Path, descriptor: Path, current: str, backend: str,
                   q: qualify.QualifyOutcome) -> list[str]:
    repo = shlex.quote(built.inputs["repo"])
    branch = built.replay["branch"]
    sha = built.replay["tip"]
    evidence = shlex.quote(str(run_dir / "control" / rundir.EVIDENCE))
    wheels = ", ".join(f'"{w["file"]}" = "{w["sha256"]}"' for w in built.wheels)
    return [
        f"git -C {repo} push origin {branch}",
        f"git -C {repo} tag -a {built.tag} {sha} -m {shlex.quote(f'{built.tag}: {built.version}')}",
        f"git -C {repo} push origin {built.tag}",
        f"# pin PR: in {descriptor}, [releases.{current}.backends.{backend}] becomes",
        f'#   version = "{built.version}", source_commit = "{sha}", wheels = {{ {wheels} }}',
        f"#   and kernel = the environment holding those wheels (qualified here as {q.kernel})",
        f"gh pr create --title {shlex.quote(f'Pin {built.tag}')} --body-file {evidence}",
    ]


def _conflict_steps(built: build.BuildOutcome) -> list[str]:
    c = built.replay.get("conflict")
    if not c:
        return []
    wt = shlex.quote(built.replay["worktree"])
    return [f"# {built.replay['branch']} stops before {c['sha'][:12]}; resolve it there by hand:",
            f"git -C {wt} cherry-pick {c['sha']}   # fix {', '.join(c['files'])}, then git cherry-pick --continue",
            "# then cherry-pick the overlay commits after it and build from that branch"]
