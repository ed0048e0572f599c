"""Every exception the kit defines derives from one root, ParityKitError (kit/core/errors.py), so that a caller
tells the kit's own refusals and faults from a bug or an engine's exception with one ``except``.

The classes are read from the source (ast), not imported: importing every module of kit/ would import the
engines, which the unit tier never does.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

from kit.backends.vllm.server import VllmServerError
from kit.case.runner import BackendMismatch, InvalidObservation
from kit.core.errors import BadInput, ParityKitError
from kit.core.records.recordcheck import Wrong
from kit.refresh.overlay import GitError
from kit.refresh.qualify import StepFailed
from support import ROOT

pytestmark = pytest.mark.unit

# (file name, class) -> why it does not derive from ParityKitError. Keyed by file name, not path, so that a
# module moving between packages keeps its entry.
OUTSIDE_THE_ROOT = {
    ("stopping.py", "Stopped"): "a KeyboardInterrupt on purpose: a stopping signal unwinds the run as Ctrl-C "
                                "does, past every `except Exception`",
}


def _builtin_exception(base: ast.expr) -> bool:
    value = getattr(builtins, base.id, None) if isinstance(base, ast.Name) else None
    return isinstance(value, type) and issubclass(value, BaseException)


def rootless(files) -> list[str]:
    """``file:line class`` for each class that derives from a built-in exception without ParityKitError beside it."""
    found = []
    for path in files:
        for node in ast.walk(ast.parse(Path(path).read_text(), filename=str(path))):
            if not isinstance(node, ast.ClassDef) or node.name == "ParityKitError":
                continue
            names = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if any(_builtin_exception(b) for b in node.bases) and "ParityKitError" not in names:
                if (Path(path).name, node.name) not in OUTSIDE_THE_ROOT:
                    found.append(f"{path}:{node.lineno} {node.name}")
    return found


def test_every_exception_of_the_kit_derives_from_the_one_root():
    assert rootless(sorted((ROOT / "kit").rglob("*.py"))) == []


def test_a_class_outside_the_root_is_found(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("class Oops(ValueError):\n    pass\n\n\nclass Fine(ParityKitError, RuntimeError):\n    pass\n")
    assert rootless([planted]) == [f"{planted}:1 Oops"]


def test_the_kits_exceptions_keep_their_behaviour_under_the_root():
    for cls in (BadInput, Wrong, BackendMismatch, InvalidObservation, GitError, StepFailed, VllmServerError):
        assert issubclass(cls, ParityKitError) and issubclass(cls, Exception)
    assert issubclass(VllmServerError, RuntimeError)  # callers that catch RuntimeError still do
    assert StepFailed("venv", "no venv").step == "venv"
    assert str(BadInput("d.toml:3: no case named 'x'")) == "d.toml:3: no case named 'x'"
