"""`parity-kit gate`: one gate run end to end, in a gate session (kit.gate.session), with its JUnit XML, its
signature and its publication.

The lifecycle itself (claim, manifest, execution, interruption, finish) is the session's: a control runs two
gate runs side by side in one session, and every other command that checks something with a gate runs one.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Sequence

from rich.markup import escape

from kit.core.records.text import printable
from kit.gate.attest import sign_run
from kit.gate.executors.interface import GateRun
from kit.gate.executors.interface import DEFAULT
from kit.gate.junit import write_junit, written_when_interrupted
from kit.gate.session import gate_once
from kit.history.publish import check_target, publish_run
from kit.run import output
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)


def run_gate(descriptor: str | Path, out: str | Path | None = None, jobs: int | None = None,
             only: Sequence[str] | None = None, command: Sequence[str] | None = None,
             summary: bool = True, release: str | None = None,
             executor: str = DEFAULT, resume: str | Path | None = None, junit: str | Path | None = None,
             publish: str | None = None, infra_retries: int | None = None, signer=None) -> GateRun:
    """One gate run end to end; with ``junit``, its JUnit XML too (written from the run directory's results
    if the run is interrupted, and refused before anything runs if the path cannot be written); with ``publish``,
    the finished run copied to that store (refused before anything runs if the store cannot be used);
    ``infra_retries`` overrides the descriptor's [defaults] infrastructure_retries; with ``signer``
    (kit.run.signing.load_signer), the finished run's root digest signed (kit.gate.attest) before it is
    published."""
    output.ensure()
    command = list(command or sys.argv)
    if publish:
        check_target(publish)
    with written_when_interrupted(junit, [resume or out]):
        run = gate_once(descriptor, out, only, release, command, jobs, summary, executor, resume, infra_retries)
    if junit:
        write_junit(junit, [(run.plan.name, [s.name for s in run.specs], run.results, run.duration_s)])
    if signer is not None:
        sign_run(run.run_dir, signer)
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


