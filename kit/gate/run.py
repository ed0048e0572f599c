"""`parity-kit gate`: one gate run end to end, in a gate session (kit.gate.session), with its JUnit XML, its
signature and its publication.

The lifecycle itself (claim, manifest, execution, interruption, finish) is the session's: a control runs two
gate runs side by side in one session, and every other command that checks something with a gate runs one.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rich.markup import escape

from kit.core.records.text import printable
from kit.gate.attest import sign_run
from kit.gate.executor import RunRequest
from kit.gate.executors.interface import GateRun
from kit.gate.junit import write_junit, written_when_interrupted
from kit.gate.session import gate_once
from kit.history.publish import check_target, publish_run
from kit.run import output
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GateRequest:
    """`parity-kit gate` as asked: the run (``run``: its descriptor, folder, cases, release, executor, resume and
    retries), the command its manifest records (empty: this process's arguments), the cases at once (``jobs``),
    whether to build the summary, and what to do with the finished run: its JUnit XML (``junit``), a store to
    publish it to (``publish``), a signer of its root digest (``signer``: kit.run.signing.load_signer)."""

    run: RunRequest
    command: Sequence[str] | None = None
    jobs: int | None = None
    summary: bool = True
    junit: str | Path | None = None
    publish: str | None = None
    signer: Any = None


def run_gate(request: GateRequest) -> GateRun:
    """One gate run end to end; with ``junit``, its JUnit XML too (written from the run directory's results
    if the run is interrupted, and refused before anything runs if the path cannot be written); with ``publish``,
    the finished run copied to that store (refused before anything runs if the store cannot be used); with
    ``signer``, the finished run's root digest signed (kit.gate.attest) before it is published."""
    output.ensure()
    command = list(request.command or sys.argv)
    junit, publish = request.junit, request.publish
    if publish:
        check_target(publish)
    with written_when_interrupted(junit, [request.run.resume or request.run.out]):
        run = gate_once(request.run, command, request.jobs, request.summary)
    if junit:
        write_junit(junit, [(run.plan.name, [s.name for s in run.specs], run.results, run.duration_s)])
    if request.signer is not None:
        sign_run(run.run_dir, request.signer)
    publish_finished(run.run_dir, publish)
    return run


def publish_finished(local_dir: Path, url: str | None) -> None:
    """Copy a finished run (or control) directory to ``url``. A failure is one error line and a note in the
    run's published.json, never an exception: the run and its verdict (and exit code) are what they were."""
    if not url:
        return
    done = publish_run(local_dir, url)
    if done.error:
        log.error(f"[red]not published[/]: {escape(printable(done.error))}; the run stays in {escape(str(local_dir))} "
                  f"(again: parity-kit publish {escape(str(local_dir))} {escape(url)})", extra=MARKUP)
    else:
        log.log(NOTICE, f"published {done.files} files -> {escape(done.url)}", extra=MARKUP)


