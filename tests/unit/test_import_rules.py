"""The import rules of docs/architecture.md hold, and the check that enforces them can fail.

The contract lives in .importlinter at the repository root; import-linter reads the package from
source, so a planted violation is tested on a copy of the package, never on the real tree.

No module imports itself back, through any number of others: a circle ties its modules' designs together
(neither can be read, tested or moved without the other) and, imported at the top, fails on whichever is
imported first. The layers contract sees circles only between packages; inside one, the graph import-linter
builds (grimp's: every import, a function's and a type checker's included) is searched for them here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

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
    assert "Contracts: 3 kept, 0 broken." in proc.stdout


def test_planted_violations_are_caught(tmp_path):
    shutil.copytree(ROOT / "kit", tmp_path / "kit", ignore=shutil.ignore_patterns("__pycache__", "_data"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    # A core module reaching up into the gate, a command importing a sibling, a kernel-side module importing pydantic,
    # a record reaching up into the verdict that judges it (kit.core's own layers), a kit.core package given no layer.
    records = tmp_path / "kit" / "core" / "records" / "records.py"
    records.write_text(records.read_text() + "\nfrom kit.core.verdict import judge as _upward_in_core  # planted\n")
    (tmp_path / "kit" / "core" / "unplaced").mkdir()
    (tmp_path / "kit" / "core" / "unplaced" / "__init__.py").write_text('"""Planted."""\n')
    scoring = tmp_path / "kit" / "core" / "verdict" / "scoring.py"
    scoring.write_text(scoring.read_text() + "\nfrom kit.gate import run as _upward  # planted\n")
    calibrate = tmp_path / "kit" / "calibrate" / "run.py"
    calibrate.write_text(calibrate.read_text() + "\nfrom kit.faults import effect as _sideways  # planted\n")
    runner = tmp_path / "kit" / "case" / "runner.py"
    runner.write_text(runner.read_text() + "\nimport pydantic as _heavy  # planted\n")
    proc = lint(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Contracts: 0 kept, 3 broken." in proc.stdout
    assert "kit.core.verdict.scoring -> kit.gate.run" in proc.stdout
    assert "kit.core.records.records -> kit.core.verdict.judge" in proc.stdout
    assert "- kit.core.unplaced" in proc.stdout
    assert "kit.calibrate.run -> kit.faults.effect" in proc.stdout
    assert "kit.case.runner -> pydantic" in proc.stdout


def import_circles(package: str) -> list[list[str]]:
    """Every circle of imports among ``package``'s modules, each as the imports that close it (``a -> b``, sorted):
    the strongly connected sets of two or more modules of its import graph (Tarjan's algorithm)."""
    graph = grimp.build_graph(package, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            members = {stack.pop()}
            while module not in members:
                members.add(stack.pop())
            if len(members) > 1:
                circles.append(sorted(f"{a} -> {b}" for a in members for b in graph.find_modules_directly_imported_by(a)
                                      if b in members))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return sorted(circles)


def test_no_module_imports_itself_back():
    assert import_circles("kit") == []


def test_a_circle_is_found_however_its_imports_are_written(tmp_path, monkeypatch):
    package = tmp_path / "circles"
    package.mkdir()
    (package / "__init__.py").write_text("")
    # at the top one way and inside a function the other; for a type checker only; through a third module
    (package / "a.py").write_text("from circles import b\n")
    (package / "b.py").write_text("def f():\n    from circles.a import g\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circles.d import D\n")
    (package / "d.py").write_text("import circles.c\n")
    (package / "e.py").write_text("from circles import f\n")
    (package / "f.py").write_text("from circles import g\n")
    (package / "g.py").write_text("from circles import e\n")
    (package / "h.py").write_text("from circles import a, c, e\n")  # imports each circle, in none itself
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_circles("circles") == [
        ["circles.a -> circles.b", "circles.b -> circles.a"],
        ["circles.c -> circles.d", "circles.d -> circles.c"],
        ["circles.e -> circles.f", "circles.f -> circles.g", "circles.g -> circles.e"],
    ]
