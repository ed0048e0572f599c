"""ruff and mypy pass over the repository as pyproject.toml configures them, and each check can fail.

Both run as the commands a person runs (`ruff check`, `mypy`, from the checkout), so a finding here reads as it
would in a terminal; the planted files show that the configuration reports what it should, not only that today's
tree is clean.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT

pytestmark = pytest.mark.unit

CONFIG = ROOT / "pyproject.toml"
BIN = Path(sys.executable).parent


def run(tool: str, *args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_ruff_passes_over_the_repository():
    proc = run("ruff", "check", "--no-cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_passes_over_its_files():
    proc = run("mypy")  # the files and settings of [tool.mypy]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Success: no issues found"), proc.stdout


def test_ruff_finds_a_planted_fault(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    proc = run("ruff", "check", "--no-cache", "--config", CONFIG, "--output-format", "concise", planted, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "planted.py:1:8: F401" in proc.stdout and "planted.py:5:12: F821" in proc.stdout, proc.stdout


def test_mypy_finds_a_planted_fault(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("def count() -> int:\n    return 'three'\n")
    proc = run("mypy", "--config-file", CONFIG, "--cache-dir", tmp_path / "cache", planted, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'planted.py:2: error: Incompatible return value type (got "str", expected "int")' in proc.stdout, proc.stdout


PLANTED_API = '''"""A module."""


def public():
    return 1


def _private():
    return 2


class Public:
    """A class."""

    def method(self):
        return 3

    @property
    def value(self):
        return 4

    def _hidden(self):
        return 5
'''


def test_ruff_finds_a_public_function_without_a_docstring_in_kit_only(tmp_path):
    shutil.copy(CONFIG, tmp_path / "pyproject.toml")  # its per-file patterns are read from the folder it is in
    for folder in ("kit", "tests"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "planted.py").write_text(PLANTED_API)
    proc = run("ruff", "check", "--no-cache", "--output-format", "concise", "kit", "tests", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = [line.split(" ")[:2] for line in proc.stdout.splitlines() if line.startswith(("kit/", "tests/"))]
    assert found == [["kit/planted.py:4:5:", "D103"], ["kit/planted.py:15:9:", "D102"],
                     ["kit/planted.py:19:9:", "D102"]], proc.stdout
