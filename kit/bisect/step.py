"""One probe of a bisect: build the state's wheels (or take them from the store), qualify them, run the
failing case on its failing prompts in the qualified kernel.

Wheels are cached by commit: a release in the store whose manifest's ``source_commit`` is the state's
commit is used as it is, whoever built it (the refresh that the bisect follows, an earlier bisect), so
no build runs twice. The build exports the commit's tree with ``git archive``: the fork's repository,
its branches and worktrees are left as they are.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import io
import subprocess
import tarfile
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Sequence

from kit import __version__
from kit.bisect.inputs import BisectInputs, State
from kit.core.records import paths, rundir
from kit.core.records.jsonio import read_json
from kit.core.records.records import Status
from kit.core.records.results import now_iso
from kit.descriptor.load import derive, load_descriptor
from kit.refresh import build, overlay, qualify, release, wheels
from kit.refresh.run import QUALIFY_NOTEBOOK
from kit.run.notebook import run_notebook

class Probe(StrEnum):
    """What probing one state of the range found: the word its step record keeps."""
    GOOD = "good"
    BAD = "bad"
    BUILD_FAILED = "build-failed"
    NOT_QUALIFIED = "not-qualified"
    ERROR = "error"
    CONFLICT = "conflict"  # upstream scope: the overlay does not apply onto the state's commit


@dataclass(frozen=True)
class StepRecord:
    """A finished probe. ``bad`` is None when the probe reached no verdict (the case errored): such a
    step is recorded but not counted, and a resumed bisect probes that state again."""

    index: int
    commit: str
    built_from: str
    subject: str
    verdict: str
    reason: str
    bad: bool | None
    failing_prompts: list[str] = field(default_factory=list)
    prompts_run: int = 0
    cached_build: bool = False
    paths: dict = field(default_factory=dict)  # step, build_log, manifest, qualify_notebook, case_run
    wall_s: float = 0.0
    timings_s: dict = field(default_factory=dict)  # build, qualify, case
    finished_at: str = ""

    def to_dict(self) -> dict:
        """One step's record as bisect.json keeps it."""
        return asdict(self)


def find_release(store: Path, commit: str) -> Path | None:
    """A release in ``store`` built from ``commit``, if any (the cache)."""
    for manifest in sorted(store.glob(f"*/{release.MANIFEST}")):
        try:
            if read_json(manifest).get("source_commit") == commit:
                return manifest
        except ValueError:
            continue
    return None


def build_state(inp: BisectInputs, state: State, step_dir: Path, template: Sequence[str] | None,
                day: _dt.date | None = None) -> tuple[Path | None, bool, str, dict]:
    """(manifest, cached, reason, paths): the state's release, from the store or built now."""
    cached = find_release(inp.store, state.built_from)
    if cached:
        return cached, True, f"wheels of {state.built_from[:12]} from the store ({cached.parent.name})", {}
    source = step_dir / "source"
    source.mkdir(parents=True)
    # overlay.git decodes its output as text; an archive is bytes.
    tar = subprocess.run(["git", "-C", str(inp.repo), "archive", "--format=tar", state.built_from],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(source, filter="data")
    day = day or _dt.datetime.now(_dt.timezone.utc).date()
    tag = release.release_tag(inp.fork, day, state.built_from)
    version = release.release_version(inp.fork, day, state.built_from)
    log = step_dir / "build.log"
    out = wheels.run_build(source, template or wheels.DEFAULT_BUILD_COMMAND, step_dir / "wheels", log, version)
    found = sorted((step_dir / "wheels").glob("*.whl"))
    where = {"build_log": str(log)}
    if out.returncode != 0 or not found:
        why = f"exited {out.returncode}" if out.returncode else "wrote no wheel"
        return None, False, f"the wheel build {why} (log {log}): {build._telling_line(out.log_tail)}", where
    base = inp.states[0].built_from
    doc = {"kind": "release", "tag": tag, "version": version, "fork": inp.fork, "fork_repo": str(inp.repo),
           "branch": None, "source_commit": state.built_from, "base_commit": base,
           "upstream_ref": inp.base_label,
           "overlay": ([{"sha": c[0], "subject": c[1]} for c in inp.overlay] if inp.scope == "upstream"
                       else [s.to_dict() for s in inp.states[1:state.index + 1]]),
           "made_by": "bisect", "wheels": [wheels.wheel_line(w) for w in found], "build_command": out.command,
           "kit_version": __version__, "created_at": now_iso()}
    manifest = release.write_release(inp.store, tag, doc, found)
    return manifest, False, f"{len(found)} wheel(s) built as {tag} in {out.duration_s:.1f} s", where


def probe(inp: BisectInputs, state: State, case: str, prompts: list[str] | None, step_dir: Path,
          template: Sequence[str] | None, qualify_timeout_s: float = 1800) -> StepRecord:
    """Build, qualify and run ``case`` (only ``prompts``, when given) at ``state``."""
    t0 = time.perf_counter()
    step_dir.mkdir(parents=True)
    rec = StepRecord(state.index, state.commit, state.built_from, state.subject, Probe.ERROR, "", None,
                     paths={"step": str(step_dir)})

    def done(verdict: Probe, reason: str, bad: bool | None) -> StepRecord:
        return dataclasses.replace(rec, verdict=verdict, reason=reason, bad=bad, wall_s=time.perf_counter() - t0,
                                   finished_at=now_iso())

    if not state.built_from:  # an upstream commit: the overlay replayed onto it first
        replayed = overlay.replay_overlay(inp.repo, [overlay.Commit(*c) for c in inp.overlay], state.commit,
                                          step_dir / "replay", branch=None)
        rec.paths["replay"] = str(replayed.worktree)
        if replayed.conflict:
            c = replayed.conflict
            return done(Probe.CONFLICT, f"overlay commit {c['sha'][:12]} \"{c['subject']}\" does not apply onto "
                                  f"{state.commit[:12]}: conflict in {', '.join(c['files']) or 'no file listed'}", True)
        state = dataclasses.replace(state, built_from=replayed.tip)
        rec = dataclasses.replace(rec, built_from=replayed.tip)
    manifest, cached, why, where = build_state(inp, state, step_dir / "build", template)
    rec = dataclasses.replace(rec, cached_build=cached)
    rec.paths.update(where)
    if manifest is None:
        return done(Probe.BUILD_FAILED, why, True)  # a state that cannot be built cannot pass parity
    rec.paths["manifest"] = str(manifest)

    t1 = time.perf_counter()
    rec.timings_s["build"] = t1 - t0
    qdir, qnb = step_dir / "qualify", step_dir / "qualify.ipynb"
    params = {"manifest": str(manifest), "descriptor": str(inp.descriptor), "current": inp.current,
              "backend": inp.backend, "case": case, "bucket": None, "step_dir": str(qdir), "parity_case": False}
    outcome = run_notebook(QUALIFY_NOTEBOOK, qnb, params, paths.MAIN_KERNEL, qualify_timeout_s,
                           rundir.kernel_log(step_dir, "qualify"))
    rec.paths["qualify_notebook"] = str(qnb)
    if not (qdir / qualify.RECORD).is_file():
        what = "timed out" if outcome.timed_out else outcome.error
        return done(Probe.ERROR, f"the qualify notebook did not finish: {what}", None)
    q = qualify.load_qualify(qdir)
    rec.timings_s["qualify"] = time.perf_counter() - t1
    # Qualification here stops short of its own parity case: the case below, on the failing prompts,
    # is this probe's parity check.
    if not q.qualified:
        return done(Probe.NOT_QUALIFIED, f"qualification failed: {q.reason}", True)

    desc = load_descriptor(inp.descriptor)
    doc = read_json(manifest)
    doc["_path"] = str(manifest)
    backend, candidate = qualify.candidate_release(desc, inp.current, inp.backend, doc, q.kernel)
    derived = derive(desc, {doc["tag"]: candidate}, {case: {"prompts": prompts}} if prompts else None)
    qualify.use_jupyter_path(q.jupyter_path)
    t2 = time.perf_counter()
    verdict, run_dir, result = _run_case(derived, doc["tag"], case, step_dir / "case")
    rec.timings_s["case"] = time.perf_counter() - t2
    rec.paths["case_run"] = str(run_dir)
    if result is None or result.status not in (Status.PASSED, Status.FAILED):
        why = (result.error if result is not None else None) or f"the case run ended {verdict}"
        return done(Probe.ERROR, f"{case} did not finish at {state.built_from[:12]}: {why}", None)
    rec = dataclasses.replace(rec, prompts_run=len(result.prompts),
                              failing_prompts=[p.id for p in result.prompts if not p.passed])
    if result.status == "passed":
        return done(Probe.GOOD, f"{case} passes on {rec.prompts_run} prompt(s)", False)
    n_bad = len(rec.failing_prompts)
    return done(Probe.BAD, f"{case} fails on {n_bad} of {rec.prompts_run} prompt(s)", True)


def _run_case(desc, release_name: str, case: str, out: Path):
    from kit.gate.executor import RunRequest
    from kit.gate.session import gate_once

    command = ["parity-kit", "gate", str(desc.path), "--release", release_name, "--case", case]
    run = gate_once(RunRequest(desc, out, [case], release_name), command, jobs=1, summary=False)
    return run.verdict, run.run_dir, run.results.get(case)
