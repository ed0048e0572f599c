"""Wheels: build them with the configured command, name their architecture, hash their bytes."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from kit.core.records.jsonio import sha256_file

# pip builds with the environment's own setuptools (no isolation: no index needed) and
# no dependencies (a release is the fork's own bytes, not its dependency tree).
DEFAULT_BUILD_COMMAND = ("{python}", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                         "--wheel-dir", "{wheel_dir}", ".")

_COLOR_FORCING = ("FORCE_COLOR", "CLICOLOR_FORCE", "CLICOLOR", "PY_COLORS")


@dataclass(frozen=True)
class BuildOutput:
    command: list[str]
    returncode: int
    log_tail: str
    duration_s: float


def build_command(template: Sequence[str], wheel_dir: Path) -> list[str]:
    """The wheel build command with ``{python}`` and ``{wheel_dir}`` filled in."""
    return [part.format(python=sys.executable, wheel_dir=str(wheel_dir)) for part in template]


def run_build(source: Path, template: Sequence[str], wheel_dir: Path, log_path: Path, version: str) -> BuildOutput:
    """Run the build in the source tree; its whole output goes to ``log_path``."""
    import time

    command = build_command(template, wheel_dir)
    wheel_dir.mkdir(parents=True, exist_ok=True)
    # The build notebook's kernel asks every child process for color (ipykernel sets FORCE_COLOR); the
    # log is a file and its telling line becomes the refresh's one-line reason: plain text for both.
    env = {k: v for k, v in os.environ.items() if k not in _COLOR_FORCING}
    # Builds that take their version from git (setuptools-scm) stamp the release's version.
    env.update(NO_COLOR="1", SETUPTOOLS_SCM_PRETEND_VERSION=version, PARITY_KIT_RELEASE_VERSION=version)
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.run(command, cwd=source, stdout=log, stderr=subprocess.STDOUT, env=env)
            code = proc.returncode
        except OSError as exc:  # the command itself does not exist
            log.write(f"{exc}\n".encode())
            code = 127
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
    return BuildOutput(command, code, tail, time.perf_counter() - t0)


def wheel_line(path: Path) -> dict:
    """A wheel as the release manifest lists it: file, distribution, version, architecture, SHA-256."""
    try:
        name, version, _, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise ValueError(f"{path.name}: not a wheel file name: {exc}") from None
    return {
        "file": path.name,
        "distribution": str(name),
        "version": str(version),
        "architecture": ",".join(sorted({t.platform for t in tags})),
        "python": ",".join(sorted({t.interpreter for t in tags})),
        "sha256": sha256_file(path),
        "size": path.stat().st_size,
    }


def top_level_modules(path: Path) -> list[str]:
    """The importable top-level names a wheel installs (what an import smoke test imports)."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        top = next((n for n in names if n.endswith(".dist-info/top_level.txt")), None)
        if top:
            return sorted({line.strip() for line in zf.read(top).decode().splitlines() if line.strip()})
    found = set()
    for n in names:
        head = n.split("/", 1)[0]
        if head.endswith((".dist-info", ".data")):
            continue
        if "/" in n and n.split("/", 1)[1] == "__init__.py":
            found.add(head)
        elif "/" not in n and n.endswith(".py"):
            found.add(n[:-3])
    return sorted(found)


def verify_wheels(wheel_dir: Path, listed: Sequence[dict]) -> list[str]:
    """One line per wheel whose bytes are missing or differ from what the manifest recorded."""
    problems = []
    for entry in listed:
        path = wheel_dir / entry["file"]
        if not path.is_file():
            problems.append(f"wheel {entry['file']} is missing from {wheel_dir}")
            continue
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            problems.append(f"wheel {entry['file']} changed since the manifest was written: "
                            f"manifest sha256 {entry['sha256']}, file sha256 {actual}")
    return problems
