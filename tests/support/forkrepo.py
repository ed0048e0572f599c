"""Local git repositories for the refresh tests: an upstream with a small pip-buildable package,
and a fork of it carrying overlay commits."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

# Commits need an identity; a CI runner has none configured.
GIT_ENV = {"GIT_AUTHOR_NAME": "Test Author", "GIT_AUTHOR_EMAIL": "author@example.com",
           "GIT_COMMITTER_NAME": "Test Committer", "GIT_COMMITTER_EMAIL": "committer@example.com",
           # Fixed dates make a replay's commits, and so the release tag, the same on every run.
           "GIT_AUTHOR_DATE": "2025-01-02T03:04:05+00:00", "GIT_COMMITTER_DATE": "2025-01-02T03:04:05+00:00"}

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinyengine"
version = "1.0.0"
"""


def git(repo: Path, *args: str) -> str:
    import os

    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV})
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass
class Fork:
    repo: Path
    old_base: str  # the upstream commit the fork started from
    tip: str  # the fork's main
    new_upstream: str  # the upstream ref to refresh onto (a branch of the fork repo)


def make_fork(root: Path, conflict: bool = False) -> Fork:
    """Upstream v1 -> fork adds two overlay commits; upstream moves on by two commits. With
    ``conflict``, upstream rewrites the very line the fork's second commit changes."""
    repo = root / "tinyengine"
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch", "main")
    base = commit(repo, "tinyengine 1.0", {
        "pyproject.toml": PYPROJECT,
        "tinyengine/__init__.py": "VERSION = '1.0'\n",
        "tinyengine/ops.py": "def act(x):\n    return x\n",
    })
    git(repo, "branch", "upstream")
    commit(repo, "fork: add a fused kernel flag", {"tinyengine/flags.py": "FUSED = True\n"})
    tip = commit(repo, "fork: clamp activations", {"tinyengine/ops.py": "def act(x):\n    return max(x, 0)\n"})
    git(repo, "checkout", "--quiet", "upstream")
    commit(repo, "upstream: docs", {"README.md": "tinyengine\n"})
    if conflict:
        commit(repo, "upstream: rework act", {"tinyengine/ops.py": "def act(x):\n    return x * 2\n"})
    else:
        commit(repo, "upstream: add scale", {"tinyengine/scale.py": "def scale(x):\n    return x\n"})
    git(repo, "checkout", "--quiet", "main")
    return Fork(repo, base, tip, "upstream")
