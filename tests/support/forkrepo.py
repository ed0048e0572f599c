"""Local git repositories for the refresh tests: an upstream with a small pip-buildable engine,
and a fork of it carrying overlay commits, plus a backend plugin that computes through that engine.

The engine matters to a refresh only if its bytes can change a number the gate scores. So the fork's
package ``tinyengine`` computes the next-token logprobs of the ``toy`` backend (a plugin registered
through the ``parity_kit.backends`` entry points, outside kit/): a release whose overlay breaks that
computation fails the gate, and one that installs the wrong bytes is caught by what the case records.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from support import install_backend_plugin

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


ENGINE = """\"\"\"tinyengine's next-token step: the model's logprobs through the activation.\"\"\"
from tinyengine.ops import act


def next_token_logprobs(logprobs, n_tokens):
    return [act(x) for x in logprobs]
"""

# Overlay commits a fork may add after today's pin was built: (subject, files).
LONG_PROMPT_FAULT = ("fork: fast path for long prompts", {"tinyengine/engine.py": ENGINE.replace(
    "    return [act(x) for x in logprobs]",
    "    scale = 1.5 if n_tokens > 128 else 1.0  # the fast path forgets the temperature it folded in\n"
    "    return [act(x) * scale for x in logprobs]")})
LONG_PROMPT_FIX = ("fork: fix the long-prompt fast path", {"tinyengine/engine.py": ENGINE})
IMPORT_FAULT = ("fork: load the fused kernels", {
    "tinyengine/__init__.py": "VERSION = '1.0'\nimport tinyengine_fused  # built by the fork's own toolchain\n"})
# Its error names a path in brackets, as build tools do: a reason is text, never console markup.
BUILD_FAULT = ("fork: build the fused kernels", {"setup.py": """import os
from setuptools import setup

toolkit = os.environ.get("TINYENGINE_CUDA_HOME", "/opt/tinyengine-cuda")
if not os.path.isdir(toolkit):
    raise SystemExit(f"error: the fused kernels need the CUDA toolkit [{toolkit} does not exist]")
setup()
"""})


def git(repo: Path, *args: str) -> str:
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
    pinned: str  # the fork commit today's pin was built from (before any ``later`` commit)
    later: list[str]  # the overlay commits made since, in order


def make_fork(root: Path, conflict: bool = False, later: Sequence[tuple[str, dict]] = (),
              upstream_later: Sequence[tuple[str, dict]] = ()) -> Fork:
    """Upstream v1 -> fork adds two overlay commits; upstream moves on by two commits. With
    ``conflict``, upstream rewrites the very line the fork's second commit changes. ``later``
    commits land on the fork after the two (after today's pin was built from it), ``upstream_later``
    on upstream after its two."""
    repo = root / "tinyengine"
    repo.mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch", "main")
    base = commit(repo, "tinyengine 1.0", {
        "pyproject.toml": PYPROJECT,
        "tinyengine/__init__.py": "VERSION = '1.0'\n",
        "tinyengine/ops.py": "def act(x):\n    return x\n",
        "tinyengine/engine.py": ENGINE,
    })
    git(repo, "branch", "upstream")
    commit(repo, "fork: add a fused kernel flag", {"tinyengine/flags.py": "FUSED = True\n"})
    # A clamp far below any logprob the model gives: harmless to the numbers.
    pinned = commit(repo, "fork: clamp activations", {"tinyengine/ops.py": "def act(x):\n    return max(x, -1e4)\n"})
    extra = [commit(repo, subject, files) for subject, files in later]
    git(repo, "checkout", "--quiet", "upstream")
    commit(repo, "upstream: docs", {"README.md": "tinyengine\n"})
    if conflict:
        commit(repo, "upstream: rework act", {"tinyengine/ops.py": "def act(x):\n    return x * 2\n"})
    else:
        commit(repo, "upstream: add scale", {"tinyengine/scale.py": "def scale(x):\n    return x\n"})
    for subject, files in upstream_later:
        commit(repo, subject, files)
    git(repo, "checkout", "--quiet", "main")
    return Fork(repo, base, extra[-1] if extra else pinned, "upstream", pinned, extra)


# The `toy` backend: kit's side of an engine (its record, options and runtime), registered through the
# entry-point group as a third-party plugin would be. Its runtime imports the fork's `tinyengine`, so a
# case computes with whichever tinyengine its kernel has: today's pin's, or the release's wheel.
TOY_BACKEND = {
    "__init__.py": '''
from kit.backends.base import BackendInfo

BACKEND = BackendInfo(name="toy", summary="the golden through the fork's tinyengine (a test plugin)",
                      runtime="toy_backend.runtime", options="toy_backend.options:ToyOptions")
''',
    "options.py": '''
from kit.backends.options import BackendOptions


class ToyOptions(BackendOptions):
    pass
''',
    "runtime.py": '''
import json

import tinyengine
from tinyengine.engine import next_token_logprobs

from kit.core.records.records import Observation


class Toy:
    name = "toy"

    def __init__(self, golden_path):
        doc = json.loads(open(golden_path).read())
        self.tops = {c["id"]: c["top_logprobs"] for c in doc["cases"]}

    def release(self):
        return {"backend": "toy", "tinyengine": tinyengine.__file__}

    def observe(self, prompts, top_n):
        out = []
        for p in prompts:
            top = self.tops[p.id]
            logprobs = next_token_logprobs([e["logprob"] for e in top], p.n_tokens)
            out.append(Observation(p.id, tuple(zip((e["token_id"] for e in top), logprobs)), p.n_tokens))
        return out

    def details(self):
        return {}

    def close(self):
        pass


def open_backend(spec):
    return Toy(spec.golden_path)
''',
}
PIN_KERNEL = "toy-pin"


def install_toy_backend(site: Path) -> Path:
    """The plugin as pip would lay it out in ``site``, a folder for PYTHONPATH. It holds no tinyengine:
    each kernel brings its own."""
    return install_backend_plugin(site, "toy", "toy_backend", TOY_BACKEND)


def register_pin_kernel(jupyter_path: Path, fork: Fork, plugin_site: Path, at: str | None = None) -> Path:
    """Today's pin: a kernel of this interpreter whose tinyengine is the fork's tree at ``at`` (default:
    the commit the pin was built from). Returns the folder that tinyengine was exported to."""
    engine = jupyter_path / f"{PIN_KERNEL}-site"
    engine.mkdir(parents=True)
    tar = subprocess.run(["git", "-C", str(fork.repo), "archive", "--format=tar", at or fork.pinned, "tinyengine"],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(engine, filter="data")
    spec = jupyter_path / "kernels" / PIN_KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": PIN_KERNEL, "language": "python",
        "env": {"PYTHONPATH": os.pathsep.join([str(plugin_site), str(engine)])},
    }))
    return engine
