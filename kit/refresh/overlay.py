"""A fork's overlay: the commits it carries on top of upstream, replayed onto a newer upstream.

Everything is the git CLI. The replay happens in a separate worktree on its own
branch, so the fork's checkout is never touched; a conflict stops the replay at
the commit that caused it and aborts the cherry-pick, leaving that worktree clean
at the last commit that applied.
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kit.core.errors import BadInput, ParityKitError

REPLAY_BRANCH = "main-next"


class GitError(ParityKitError):
    """A git command that should have worked did not; the message is git's own first line."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    def short(self) -> str:
        """The commit as a line shows it: its short hash and subject."""
        return f"{self.sha[:12]} {self.subject}"


@dataclass
class Replay:
    worktree: Path
    branch: str
    new_base: str
    applied: list[dict] = field(default_factory=list)  # {"from", "to", "subject"}
    dropped: list[dict] = field(default_factory=list)  # already upstream: the cherry-pick came out empty
    conflict: dict | None = None  # {"sha", "subject", "files"}
    tip: str = ""

    def to_dict(self) -> dict:
        """The replay as the build's record keeps it, its worktree as text."""
        d = asdict(self)
        d["worktree"] = str(self.worktree)
        return d


def git(repo: str | Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run git in ``repo``; with ``check``, a failure raises GitError with its first line, so a refresh stops on
    a git error with git's own words."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} in {repo}: {_first_line(proc.stderr or proc.stdout)}")
    return proc


def check_repo(repo: str | Path) -> Path:
    """The fork's repository, resolved; a folder that is not a git repository is refused in one line."""
    path = Path(repo)
    if not path.is_dir() or git(path, "rev-parse", "--git-dir", check=False).returncode != 0:
        raise BadInput(f"fork repository {repo} is not a git repository")
    return path.resolve()


def resolve_commit(repo: Path, ref: str, what: str) -> str:
    """The commit ``ref`` names in ``repo``; one that names no commit is refused in one line saying what it was
    meant to be."""
    proc = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if proc.returncode != 0:
        raise BadInput(f"{what} {ref!r} is not a commit in {repo}")
    return proc.stdout.strip()


def default_base(repo: Path, tip: str, upstream: str) -> str:
    """The upstream commit the fork last started from: where its history meets upstream's."""
    proc = git(repo, "merge-base", tip, upstream, check=False)
    if proc.returncode != 0:
        raise BadInput(f"the fork tip {tip[:12]} and upstream {upstream[:12]} share no history in {repo}; "
                       "pass --base")
    return proc.stdout.strip()


def overlay_commits(repo: Path, base: str, tip: str) -> list[Commit]:
    """The fork's own commits from ``base`` to ``tip``, oldest first, merges left out: the overlay a refresh replays."""
    out = git(repo, "log", "--reverse", "--no-merges", "--format=%H%x00%s", f"{base}..{tip}").stdout
    return [Commit(*line.split("\0", 1)) for line in out.splitlines() if line]


def count_commits(repo: Path, base: str, new: str) -> int:
    """How many commits ``new`` is past ``base``: how far upstream moved."""
    return int(git(repo, "rev-list", "--count", f"{base}..{new}").stdout.strip())


def tag_exists(repo: Path, tag: str) -> bool:
    """Whether the tag exists in ``repo``: a release is never tagged twice."""
    return git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}", check=False).returncode == 0


def replay_overlay(repo: Path, commits: list[Commit], new_base: str, worktree: Path,
                   branch: str | None = REPLAY_BRANCH) -> Replay:
    """Cherry-pick ``commits`` one by one onto ``new_base`` on ``branch``, in a new worktree (with no
    branch, on a detached HEAD: a bisect's trial replays leave no branch behind)."""
    if branch is None:
        git(repo, "worktree", "add", "--quiet", "--detach", str(worktree), new_base)
    elif git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).returncode == 0:
        # An earlier replay (maybe one a person is resolving by hand) is never thrown away.
        raise BadInput(f"branch {branch} exists in {repo}; delete it (git -C {repo} branch -D {branch}) "
                       "or choose another replay branch")
    else:
        git(repo, "worktree", "add", "--quiet", "-b", branch, str(worktree), new_base)
    result = Replay(worktree.resolve(), branch or "", new_base)
    for commit in commits:
        proc = git(worktree, "cherry-pick", commit.sha, check=False)
        if proc.returncode == 0:
            result.applied.append({"from": commit.sha, "to": _head(worktree), "subject": commit.subject})
            continue
        conflicted = git(worktree, "diff", "--name-only", "--diff-filter=U").stdout.split()
        if not conflicted and _is_empty_pick(worktree):
            git(worktree, "cherry-pick", "--skip")
            result.dropped.append({"from": commit.sha, "subject": commit.subject})
            continue
        git(worktree, "cherry-pick", "--abort", check=False)
        result.conflict = {"sha": commit.sha, "subject": commit.subject,
                           "files": conflicted, "message": _first_line(proc.stderr or proc.stdout)}
        break
    result.tip = _head(worktree)
    return result


def range_diff(repo: Path, base: str, tip: str, new_base: str, new_tip: str) -> str:
    """How each overlay commit changed on its way onto the new base (``git range-diff``)."""
    return git(repo, "range-diff", "--no-color", f"{base}..{tip}", f"{new_base}..{new_tip}").stdout


def _is_empty_pick(worktree: Path) -> bool:
    """A cherry-pick that stopped with nothing to commit: the change is already upstream."""
    in_progress = git(worktree, "rev-parse", "--verify", "--quiet", "CHERRY_PICK_HEAD", check=False).returncode == 0
    return in_progress and git(worktree, "diff", "--cached", "--quiet", check=False).returncode == 0


def _head(worktree: Path) -> str:
    return git(worktree, "rev-parse", "HEAD").stdout.strip()


def _first_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"
