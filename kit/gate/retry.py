"""Triage every case of a gate run, and run again, once by default, the ones the job failed.

A case that died for a reason of the job (its kernel killed, its engine never healthy, a lost worker,
docs/triage.md) says nothing about parity: running it again is the cheapest way to get the verdict it
owes. Only ``infrastructure`` is retried: a numeric or near-tie failure is a verdict, and running it
until it passes would turn a regression into a pass. The retry happens after every case has run, through
whichever executor ran them (``execute`` below), so it costs a run nothing when nothing failed and needs
nothing of the executor. Nothing is overwritten: the earlier attempt's files move to
``cases/retried/<case>.<n>.*`` first, and the new result lists them under ``attempts``.

This is the one place a case is run again after it ended. The Ray executor's restart of a task whose worker
died happens before the case has ended, and by this rule: it restarts only a case that judged nothing, never
one whose lost attempt wrote a failed verdict (kit.gate.executors.ray_executor says how); its attempts stay in the
case's files, which a retry here moves with the attempt.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Callable, Mapping, Sequence

from kit.core.records import rundir
from kit.core.records.records import CaseResult
from kit.core.verdict.triage import TriageClass, classify
from kit.gate import resume
from kit.gate.executor import saved
from kit.gate.executors.interface import RunProgress

log = logging.getLogger(__name__)



def triage_run(progress: RunProgress) -> None:
    """Class every result of a run (kit.core.verdict.triage). The cases this run executed have their file written
    again with it; a result taken over from an earlier run (reused, kept) is classed in the reports only,
    its file left as that run wrote it."""
    run = progress.run
    executed = {s.name for s in run.specs} - set(run.reused) - set(run.kept)
    for name, result in list(progress.results.items()):
        found = classify(result, progress.results)
        triage = found.to_dict() if found is not None else None
        if triage == result.triage:
            continue
        result = dataclasses.replace(result, triage=triage)
        progress.results[name] = saved(result, rundir.case_file(run.cases_dir, name)) if name in executed else result


def due(results: Mapping[str, CaseResult], retries: int, ran: Sequence[str]) -> list[str]:
    """Of the cases ``ran`` (this round), those classed infrastructure that have a retry left (``retries``: how
    often a case may run again)."""
    out = []
    for name in ran:
        result = results.get(name)
        if result is None or (result.triage or {}).get("class") != TriageClass.INFRASTRUCTURE:
            continue
        if len(result.attempts) < retries:
            out.append(name)
    return out


def retry_infrastructure(runs: Sequence[RunProgress], execute: Callable[[Sequence[RunProgress]], None]) -> None:
    """Triage ``runs``, then, while some case is due a retry, set its files aside and ``execute`` those
    cases again (each run narrowed to them), recording every attempt."""
    ran = {id(p): [s.name for s in p.pending] for p in runs}
    for progress in runs:
        triage_run(progress)
    while True:
        retrying, attempts = [], {}
        for progress in runs:
            names = due(progress.results, progress.run.infrastructure_retries, ran[id(progress)])
            if names:
                attempts[id(progress)] = {name: _set_aside(progress, name) for name in names}
                progress.only = set(names)
                retrying.append(progress)
            ran[id(progress)] = names
        if not retrying:
            return
        try:
            execute(retrying)
        finally:
            for progress in retrying:
                progress.only = None
        for progress in retrying:
            for name, earlier in attempts[id(progress)].items():
                _carry_attempts(progress, name, earlier)
            triage_run(progress)


def _set_aside(progress: RunProgress, name: str) -> list[dict]:
    """Move the attempt's files aside and remember why; the case counts as missing until it runs again. Returns
    the case's attempts so far, this one last."""
    run = progress.run
    earlier = progress.results.pop(name)
    moved = resume.set_aside(run.cases_dir, name, rundir.RETRIED)
    attempt = {"attempt": len(earlier.attempts) + 1, "status": earlier.status, "error": earlier.error,
               "triage": earlier.triage, "files": [_relative(p, run.run_dir) for p in moved]}
    why = (earlier.triage or {}).get("evidence", "")
    progress.retried[name] = why
    log.info(f"  retry  {name}: {why}")
    return [*earlier.attempts, attempt]


def _carry_attempts(progress: RunProgress, name: str, attempts: list[dict]) -> None:
    """The new result of a retried case lists the attempts before it."""
    result: CaseResult | None = progress.results.get(name)
    if result is None:
        return
    note = f"attempt {len(attempts) + 1}: the earlier one was retried ({attempts[-1]['triage']['evidence']})" \
        if attempts and attempts[-1].get("triage") else f"attempt {len(attempts) + 1}"
    notes = result.notes if note in result.notes else [*result.notes, note]
    result = dataclasses.replace(result, attempts=attempts, notes=notes)
    progress.results[name] = saved(result, rundir.case_file(progress.run.cases_dir, name))


def _relative(path: Path, run_dir: Path) -> str:
    try:
        return path.relative_to(run_dir).as_posix()
    except ValueError:
        return str(path)
