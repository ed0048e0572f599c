"""One gate run end to end: validate, execute every case, write the artifacts."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kit import report
from kit.descriptor import load_descriptor
from kit.execute import LOCAL, RAY, GateRun, prepare_run, run_cases, write_manifest
from kit.records import ERROR, FAILED, PASSED, TIMEOUT, CaseResult
from kit.results import counts_sentence, now_iso
from kit.spec import CaseSpec

STATUS_STYLE = {PASSED: "green", FAILED: "red", ERROR: "magenta", TIMEOUT: "yellow"}


def run_gate(descriptor: str | Path, out: str | Path | None = None, jobs: int | None = None,
             only: Sequence[str] | None = None, command: Sequence[str] | None = None,
             console: Console | None = None, summary: bool = True, executor: str = LOCAL,
             resume: str | Path | None = None) -> GateRun:
    console = console or Console(stderr=True, soft_wrap=True)
    desc = load_descriptor(descriptor)
    command = list(command or sys.argv)
    run = prepare_run(desc, out, only, resume_dir=resume, command=command, executor=executor)
    try:
        return _run_locked(run, command, console, jobs, summary)
    finally:
        run.lock.release()  # the OS drops it anyway if this process dies first


def _run_locked(run: GateRun, command: list[str], console: Console, jobs: int | None, summary: bool) -> GateRun:
    desc = run.descriptor
    run.started_at = now_iso()
    write_manifest(run, command)
    console.print(f"gate [bold]{desc.name}[/]: {len(run.specs)} cases -> {run.run_dir}"
                  + (f" (executor {run.executor})" if run.executor != LOCAL else ""))
    for name, result in run.reused.items():
        console.print(f"  reused {name}: {result.status} at {result.finished_at}, inputs unchanged")
    for name, why in run.rerun.items():
        console.print(f"  rerun  {name}: {why}")

    t0 = time.perf_counter()
    running: list[str] = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("cases", total=len(run.pending))

        def started(spec: CaseSpec) -> None:
            running.append(spec.name)
            progress.update(task, description=f"running {', '.join(running)}")

        def done(spec: CaseSpec, result: CaseResult) -> None:
            running.remove(spec.name)
            progress.update(task, advance=1, description=f"running {', '.join(running)}" if running else "cases")
            console.print(_case_line(result))

        if run.executor == RAY:
            from kit.ray_executor import run_cases_ray

            run_cases_ray(run, on_start=started, on_done=done, console=console)
        else:
            run_cases(run, jobs=jobs, on_start=started, on_done=done)
    run.duration_s = time.perf_counter() - t0
    run.finished_at = now_iso()
    finished = write_manifest(run, command)

    names = [s.name for s in run.specs]
    report.write_result(run.run_dir, report.result_document(desc.name, run.verdict, run.counts, run.duration_s,
                                                            names, run.results))
    report.write_evidence(run.run_dir, report.evidence_markdown(finished, run.verdict, run.counts,
                                                                run.duration_s, run.results))
    if summary:
        error = report.build_summary(run.run_dir)
        if error:  # the verdict and every case result are already on disk
            console.print(f"[red]summary notebook failed[/]: {error}; see {run.run_dir / 'summary.ipynb'}")
    style = "green" if run.verdict == PASSED else "red"
    sentence = counts_sentence(run.counts, run.duration_s)
    artifact = run.run_dir / ("summary.html" if summary else "result.json")
    console.print(f"[{style}]gate {run.verdict}[/]: {sentence} -> {artifact}")
    return run


def _case_line(r: CaseResult) -> str:
    style = STATUS_STYLE.get(r.status, "white")
    dur = f"{r.duration_s:.1f} s" if r.duration_s is not None else ""
    if r.status in (ERROR, TIMEOUT):
        detail = r.error
    else:
        err = r.max_probability_error
        counts = r.counts()
        detail = f"{counts['failed']}/{counts['prompts']} prompts failed"
        detail += f", max error {err:.3g}" if err is not None else ""
    return f"  [{style}]{r.status:>7}[/] {r.case} ({r.backend}) {dur}  {detail}"

