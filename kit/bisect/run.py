"""`parity-kit bisect`: which overlay commit first breaks a case that the tip fails.

A bisect directory holds ``bisect.json`` (the inputs, every state, every finished step), one folder per
step under ``steps/`` (its build log when it built, ``qualify.ipynb`` with ``qualify/``, and ``case/``:
the gate run of the failing case, with the case's notebook), ``evidence.md`` and ``summary.md``
(kit.bisect.summary), both written when the bisect finishes or stops.

``bisect.json`` is rewritten after every step, so a bisect stopped half way (a kill, a lost machine,
``--max-steps``) loses no finished step: ``--resume DIR`` continues from it. A step that was cut short
left a folder but no record; its state is probed again in a folder of its own.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rich.markup import escape

from kit import __version__
from kit.bisect import search, step
from kit.bisect.search import INCOMPLETE
from kit.bisect.inputs import BisectInputs, State, from_fork, from_refresh, from_upstream
from kit.bisect.record import load_bisect_record
from kit.bisect.summary import summary_markdown
from kit.core.records import paths, rundir
from kit.core.errors import BadInput
from kit.core.exitcodes import ExitCode
from kit.core.records.jsonio import write_json
from kit.core.records.results import now_iso
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import outline
from kit.refresh import qualify
from kit.run import lifecycle, output
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

RECORD = rundir.BISECT
SUMMARY, EVIDENCE = rundir.SUMMARY_MARKDOWN, rundir.EVIDENCE
LOCK_WHAT = "bisect"  # how the lock's refusal names the run holding the folder
EXIT = {search.Answer.FIRST_BAD: ExitCode.FAILED, search.Answer.FAILS_AT_BASE: ExitCode.BLOCKER,
        search.Answer.PASSES_AT_TIP: ExitCode.PASSED, INCOMPLETE: ExitCode.INCOMPLETE}


@dataclass
class BisectRun:
    run_dir: Path
    verdict: str
    reason: str
    exit_code: int
    first_bad: dict | None


def default_bisect_dir(name: str) -> Path:
    """Where a bisect of ``name`` goes when no --out is given: a new folder under runs/."""
    return rundir.new_run_dir("bisect", name)


@dataclass(frozen=True)
class BisectRequest:
    """`parity-kit bisect` as asked: the case to bisect on, and where its range comes from: a refresh directory (its
    overlay, or with ``upstream`` its upstream range), or a fork's repository with its base and tip; the release
    store, today's pin (``current``), the backend, the build command, the bisect directory (``out``) and the command
    its record keeps."""

    case: str
    refresh_dir: str | Path | None = None
    descriptor: str | Path | None = None
    fork_repo: str | Path | None = None
    base: str | None = None
    tip: str | None = None
    fork: str | None = None
    store: str | Path | None = None
    current: str = "current"
    backend: str | None = None
    build_command: Sequence[str] | None = None
    out: str | Path | None = None
    command: Sequence[str] | None = None
    upstream: bool = False


def start_bisect(request: BisectRequest) -> tuple[Path, dict]:
    """Check the inputs, claim the bisect directory and write its first record. ``upstream``: search the
    refresh's upstream range (the overlay replayed onto each commit) instead of its overlay."""
    case, refresh_dir, descriptor, fork_repo = request.case, request.refresh_dir, request.descriptor, request.fork_repo
    base, tip, fork, store, current = request.base, request.tip, request.fork, request.store, request.current
    backend, build_command, out, command = request.backend, request.build_command, request.out, request.command
    upstream = request.upstream
    if upstream and not refresh_dir:
        raise BadInput("bisect --upstream needs a refresh directory: the range is its old base..new upstream")
    if refresh_dir and fork_repo:
        raise BadInput("bisect takes a refresh directory or --fork-repo with --base, not both")
    if refresh_dir:
        inp = (from_upstream if upstream else from_refresh)(refresh_dir, store)
        # The refresh records its pin; the backend it built is said again here when the pin has several.
        inp = dataclasses.replace(inp, backend=backend)
    elif fork_repo:
        if not base:
            raise BadInput("bisect --fork-repo needs --base: the commit the overlay starts from")
        inp = from_fork(descriptor or paths.EMBEDDED_DESCRIPTOR, fork_repo, base, tip, fork, store, current, backend)
    else:
        raise BadInput("bisect needs a refresh directory (REFRESH_DIR) or --fork-repo and --base")
    stated = outline(load_descriptor(inp.descriptor))
    backend_name = qualify.pick_backend(stated, inp.current, inp.backend)
    if case not in stated.cases:
        raise BadInput(stated.no_case(case))
    if stated.cases[case].backend != backend_name:
        raise BadInput(f"case {case} runs the {stated.cases[case].backend} backend, not {backend_name}, the one "
                       "the fork builds; bisect a case of that backend")
    run_dir = _claim(Path(out or default_bisect_dir(stated.name)), command)
    if not store and not refresh_dir:  # beside the bisect directory, as a refresh keeps its releases
        inp = dataclasses.replace(inp, store=(run_dir.parent / "releases").resolve())
    record = {"kind": "bisect", "name": stated.name, "case": case, "inputs": inp.to_dict(),
              "build_command": list(build_command) if build_command else None,
              "command": list(command or ["parity-kit", "bisect"]), "kit_version": __version__,
              "started_at": now_iso(), "failing_prompts": None, "steps": [], "verdict": INCOMPLETE,
              "reason": "not finished", "exit_code": int(ExitCode.INCOMPLETE), "first_bad": None}
    with lifecycle.owned(run_dir, command, LOCK_WHAT):
        if (run_dir / RECORD).exists():  # another bisect claimed the folder between the check and the lock
            raise BadInput(f"bisect directory {paths.display(run_dir)} was claimed by another bisect; choose "
                           "another --out")
        write_json(run_dir / RECORD, record)
    return run_dir, record


def _claim(folder: Path, command: Sequence[str] | None) -> Path:
    """A fresh bisect directory; one a bisect is running in is refused naming that bisect, not only as full."""
    return lifecycle.claim(folder, "bisect directory", LOCK_WHAT, command)


def resume(run_dir: str | Path) -> tuple[Path, dict]:
    """A stopped bisect's folder and record, refused in one line when it is finished or its record is damaged."""
    folder = Path(run_dir)
    if not (folder / RECORD).is_file():
        raise BadInput(f"{paths.display(folder)} has no {RECORD}: not a bisect directory")
    return folder.resolve(), _unfinished(folder)


def _unfinished(folder: Path) -> dict:
    record = load_bisect_record(folder)
    if record["verdict"] != INCOMPLETE:
        raise BadInput(f"bisect {paths.display(folder)} is finished ({record['verdict']}: {record['reason']}); "
                       "nothing to resume")
    return record


def read_record(run_dir: str | Path) -> dict:
    """A bisect directory's record (bisect.json), checked: what `--resume`, the summary and `report` read."""
    return load_bisect_record(run_dir)


def run_bisect(run_dir: Path, record: dict, max_steps: int | None = None) -> BisectRun:
    """Probe the overlay's states (build, qualify, run the failing case) in the order the search asks, until it
    names the first commit that breaks the case or ``max_steps`` new steps ran. bisect.json is rewritten after
    every step, so a bisect stopped half way resumes without probing a finished state again; a step that reaches
    no verdict ends the bisect as incomplete, with its resume command, rather than guessing good or bad.

    One bisect at a time holds the folder (kit.run.runlock): a second, started or resumed while this one runs,
    is refused in one line naming it, since two would probe states side by side and each rewrite bisect.json
    without the other's steps."""
    output.ensure()
    if max_steps is not None and max_steps < 1:
        raise BadInput(f"--max-steps {max_steps}: a bisect step count is at least 1")
    # No finish of its own to record: bisect.json says "not finished" until the search ends, so a stopped bisect
    # reads as one to resume.
    with lifecycle.owned(run_dir, None, LOCK_WHAT):
        if _unfinished(run_dir) != record:  # it moved on after it was read, and before the lock was ours
            raise BadInput(f"{paths.display(run_dir / RECORD)} changed since it was read (another bisect ran in "
                           f"the folder); run parity-kit bisect --resume {run_dir} again")
        return _search(run_dir, record, max_steps)


def _search(run_dir: Path, record: dict, max_steps: int | None) -> BisectRun:
    inp = BisectInputs.from_dict(record["inputs"])
    case = record["case"]
    bad = {s["index"]: s["bad"] for s in record["steps"] if s["bad"] is not None}
    done_before = len(bad)
    log.log(NOTICE, f"bisect [bold]{escape(case)}[/] over {inp.n} {inp.scope} commit(s) of {escape(str(inp.repo))} "
                    f"(at most {search.most_probes(inp.n)} steps; {done_before} done) -> {escape(str(run_dir))}",
            extra=MARKUP)
    new = 0
    while (c := search.next_state(inp.n, bad)).kind == search.Answer.UNFINISHED:
        if max_steps is not None and new >= max_steps:
            return _finish(run_dir, record, inp, INCOMPLETE,
                           f"stopped after {new} new step(s) (--max-steps); resume with "
                           f"parity-kit bisect --resume {run_dir}")
        state = inp.states[c.index]
        prompts = record["failing_prompts"] if c.index != inp.n else None
        label = "tip" if c.index == inp.n else "base" if c.index == 0 else f"{c.index}/{inp.n}"
        log.log(NOTICE, f"[bold]step {len(bad) + 1}[/] ({label}): {escape(state.commit[:12])} "
                        f"{escape(state.subject)}"
                        + (f", {len(prompts)} failing prompt(s)" if prompts else ", all prompts"), extra=MARKUP)
        rec = step.probe(inp, state, case, prompts, _step_dir(run_dir, state), record.get("build_command"))
        record["steps"].append(rec.to_dict())
        new += 1
        style = "yellow" if rec.bad is None else "green" if rec.verdict == step.Probe.GOOD else "red"
        log.log(NOTICE, f"  [{style}]{rec.verdict}[/]: {escape(rec.reason)} ({rec.wall_s:.1f} s"
                        f"{', cached wheels' if rec.cached_build else ''})", extra=MARKUP)
        if rec.bad is None:
            return _finish(run_dir, record, inp, INCOMPLETE,
                           f"step at {state.commit[:12]} reached no verdict: {rec.reason}; resume with "
                           f"parity-kit bisect --resume {run_dir}")
        if c.index == inp.n and rec.bad:
            record["failing_prompts"] = rec.failing_prompts
        bad[c.index] = rec.bad
        write_json(run_dir / RECORD, record)
    return _finish(run_dir, record, inp, c.kind, _reason(c, inp, case, record))


def _reason(c: search.Conclusion, inp: BisectInputs, case: str, record: dict) -> str:
    s = inp.states[c.index]
    if inp.scope == "upstream":
        if c.kind == search.Answer.FAILS_AT_BASE:
            return (f"no upstream commit is bad: case {case} fails with {inp.base_label} as well: the fault is "
                    "in the overlay or the pin (bisect the overlay)")
        if c.kind == search.Answer.FIRST_BAD:
            return f"first bad upstream commit: {s.commit} {s.subject}"
    if c.kind == search.Answer.PASSES_AT_TIP:
        return f"case {case} passes at the tip {s.built_from[:12]} ({s.subject}): nothing to bisect"
    if c.kind == search.Answer.FAILS_AT_BASE:
        n = len(record["failing_prompts"] or [])
        return (f"no overlay commit is bad: case {case} fails at the base, {inp.base_label}, on the tip's "
                f"{n} failing prompt(s): the fault is upstream or in the pin")
    return f"first bad commit: {s.commit} {s.subject}"


def _finish(run_dir: Path, record: dict, inp: BisectInputs, verdict: str, reason: str) -> BisectRun:
    first_bad = None
    if verdict == search.Answer.FIRST_BAD:
        index = search.next_state(inp.n, {s["index"]: s["bad"] for s in record["steps"]
                                          if s["bad"] is not None}).index
        first_bad = inp.states[index].to_dict()
    code = int(EXIT[verdict])
    record.update(verdict=verdict, reason=reason, exit_code=code, first_bad=first_bad, finished_at=now_iso(),
                  wall_s=sum(s["wall_s"] for s in record["steps"]))
    write_json(run_dir / RECORD, record)
    (run_dir / EVIDENCE).write_text(evidence_markdown(record))
    (run_dir / SUMMARY).write_text(summary_markdown(read_record(run_dir)))  # the record as written, as a reader sees it
    styles: dict[str, str] = {search.Answer.FIRST_BAD: "red", search.Answer.PASSES_AT_TIP: "green"}
    style = styles.get(verdict, "yellow")
    log.log(NOTICE, f"[{style}]bisect {verdict}[/]: {escape(reason)}", extra=MARKUP)
    return BisectRun(run_dir, verdict, reason, code, first_bad)


def evidence_markdown(record: dict) -> str:
    """A paragraph for an issue comment: the answer in its first line, then how it was reached."""
    inp = record["inputs"]
    head = {search.Answer.FIRST_BAD: record["reason"],
            search.Answer.FAILS_AT_BASE: f"no bad {inp.get('scope', 'overlay')} commit",
            search.Answer.PASSES_AT_TIP: "nothing to bisect", INCOMPLETE: "bisect incomplete"}[record["verdict"]]
    lines = [f"# Bisect {record['name']}, case {record['case']}: {head}", "", record["reason"] + ".", "",
             f"Fork `{inp['fork']}` ({inp['repo']}): {len(inp['states']) - 1} {inp.get('scope', 'overlay')} "
             "commit(s) over "
             f"{inp['base_label']}; {len(record['steps'])} step(s), {record.get('wall_s', 0):.0f} s.", ""]
    lines += [f"- `{s['commit'][:12]}` {s['subject']}: **{s['verdict']}** ({s['reason']})" for s in record["steps"]]
    return "\n".join(lines) + "\n"


def _step_dir(run_dir: Path, state: State) -> Path:
    """A fresh folder for the step: one left by an interrupted attempt is kept, never written over."""
    stem = run_dir / "steps" / f"{state.index:02d}-{(state.built_from or state.commit)[:12]}"
    folder, attempt = stem, 1
    while folder.exists():
        attempt += 1
        folder = stem.with_name(f"{stem.name}-attempt{attempt}")
    return folder
