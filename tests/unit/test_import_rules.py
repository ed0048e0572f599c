"""The import rules of docs/architecture.md hold, and the check that enforces them can fail.

The contract lives in .importlinter at the repository root; import-linter reads the package from
source, so a planted violation is tested on a copy of the package, never on the real tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import ROOT

LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())"]


def lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([*LINT, "--config", str(root / ".importlinter"), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_package_keeps_its_import_rules():
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 2 kept, 0 broken." in proc.stdout


def test_planted_violations_are_caught(tmp_path):
    shutil.copytree(ROOT / "kit", tmp_path / "kit", ignore=shutil.ignore_patterns("__pycache__", "_data"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    # A core module reaching up into the gate, a command importing a sibling, a kernel-side module importing pydantic.
    scoring = tmp_path / "kit" / "core" / "verdict" / "scoring.py"
    scoring.write_text(scoring.read_text() + "\nfrom kit.gate import run as _upward  # planted\n")
    calibrate = tmp_path / "kit" / "calibrate" / "run.py"
    calibrate.write_text(calibrate.read_text() + "\nfrom kit.faults import effect as _sideways  # planted\n")
    runner = tmp_path / "kit" / "case" / "runner.py"
    runner.write_text(runner.read_text() + "\nimport pydantic as _heavy  # planted\n")
    proc = lint(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Contracts: 0 kept, 2 broken." in proc.stdout
    assert "kit.core.verdict.scoring -> kit.gate.run" in proc.stdout
    assert "kit.calibrate.run -> kit.faults.effect" in proc.stdout
    assert "kit.case.runner -> pydantic" in proc.stdout
