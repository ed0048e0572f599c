"""`parity-kit control`: the gate against today's pin and against the candidate, then the diagnosis.

A control directory holds one gate run per release (``<release>/``, each a
normal run directory), ``control.json``, ``diagnosis.json``, ``evidence.md``,
the executed ``control.ipynb`` and the ``summary.ipynb``/``summary.html`` that
cover both runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rich.markup import escape

from kit import __version__
from kit.core.records import paths, rundir
from kit.core.verdict.diagnosis import ControlVerdict, Diagnosis, diagnose
from kit.core.errors import BadInput
from kit.core.records.jsonio import write_json
from kit.core.records.results import now_iso, read_run
from kit.core.records.text import printable
from kit.descriptor.load import LoadedDescriptor, load_descriptor
from kit.descriptor.plan import Plan, outline
from kit.gate import report
from kit.gate.executor import RunRequest, check_run
from kit.gate.executors.interface import GateRun
from kit.gate.junit import write_junit, written_when_interrupted
from kit.gate.run import publish_finished
from kit.gate.session import GateSession
from kit.history.publish import check_target
from kit.run import lifecycle, output
from kit.run.notebook import Rendered, run_and_render
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

CONTROL_NOTEBOOK = paths.NOTEBOOKS / rundir.CONTROL_NOTEBOOK


@dataclass(frozen=True)
class ControlRun:
    control_dir: Path
    current: GateRun
    candidate: GateRun
    diagnosis: Diagnosis


def default_control_dir(desc: LoadedDescriptor) -> Path:
    """Where a control of ``desc`` goes when no --out is given: a new folder under runs/."""
    return rundir.new_run_dir("control", desc.name)


@dataclass(frozen=True)
class ControlRequest:
    """`parity-kit control` as asked: the descriptor (a path, or loaded), the control directory (``out``), the cases
    at once (``jobs``) and the cases (``only``), the two releases compared (``current``, ``candidate``), the command
    the manifests record, whether to build the summaries, and the finished control's JUnit XML (``junit``) and store
    to publish it to (``publish``)."""

    descriptor: str | Path | LoadedDescriptor
    out: str | Path | None = None
    jobs: int | None = None
    only: Sequence[str] | None = None
    current: str = "current"
    candidate: str = "candidate"
    command: Sequence[str] | None = None
    summary: bool = True
    junit: str | Path | None = None
    publish: str | None = None


def run_control(request: ControlRequest) -> ControlRun:
    """Both gate runs and the diagnosis; with ``junit``, their JUnit XML too, one testsuite per release (written
    from the run directories if the control is interrupted, and refused before anything runs if the path cannot
    be written); with ``publish``, the finished control directory, both runs in it, copied to that store."""
    descriptor, out, jobs, only, current = request.descriptor, request.out, request.jobs, request.only, request.current
    candidate, command, summary, junit = request.candidate, request.command, request.summary, request.junit
    publish = request.publish
    for flag, name in (("--current", current), ("--candidate", candidate)):
        # Each release's run is the folder <control>/<release>: a name that is not plain would put it elsewhere.
        paths.check_plain_name(name, f"{flag}: release")
    if publish:
        check_target(publish)  # before two runs, not after them
    sides = [Path(out) / side for side in (current, candidate)] if out else []
    with written_when_interrupted(junit, sides, per_release=True):
        run = _run_control(descriptor, out, jobs, only, current, candidate, command, summary)
    if junit:
        write_junit(junit, [(f"{r.plan.name}.{r.release}", [s.name for s in r.specs], r.results, r.duration_s)
                            for r in (run.current, run.candidate)])
    publish_finished(run.control_dir, publish)
    return run


def _run_control(descriptor: str | Path | LoadedDescriptor, out: str | Path | None, jobs: int | None,
                 only: Sequence[str] | None, current: str, candidate: str, command: Sequence[str] | None,
                 summary: bool) -> ControlRun:
    output.ensure()
    # A refresh passes a descriptor it derived in memory, with the release it just built.
    desc = descriptor if isinstance(descriptor, LoadedDescriptor) else load_descriptor(descriptor)
    if current == candidate:
        raise BadInput(f"control needs two releases; both sides name {current!r}")
    stated = outline(desc)
    for name in (current, candidate):
        stated.release(name)  # an unknown release is refused before anything is created
    command = list(command or ["parity-kit", "control", str(desc.path if desc is descriptor else descriptor)])
    with lifecycle.ending():  # SIGTERM, SIGHUP and SIGINT (even if inherited as ignored) stop both runs cleanly
        # Both releases' preflights first: a refusal leaves no directory behind to block the corrected retry.
        checked = {name: check_run(desc, only, release=name) for name in (current, candidate)}
        control_dir = lifecycle.claim(out or default_control_dir(desc), "control directory", "control run", command)
        # Held until its records are written: a second control into the folder is refused naming this one.
        with lifecycle.locked(control_dir, command, "control run"):
            log.log(NOTICE, f"control [bold]{desc.name}[/]: today's pin [bold]{current}[/] against "
                            f"candidate [bold]{candidate}[/] -> {control_dir}", extra=MARKUP)
            started = now_iso()
            with GateSession(command, jobs) as session:  # both runs side by side; a stop finishes both as stopped
                for name, pre in checked.items():
                    session.start(RunRequest(pre, control_dir / name, None, name))
                session.execute()
                runs = session.finish(summary=False)
            return finish_control(checked[current].plan, control_dir, runs, command, started, summary)


def finish_control(plan: Plan, control_dir: Path, runs: list[GateRun], command: Sequence[str],
                   started: str, summary: bool) -> ControlRun:
    """The diagnosis of both finished runs, the control's records and (unless asked not to) its notebooks."""
    views = [read_run(run.run_dir) for run in runs]
    diagnosis = diagnose(*views)
    doc = control_manifest(plan, runs, command, started)
    write_json(control_dir / rundir.CONTROL, doc)
    write_json(control_dir / rundir.DIAGNOSIS, diagnosis.to_dict())
    report.write_evidence(control_dir, report.control_evidence(doc, diagnosis, views))
    page = build_notebooks(control_dir).html if summary else None
    for line in diagnosis.case_lines:  # each case's paired effect, then the verdict as the last word
        log.info(f"  {printable(line)}")
    style = "green" if diagnosis.verdict == ControlVerdict.QUALIFIED else "red"
    artifact = page or control_dir / rundir.EVIDENCE
    log.log(NOTICE, f"[{style}]control {diagnosis.verdict}[/]: {escape(diagnosis.reason)} -> {escape(str(artifact))}",
            extra=MARKUP)
    return ControlRun(control_dir.resolve(), runs[0], runs[1], diagnosis)


def control_manifest(plan: Plan, runs: Sequence[GateRun], command: Sequence[str], started: str) -> dict:
    """The control directory's record of what ran (control.json): the descriptor, both runs and their releases,
    the command and when it started."""
    return {
        "kind": "control",
        "name": plan.name,
        "descriptor": str(plan.path),
        "descriptor_sha256": plan.sha256,
        "current": runs[0].release,
        "candidate": runs[1].release,
        "runs": {run.release: run.run_dir.name for run in runs},
        "kit_version": __version__,
        "command": list(command),
        "started_at": started,
        "finished_at": now_iso(),
    }


def is_control_dir(path: str | Path) -> bool:
    """Whether ``path`` is a control directory (it holds control.json)."""
    return (Path(path) / rundir.CONTROL).is_file()


def build_notebooks(control_dir: Path) -> Rendered:
    """The control notebook and the summary with its page, and one logged line if anything failed, naming it and
    how to build it later: the diagnosis and both runs are on disk by now, and no failure here may change them or
    the exit code."""
    control, summary = build_control_notebook(control_dir), report.build_summary(control_dir)
    error = "; ".join(e for e in (control.error, summary.error) if e) or None
    if error:
        log.error(report.summary_failure(control_dir, error))
    return Rendered(error, summary.html)


def build_control_notebook(control_dir: Path, kernel: str = paths.MAIN_KERNEL, timeout_s: float = 300) -> Rendered:
    """The executed control notebook (no HTML of its own: the summary covers the control); a failure is its one
    line, never an exception."""
    return run_and_render(CONTROL_NOTEBOOK, control_dir / rundir.CONTROL_NOTEBOOK, {"control_dir": str(control_dir)},
                          timeout_s, rundir.kernel_log(control_dir, "control"), kernel, html=False)
