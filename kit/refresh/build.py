"""The build step: replay the fork's overlay onto a newer upstream, build wheels, write the release.

``build_release`` is what ``notebooks/build.ipynb`` calls. It writes ``build.json``
in its step folder in every outcome (built, conflict, build failure, existing
release), so the refresh that ran the notebook reads one record whatever happened.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Sequence

from kit import __version__
from kit.core.records import paths, rundir
from kit.core.records.jsonio import read_json, write_json
from kit.core.records.results import now_iso
from kit.refresh import overlay, release, wheels

class Built(StrEnum):
    """How building a release ended: the word its record keeps."""
    BUILT = "built"
    CONFLICT = "conflict"
    BUILD_FAILED = "build-failed"
    EXISTS = "exists"
RECORD = "build.json"


@dataclass(frozen=True)
class BuildInputs:
    """The refs resolved to commits, so every later step names exact commits."""

    repo: Path
    fork: str
    upstream_ref: str
    upstream: str
    base: str
    tip: str

    def to_dict(self) -> dict:
        """The inputs as the build's record keeps them, paths as text."""
        return {k: str(v) for k, v in asdict(self).items()}


def resolve_inputs(fork_repo: str | Path, upstream_ref: str, base: str | None = None, tip: str | None = None,
                   fork: str | None = None) -> BuildInputs:
    """What a refresh builds, every ref resolved to its commit: the fork's tip, the new upstream and the old base
    (by default where the tip meets it); a ref that is not a commit is refused in one line."""
    repo = overlay.check_repo(fork_repo)
    upstream = overlay.resolve_commit(repo, upstream_ref, "upstream ref")
    tip_sha = overlay.resolve_commit(repo, tip or "HEAD", "fork tip")
    if base:
        base_sha = overlay.resolve_commit(repo, base, "old upstream base")
    else:
        base_sha = overlay.default_base(repo, tip_sha, upstream)
    name = fork or repo.name
    release.fork_slug(name)  # refuse an unusable fork name before anything runs
    return BuildInputs(repo, name, upstream_ref, upstream, base_sha, tip_sha)


@dataclass(frozen=True)
class BuildOutcome:
    status: str
    reason: str
    inputs: dict
    overlay: list[dict]
    upstream_moved: int
    replay: dict
    tag: str = ""
    version: str = ""
    manifest: str = ""
    wheels: list[dict] = field(default_factory=list)
    range_diff: str = ""
    build_log: str = ""
    build_command: list[str] = field(default_factory=list)
    timings_s: dict = field(default_factory=dict)

    @property
    def built(self) -> bool:
        """Whether the build produced the release's wheels."""
        return self.status == Built.BUILT

    def to_dict(self) -> dict:
        """The outcome as the build step's record keeps it."""
        return asdict(self)


@dataclass(frozen=True)
class BuildRequest:
    """A release to build: the fork's repository, the upstream ref its overlay is replayed onto, the step's folder
    (None: a fresh build folder under runs/) and the release store (None: runs/releases), the overlay's base, tip
    and fork, the build command, the replay branch, and the day the release is named for (None: today)."""

    fork_repo: str | Path
    upstream_ref: str
    step_dir: str | Path | None
    store: str | Path | None
    base: str | None = None
    tip: str | None = None
    fork: str | None = None
    build_command: Sequence[str] | None = None
    branch: str = overlay.REPLAY_BRANCH
    today: _dt.date | None = None


def build_release(request: BuildRequest) -> BuildOutcome:
    """The release built (``step_dir`` None: a fresh ``build-<time>`` folder; ``store`` None: ``releases/``, both
    under the project's runs/, as `parity-kit refresh` puts them; never the folder a notebook's kernel runs in)."""
    fork_repo, upstream_ref, step_dir, store = request.fork_repo, request.upstream_ref, request.step_dir, request.store
    base, tip, fork, build_command = request.base, request.tip, request.fork, request.build_command
    branch, today = request.branch, request.today
    step_dir = Path(step_dir or rundir.new_run_dir("build", "", str(paths.runs_root()))).resolve()
    store = Path(store or paths.runs_root() / "releases").resolve()
    step_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    inp = resolve_inputs(fork_repo, upstream_ref, base, tip, fork)
    commits = overlay.overlay_commits(inp.repo, inp.base, inp.tip)
    moved = overlay.count_commits(inp.repo, inp.base, inp.upstream)
    replay = overlay.replay_overlay(inp.repo, commits, inp.upstream, step_dir / branch, branch)
    timings["replay"] = time.perf_counter() - t0
    outcome = BuildOutcome("", "", inp.to_dict(), [{"sha": c.sha, "subject": c.subject} for c in commits],
                           moved, replay.to_dict(), timings_s=timings)

    if replay.conflict:
        c = replay.conflict
        files = ", ".join(c["files"]) or "no file listed"
        outcome = replace(outcome, status=Built.CONFLICT, reason=(
                          f"overlay commit {c['sha'][:12]} \"{c['subject']}\" does not apply onto upstream "
                          f"{inp.upstream_ref} ({inp.upstream[:12]}): conflict in {files}; "
                          f"{len(replay.applied)} of {len(commits)} commits applied on {branch}"))
        return _record(step_dir, outcome)

    diff_path = step_dir / "range-diff.txt"
    diff_path.write_text(overlay.range_diff(inp.repo, inp.base, inp.tip, inp.upstream, replay.tip))
    outcome = replace(outcome, range_diff=str(diff_path))

    day = today or _dt.datetime.now(_dt.timezone.utc).date()
    outcome = replace(outcome, tag=release.release_tag(inp.fork, day, replay.tip),
                      version=release.release_version(inp.fork, day, replay.tip))
    earlier = release.existing_release(store, outcome.tag)
    if earlier or overlay.tag_exists(inp.repo, outcome.tag):
        where = f"its manifest is {earlier}" if earlier else f"git tag {outcome.tag} exists in {inp.repo}"
        outcome = replace(outcome, status=Built.EXISTS,
                          reason=f"release {outcome.tag} exists ({where}); it is never overwritten")
        return _record(step_dir, outcome)

    t1 = time.perf_counter()
    built_dir = step_dir / "wheels"
    log = step_dir / "build.log"
    out = wheels.run_build(replay.worktree, build_command or wheels.DEFAULT_BUILD_COMMAND, built_dir, log,
                           outcome.version)
    timings["build"] = time.perf_counter() - t1
    outcome = replace(outcome, build_log=str(log), build_command=out.command)
    found = sorted(built_dir.glob("*.whl"))
    if out.returncode != 0 or not found:
        why = f"exited {out.returncode}" if out.returncode else "wrote no wheel"
        outcome = replace(outcome, status=Built.BUILD_FAILED, reason=f"the wheel build {why}: {' '.join(out.command)} "
                                                               f"(log {log}): {_telling_line(out.log_tail)}")
        return _record(step_dir, outcome)

    outcome = replace(outcome, wheels=[wheels.wheel_line(w) for w in found])
    doc = {
        "kind": "release", "tag": outcome.tag, "version": outcome.version, "fork": inp.fork,
        "fork_repo": str(inp.repo), "branch": branch, "source_commit": replay.tip, "base_commit": inp.upstream,
        "upstream_ref": inp.upstream_ref, "previous": {"base_commit": inp.base, "source_commit": inp.tip},
        "overlay": replay.applied, "dropped": replay.dropped, "upstream_moved": moved,
        "wheels": outcome.wheels, "build_command": out.command, "kit_version": __version__,
        "created_at": now_iso(),
    }
    outcome = replace(outcome, manifest=str(release.write_release(store, outcome.tag, doc, found)), status=Built.BUILT)
    dropped = f", {len(replay.dropped)} already upstream" if replay.dropped else ""
    outcome = replace(outcome, reason=f"{len(replay.applied)} overlay commits replayed onto {inp.upstream_ref} "
                                      f"({moved} upstream commits newer){dropped}; {len(found)} wheel(s) built as "
                                      f"{outcome.tag}")
    timings["total"] = time.perf_counter() - t0
    return _record(step_dir, outcome)


def load_build(step_dir: str | Path) -> BuildOutcome:
    """A build step's recorded outcome, read back from its folder."""
    return BuildOutcome(**read_json(Path(step_dir) / RECORD))


def _record(step_dir: Path, outcome: BuildOutcome) -> BuildOutcome:
    outcome.timings_s.setdefault("total", sum(outcome.timings_s.values()))
    write_json(step_dir / RECORD, outcome.to_dict())
    return outcome


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# An error stated in words ("error: package directory 'x' does not exist", "foo.c:3: error: ..."), not a
# tool's one-word code for it ("error: metadata-generation-failed").
_WORDED_ERROR = re.compile(r"\berror(?:\[[^\]]*\])?:\s*\S+\s+\S", re.IGNORECASE)


def _telling_line(text: str) -> str:
    """The line of a build log that says what went wrong: its last worded error, else its last line
    (pip ends a failed build with "hint: See above for details.", which names nothing)."""
    lines = [_ANSI.sub("", line).strip() for line in (text or "").splitlines()]
    lines = [line for line in lines if line]
    worded = [line for line in lines if _WORDED_ERROR.search(line)]
    return (worded or lines or ["(no output)"])[-1]
