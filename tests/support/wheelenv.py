"""parity-kit as a user gets it: the checkout built into a wheel, installed into a fresh virtual
environment outside the checkout, run from a folder outside it.

The environment must not see the checkout's own: no `--system-site-packages`, and none of the
variables through which the main environment's kernels or interpreter could leak in (the
JUPYTER_* search paths, VIRTUAL_ENV, PYTHONPATH, the kit's own PARITY_KIT_*). Each step is timed,
because "installing is fast" is part of what the wheel tests claim.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from support import ROOT

CONSTRAINTS = ROOT / "env" / "constraints.txt"
_LEAKY_PREFIXES = ("JUPYTER", "PARITY_KIT_", "IPYTHON")
_LEAKY = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "CONDA_PREFIX"}


def unleaked_environ() -> dict[str, str]:
    """This process's environment without the variables through which the main environment could leak into
    an interpreter of another environment."""
    return {k: v for k, v in os.environ.items() if k not in _LEAKY and not k.startswith(_LEAKY_PREFIXES)}


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float

    def line(self) -> str:
        return f"wheel env: {self.name}: {self.seconds:.1f} s"


@dataclass
class WheelEnv:
    venv: Path
    wheel: Path
    work: Path  # a folder outside the checkout to run commands in
    steps: list[Step] = field(default_factory=list)

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        return self.venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

    def env(self) -> dict[str, str]:
        keep = unleaked_environ()
        # The venv's bin first, as an activated venv has it; the main environment's bin not at all.
        path = [p for p in keep.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(ROOT))]
        return {**keep, "PATH": os.pathsep.join([str(self.venv / "bin"), *path])}

    def run(self, *argv: str | Path, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in argv], cwd=self.work, env=self.env(), capture_output=True,
                              text=True, timeout=timeout)

    def parity_kit(self, *args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess:
        return self.run(self.venv / "bin" / "parity-kit", *args, timeout=timeout)


def timed(steps: list[Step], name: str, report: Callable[[str], None], fn: Callable[[], object]) -> object:
    t0 = time.perf_counter()
    out = fn()
    steps.append(Step(name, time.perf_counter() - t0))
    report(steps[-1].line())
    return out


def _checked(proc: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    if proc.returncode != 0:
        raise AssertionError(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def build_wheel(out_dir: Path) -> Path:
    """`python -m build --wheel` of the checkout; the one wheel it wrote."""
    _checked(subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out_dir), str(ROOT)],
                            capture_output=True, text=True, timeout=600), "python -m build --wheel")
    (wheel,) = out_dir.glob("parity_kit-*.whl")
    return wheel


def make_wheel_env(tmp: Path, extras: str, report: Callable[[str], None]) -> WheelEnv:
    """Build the wheel, create the venv, install ``WHEEL[extras]`` under the lock file."""
    work = tmp / "work"
    work.mkdir()
    steps: list[Step] = []
    wheel = timed(steps, "python -m build --wheel", report, lambda: build_wheel(tmp / "dist"))
    env = WheelEnv(tmp / "venv", wheel, work, steps)
    timed(steps, "python -m venv", report,
          lambda: _checked(env.run(sys.executable, "-m", "venv", env.venv), "python -m venv"))
    # --no-compile: byte-compiling torch and transformers up front is about half of pip's CPU time
    # here; the modules a run imports compile on first import instead.
    timed(steps, f"pip install -c env/constraints.txt 'WHEEL[{extras}]'", report,
          lambda: _checked(env.run(env.python, "-m", "pip", "install", "--quiet", "--no-compile",
                                   "--disable-pip-version-check", "-c", CONSTRAINTS, f"{wheel}[{extras}]"),
                           "pip install"))
    return env
