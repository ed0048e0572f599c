"""A package's ``__init__.py`` holds no logic: a docstring, imports (re-exports) and ``__all__``, so that what a
package does lives in a module named for it, which a reader finds by its name and the folder-size rule counts
(kit/gate's verify and executors once sat on __init__ files of hundreds of lines that rule skips). The one other
statement allowed is the package version, ``__version__``, a string literal by the usual Python convention."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

KIT = Path(__file__).resolve().parents[2] / "kit"


def _allowed(node: ast.stmt, first: bool) -> bool:
    if first and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(
            node.value.value, str):
        return True  # the docstring
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        name, value = node.targets[0].id, node.value
        if name == "__all__" and isinstance(value, (ast.List, ast.Tuple)):
            return all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts)
        return name == "__version__" and isinstance(value, ast.Constant) and isinstance(value.value, str)
    return False


def logic_in(root: Path) -> list[str]:
    """``path:line`` of each statement of an ``__init__.py`` under ``root`` that is not a docstring, an import,
    ``__all__`` or ``__version__``."""
    out = []
    for init in sorted(root.rglob("__init__.py")):
        body = ast.parse(init.read_text(), str(init)).body
        out += [f"{init.relative_to(root.parent).as_posix()}:{node.lineno}"
                for i, node in enumerate(body) if not _allowed(node, i == 0)]
    return out


def test_no_package_init_of_the_kit_holds_logic():
    assert logic_in(KIT) == []


def test_the_check_finds_logic_in_an_init(tmp_path):
    room = tmp_path / "kit" / "room"
    room.mkdir(parents=True)
    (room / "__init__.py").write_text('"""Doc."""\n\nfrom os import path\n\n__all__ = ["path"]\n'
                                      'DEFAULT = "local"\n\n\ndef f():\n    return 1\n')
    (tmp_path / "kit" / "__init__.py").write_text('"""Doc."""\n__version__ = "1.0"\n')
    assert logic_in(tmp_path / "kit") == ["kit/room/__init__.py:6", "kit/room/__init__.py:9"]
