"""One gate session: the lifecycle of one or more gate runs, from claim to finish, written out once.

Every command that runs a gate (``gate``, ``control``, ``baseline make``, ``golden regen``, a bisect step, a
refresh's qualification) runs it through ``GateSession``:

    with GateSession(command, jobs) as session:
        run = session.start(RunRequest(source, out, only, release))  # claim and lock the run directory,
        session.execute()                                                # write the manifest's start; every case
        [run] = session.finish(summary=False)                            # manifest end, result.json, evidence

A run is a frozen record (``GateRun``): ``start`` gives the run as it started, ``finish`` the runs as they
finished, with their results. While the cases run, what they add is collected in each run's ``RunProgress``,
which the session holds, so that a stopped session finishes each run with every result recorded so far.

A session may hold several runs (a control's two releases): they execute side by side, sharing the cores and
handing the node's GPUs to one case at a time. Leaving the session, however it is left, releases every run's
lock; left by an interruption (Ctrl-C, or SIGTERM/SIGHUP turned into ``Stopped`` by kit.run.stopping, which the
session installs for its duration), every run not yet finished first gets what a stopped run can still write
quickly (``finish_interrupted``); left by an error, the runs are left as they are, their locks released.
``gate_once`` is the whole lifecycle of one run, for commands that check something with a gate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Mapping, Sequence

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kit.core.records import rundir
from kit.core.verdict.decode import failed_prompts
from kit.core.noise.power import headline
from kit.core.records.progress import progress_path
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import Verdict, counts_sentence, error_parts, now_iso
from kit.core.records.text import printable
from kit.descriptor.load import load_descriptor
from kit.gate import report, trend
from kit.gate.executor import RunRequest, open_run, write_manifest
from kit.gate.executors.interface import DEFAULT, GateRun, RunProgress, Share
from kit.gate.heartbeat import Heartbeat, heartbeat_interval
from kit.gate.retry import retry_infrastructure
from kit.run import lifecycle, output
from kit.run.devices import DevicePool
from kit.run.notebook import Rendered, stop_all
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)



class GateSession:
    """Gate runs from claim to finish (see the module's docstring). ``command`` is what each run's manifest
    records; ``jobs`` the cases at once, shared between the runs."""

    def __init__(self, command: Sequence[str], jobs: int | None = None) -> None:
        self.command = list(command)
        self.jobs = jobs
        self.progress: list[RunProgress] = []  # per run started, what running has added to it so far
        self._finished: set[int] = set()  # id() of each run's progress whose finish completed
        self._signals: contextlib.ExitStack | None = None

    def __enter__(self) -> "GateSession":
        self._signals = contextlib.ExitStack()
        # SIGTERM, SIGHUP and SIGINT stop the runs cleanly; a stopped session records what its runs can still write
        self._signals.enter_context(lifecycle.ending(self._ended))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if self._signals is not None:
                self._signals.__exit__(exc_type, exc, tb)
                self._signals = None
        finally:
            for run in self.runs:
                if run.lock is not None:
                    run.lock.release()  # the OS drops it anyway if this process dies first

    def _ended(self, outcome: str) -> None:
        """How the session ended: a stopped one gives every run not yet finished what a stopped run can still write
        quickly; one left by an error leaves its runs as they are."""
        if outcome == lifecycle.Ended.STOPPED:
            finish_interrupted(self.unfinished, self.command)

    @property
    def runs(self) -> list[GateRun]:
        """The session's runs, as they started."""
        return [progress.run for progress in self.progress]

    @property
    def unfinished(self) -> list[RunProgress]:
        """The progress of the session's runs not yet finished: what an interrupted session still has to record."""
        return [progress for progress in self.progress if id(progress) not in self._finished]

    def start(self, request: RunRequest) -> GateRun:
        """One more run: its descriptor (a path, or one loaded) resolved and checked, or its plan's preflight
        already done (``Checked``); its run directory claimed and locked, its manifest's start written
        (``start_gate``)."""
        run = start_gate(request, self.command)
        self.progress.append(RunProgress(run))
        return run

    def execute(self) -> None:
        """Every case of every run started, side by side (``execute_gates``)."""
        execute_gates(self.progress, self.jobs)

    def finish(self, summary: bool = True, with_trend: bool = True) -> list[GateRun]:
        """Each unfinished run's manifest end, result.json, evidence.md and (with ``summary``) its summary
        (``finish_gate``); the runs it finished, as they finished, in the order they started."""
        done = []
        for progress in self.unfinished:
            run = progress.finished()
            finish_gate(run, self.command, summary, with_trend)
            self._finished.add(id(progress))
            done.append(run)
        return done


def gate_once(request: RunRequest, command: Sequence[str], jobs: int | None = None,
              summary: bool = True) -> GateRun:
    """One gate run's whole lifecycle in a session of its own: the finished run (its verdict, its results)."""
    with GateSession(command, jobs) as session:
        session.start(request)
        session.execute()
        [run] = session.finish(summary=summary)
    return run


STATUS_STYLE: dict[str, str] = {Status.PASSED: "green", Status.FAILED: "red", Status.ERROR: "magenta",
                                 Status.TIMEOUT: "yellow", Status.NO_BASELINE: "cyan", Status.INCONCLUSIVE: "yellow",
                                 Status.BORROWED: "yellow"}


def start_gate(request: RunRequest, command: Sequence[str]) -> GateRun:
    """Load, resolve and check a descriptor (or take a plan whose preflight is done: ``Checked``), claim and
    lock the run directory, write the manifest's start (``open_run``). ``GateSession.start`` is its one caller:
    the session releases ``run.lock`` when it is left, the run finished, failed or stopped."""
    if isinstance(request.source, (str, Path)):  # the one place a gate reads its descriptor by its path
        request = dataclasses.replace(request, source=load_descriptor(request.source))
    run = open_run(request, command)
    release = request.release
    against = f" against release [bold]{release}[/]" if release else ""
    on = f" (executor {run.executor.name})" if run.executor.name != DEFAULT else ""
    log.info(f"gate [bold]{run.plan.name}[/]{against}: {len(run.specs)} cases -> {run.run_dir}{on}", extra=MARKUP)
    for name, result in run.reused.items():
        log.info(f"  reused {name}: {result.status} at {result.finished_at}, inputs unchanged", extra=MARKUP)
    for name, why in run.rerun.items():
        log.info(f"  rerun  {name}: {why}", extra=MARKUP)
    for name, why in run.kept.items():
        log.info(f"  kept   {name}: {why}", extra=MARKUP)
    return run


def execute_gates(runs: Sequence[RunProgress], jobs: int | None) -> None:
    """Every case of every run, the runs side by side with the cores (or ``jobs``) shared between them
    and the node's GPUs handed to one case at a time, whichever run it belongs to; then every case classed
    (kit.core.verdict.triage), and those the job failed run again (kit.gate.retry)."""
    _execute(runs, jobs)
    retry_infrastructure(runs, lambda again: _execute(again, jobs))


def _execute(runs: Sequence[RunProgress], jobs: int | None) -> None:
    import os

    share = Share(jobs=max(1, jobs // len(runs)) if jobs else None, cores=max(1, (os.cpu_count() or 1) // len(runs)),
                  pool=DevicePool(next((p.run.gpus for p in runs if p.run.gpus is not None), None)))
    # A case's label names its run's release where several runs share the console.
    label = (lambda release, name: f"{release}/{name}") if len(runs) > 1 else (lambda release, name: name)
    running: list[str] = []
    lock = threading.Lock()
    console = output.console()  # the progress bar shares it with the log lines, which go above the bar
    beat = ci_heartbeat(console)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar, \
            (beat or contextlib.nullcontext()):
        task = bar.add_task("cases", total=sum(len(r.pending) for r in runs))

        def show() -> None:
            bar.update(task, description=f"running {', '.join(running)}" if running else "cases")

        def one(progress: RunProgress) -> None:
            run = progress.run

            def started(name: str) -> None:
                with lock:
                    running.append(label(run.release, name))
                    show()
                    if beat:  # the executor's log prefix for the case is cases/<case>
                        beat.start(label(run.release, name), progress_path(run.cases_dir / name))

            def done(name: str, result: CaseResult) -> None:
                with lock:
                    running.remove(label(run.release, name))
                    bar.update(task, advance=1)
                    show()
                    if beat:
                        beat.finish(label(run.release, name))
                    log.info(case_line(result, label(run.release, name)), extra=MARKUP)

            t0 = time.perf_counter()
            try:
                run.executor.run_cases(progress, started, done, share)
            finally:  # an interrupted run still says how long it ran (a retry's time adds to the first round's)
                progress.duration_s += time.perf_counter() - t0
                progress.finished_at = now_iso()

        if len(runs) == 1:
            one(runs[0])
            return
        threads = [threading.Thread(target=one, args=(p,), name=f"gate-{p.run.release}") for p in runs]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except KeyboardInterrupt:  # it reaches the main thread only: stop the kernels the other threads run
            stop_all()
            for t in threads:
                t.join()  # each records its running cases as interrupted; its queued ones start no kernel
            raise


def ci_heartbeat(console) -> Heartbeat | None:
    """Heartbeat and bucket lines where no terminal shows the progress bar (a CI log); none under -q."""
    if console.is_terminal or not output.shows(logging.INFO):
        return None
    return Heartbeat(log.info, heartbeat_interval(), verbose=output.shows(logging.DEBUG))


def finish_gate(run: GateRun, command: Sequence[str], summary: bool = True, with_trend: bool = True) -> None:
    """The manifest's end, result.json, evidence.md (with any step up in a case's error this run completed, unless
    ``with_trend`` is off) and (unless asked not to) the summary and its HTML."""
    finished = write_manifest(run, command)
    report.write_gate_result(run.run_dir, finished, run.verdict, run.counts, run.duration_s,
                             [s.name for s in run.specs], run.results)
    said = trend.record_steps(run.run_dir, run.plan.name, run.verdict == Verdict.PASSED, read_history=with_trend)
    if said:
        log.log(NOTICE, f"[yellow]{escape(said)}[/]", extra=MARKUP)
    report.write_gate_evidence(run.run_dir, finished, run.verdict, run.counts, run.duration_s, run.results, said)
    page = summary_or_line(run.run_dir).html if summary else None
    for line in triage_lines([s.name for s in run.specs], run.results):
        log.info(line, extra=MARKUP)
    style = "green" if run.verdict == Verdict.PASSED else "red"
    sentence = counts_sentence(run.counts, run.duration_s)
    if run.retried:
        sentence += f" ({len(run.retried)} retried after an infrastructure failure: {', '.join(run.retried)})"
    artifact = page or run.run_dir / rundir.RESULT
    who = f" ({run.release})" if run.release else ""
    log.log(NOTICE, f"[{style}]gate{escape(who)} {run.verdict}[/]: {sentence} -> {escape(str(artifact))}",
               extra=MARKUP)
    if run.lock is not None:
        run.lock.release()  # finished: another run may resume this directory now


def summary_or_line(run_dir: Path) -> Rendered:
    """The run's summary and its page, and one logged line if anything failed, saying what and how to build it
    later: the verdict and every case result are on disk by now, and the summary is a view of them that must not
    change them, nor the exit code."""
    built = report.build_summary(run_dir)
    if built.error:
        log.error(report.summary_failure(run_dir, built.error))
    return built


def finish_interrupted(runs: Sequence[RunProgress], command: Sequence[str]) -> None:
    """What a stopped run can still write quickly: each run's manifest end, result.json and evidence.md
    (its interrupted cases recorded as errors, its unstarted ones missing). No summary: that starts a
    kernel, and a CI runner that sent SIGTERM kills the job for good a few seconds later."""
    for progress in runs:
        if not progress.finished_at:  # stopped before its cases ran
            progress.finished_at = now_iso()
        run = progress.finished()
        try:
            finish_gate(run, command, summary=False, with_trend=False)
            if not (run.run_dir / rundir.SUMMARY_PENDING).exists():  # else stopped in the summary, as it says
                report.owe_summary(run.run_dir, "it was stopped before its summary was built")
        except Exception as exc:  # the interruption is what gets reported; this is what was lost
            log.error(f"[red]could not write the results of the interrupted run[/] {run.run_dir}: {exc}",
                         extra=MARKUP)


def triage_lines(cases: Sequence[str], results: Mapping[str, CaseResult]) -> list[str]:
    """One console line per case of ``cases`` (in their order) that did not pass: its class and the evidence
    (kit.core.verdict.triage)."""
    lines = []
    for name in cases:
        r = results.get(name)
        if r is None or not r.triage:
            continue
        again = f" (attempt {len(r.attempts) + 1})" if r.attempts else ""
        lines.append(f"  triage {escape(name)}{again}: {escape(printable(r.triage.get('evidence', '')))}")
    return lines


def case_line(r: CaseResult, label: str | None = None) -> str:
    """A finished case's line on the console, styled by its status: its error or its failed prompts, and how long
    it took."""
    style = STATUS_STYLE.get(r.status, "white")
    dur = f"{r.duration_s:.1f} s" if r.duration_s is not None else ""
    if r.status in (Status.ERROR, Status.TIMEOUT, Status.NO_BASELINE, Status.INCONCLUSIVE, Status.BORROWED):
        detail = escape(printable(str(r.error)))  # it may name a prompt: text from the world, not markup
    else:
        detail = f"{len(failed_prompts(r))}/{r.counts()['prompts']} prompts failed"  # a decode step's failure too
        detail += "".join(f", {part}" for part in error_parts(r))
        detail += f"; {headline(r.detectable)}" if r.detectable else ""
    on = f" on GPU {','.join(str(d.get('index')) for d in r.devices)}" if r.devices else ""
    return f"  [{style}]{r.status:>7}[/] {label or r.case} ({r.backend}){on} {dur}  {detail}"
