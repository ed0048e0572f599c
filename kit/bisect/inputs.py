"""What a bisect searches: the overlay's states, each a commit to build, from a refresh directory or a
fork's own history.

From a refresh directory the states are the refresh's replay: its new upstream base, then each overlay
commit as it was cherry-picked onto that base (the commits already exist on the replay branch; nothing
is replayed again). From a fork, base and tip they are the fork's own commits: the base, then each
commit of ``base..tip`` in order (merges left out, as the replay leaves them out).

Over an upstream range (``scope="upstream"``, from a refresh directory) the states are upstream's own
commits from the old base to the new upstream (first parent), each with the overlay replayed onto it
when it is probed; state 0 is the fork's tip on its old base. Those states have no ``built_from`` until
their replay is made.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import read_json
from kit.core.records.paths import display
from kit.refresh import build, overlay, release


@dataclass(frozen=True)
class State:
    """State ``index``: the tree of commit ``built_from``; ``commit`` and ``subject`` name the overlay
    commit that made it (the fork's own sha, also when the state is its replay onto a newer base)."""

    index: int
    commit: str
    built_from: str
    subject: str

    def to_dict(self) -> dict:
        """One state of the overlay as bisect.json keeps it."""
        return asdict(self)


@dataclass(frozen=True)
class BisectInputs:
    repo: Path
    fork: str
    descriptor: Path
    base_label: str  # how the evidence names state 0
    states: tuple[State, ...]
    store: Path
    refresh_dir: Path | None = None
    current: str = "current"
    backend: str | None = None
    scope: str = "overlay"  # or "upstream": the states are upstream commits, the overlay replayed onto each
    overlay: tuple[tuple[str, str], ...] = ()  # (sha, subject) of the overlay, for scope "upstream"

    @property
    def n(self) -> int:
        """How many commits the searched range holds (its states less the base)."""
        return len(self.states) - 1

    def to_dict(self) -> dict:
        """The inputs as bisect.json keeps them, paths as text: what `--resume` continues with."""
        return {"repo": str(self.repo), "fork": self.fork, "descriptor": str(self.descriptor),
                "base_label": self.base_label, "states": [s.to_dict() for s in self.states],
                "store": str(self.store), "refresh_dir": str(self.refresh_dir) if self.refresh_dir else None,
                "current": self.current, "backend": self.backend, "scope": self.scope,
                "overlay": [list(c) for c in self.overlay]}

    @classmethod
    def from_dict(cls, d: dict) -> "BisectInputs":
        """The inputs read back from bisect.json; keys an older bisect did not write take the defaults it ran with."""
        return cls(Path(d["repo"]), d["fork"], Path(d["descriptor"]), d["base_label"],
                   tuple(State(**s) for s in d["states"]), Path(d["store"]),
                   Path(d["refresh_dir"]) if d.get("refresh_dir") else None, d.get("current", "current"),
                   d.get("backend"), d.get("scope", "overlay"), tuple(tuple(c) for c in d.get("overlay", [])))


def _refresh_records(folder: Path) -> tuple[dict, dict]:
    record_path, build_path = folder / rundir.REFRESH, folder / "build" / build.RECORD
    if not record_path.is_file():
        raise BadInput(f"refresh directory {display(folder)} has no {rundir.REFRESH} (not a refresh directory, "
                       "or one that never finished)")
    if not build_path.is_file():
        raise BadInput(f"refresh directory {display(folder)} has no build/{build.RECORD}: its build never ran")
    return read_json(record_path), read_json(build_path)


def from_refresh(refresh_dir: str | Path, store: str | Path | None = None) -> BisectInputs:
    """The states of a refresh's replay, its descriptor, pin, backend and release store."""
    folder = Path(refresh_dir)
    record, built = _refresh_records(folder)
    replay = built.get("replay") or {}
    if not replay.get("applied"):
        raise BadInput(f"refresh directory {display(folder)}: its replay applied no overlay commit "
                       f"({built.get('status')}: {built.get('reason')}); nothing to bisect")
    inp = built["inputs"]
    repo = overlay.check_repo(inp["repo"])
    states = [State(0, replay["new_base"], replay["new_base"], f"{inp['upstream_ref']} without the overlay")]
    states += [State(i, a["from"], a["to"], a["subject"]) for i, a in enumerate(replay["applied"], 1)]
    for s in states:  # the replay branch may have been deleted since
        overlay.resolve_commit(repo, s.built_from, f"replayed commit of {s.subject!r}")
    return BisectInputs(repo, inp["fork"], Path(record["descriptor"]),
                        f"upstream {inp['upstream_ref']} ({replay['new_base'][:12]}) without the overlay",
                        tuple(states), Path(store or record["store"]).resolve(), folder.resolve(),
                        record.get("current", "current"), None)


def from_fork(descriptor: str | Path, fork_repo: str | Path, base: str, tip: str | None = None,
              fork: str | None = None, store: str | Path | None = None, current: str = "current",
              backend: str | None = None, default_store: Path | None = None) -> BisectInputs:
    """The states of a fork's own history from ``base`` to ``tip`` (default: HEAD)."""
    repo = overlay.check_repo(fork_repo)
    base_sha = overlay.resolve_commit(repo, base, "base")
    tip_sha = overlay.resolve_commit(repo, tip or "HEAD", "fork tip")
    commits = overlay.overlay_commits(repo, base_sha, tip_sha)
    if not commits:
        raise BadInput(f"no commits between base {base_sha[:12]} and tip {tip_sha[:12]} in {repo}; nothing to bisect")
    name = fork or repo.name
    release.fork_slug(name)
    states = [State(0, base_sha, base_sha, "the base, without the overlay")]
    states += [State(i, c.sha, c.sha, c.subject) for i, c in enumerate(commits, 1)]
    return BisectInputs(repo, name, Path(descriptor).resolve(), f"base {base} ({base_sha[:12]})", tuple(states),
                        Path(store or default_store or "releases").resolve(), None, current, backend)


def from_upstream(refresh_dir: str | Path, store: str | Path | None = None) -> BisectInputs:
    """The upstream commits a refresh moved across, from its old base to its new upstream."""
    folder = Path(refresh_dir)
    record, built = _refresh_records(folder)
    inp = built["inputs"]
    repo = overlay.check_repo(inp["repo"])
    if not built.get("overlay"):
        raise BadInput(f"refresh directory {display(folder)}: the fork carries no overlay commit; bisect "
                       "upstream's own history with --fork-repo instead")
    out = overlay.git(repo, "log", "--reverse", "--first-parent", "--format=%H%x00%s",
                      f"{inp['base']}..{inp['upstream']}").stdout
    ups = [line.split("\0", 1) for line in out.splitlines() if line]
    if not ups:
        raise BadInput(f"refresh directory {display(folder)}: upstream did not move past the old base "
                       f"{inp['base'][:12]}; nothing to bisect")
    states = [State(0, inp["base"], inp["tip"], "the fork's tip on its old base")]
    states += [State(i, sha, "", subject) for i, (sha, subject) in enumerate(ups, 1)]
    replay = built.get("replay") or {}
    if replay.get("tip") and not replay.get("conflict") and replay.get("new_base") == ups[-1][0]:
        states[-1] = State(len(ups), ups[-1][0], replay["tip"], ups[-1][1])  # the refresh's own replay
    return BisectInputs(repo, inp["fork"], Path(record["descriptor"]),
                        f"the fork's tip {inp['tip'][:12]} on its old base {inp['base'][:12]}", tuple(states),
                        Path(store or record["store"]).resolve(), folder.resolve(), record.get("current", "current"),
                        None, "upstream", tuple((c["sha"], c["subject"]) for c in built["overlay"]))
