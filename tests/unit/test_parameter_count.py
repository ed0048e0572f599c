"""No function of the kit takes a long list of parameters: an entry point takes one typed request.

A command asked with fifteen positional arguments (``make_baselines`` was) is read by counting commas, and one
more option shifts every caller's meaning silently; a frozen request dataclass names each field where it is given
(docs/architecture.md, Reading down the layers). Every parameter counts here, keyword-only ones included, ``self``
and ``cls`` not; ``*args`` and ``**kwargs`` count one each. The check is shown failing on planted functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support import ROOT

pytestmark = pytest.mark.unit

MOST = 9
# Functions allowed more, each with its reason.
ALLOWED = {
    # A backend's runtime is opened with its case's options by name (kit.backends.registry passes the options the
    # descriptor's schema validated as keywords): its constructor's parameters are that schema's fields.
    ("kit/backends/hf/runtime.py", "HfBackend.__init__"),
}


def counted(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg not in ("self", "cls")]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def long_lists(root: Path, package: str = "kit") -> dict[tuple[str, str], int]:
    """Each function (``Class.method`` for a method) under ``root/package`` with more than MOST parameters."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for owner in ast.walk(tree):
            for node in ast.iter_child_nodes(owner):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and counted(node) > MOST:
                    name = f"{owner.name}.{node.name}" if isinstance(owner, ast.ClassDef) else node.name
                    found[(path.relative_to(root).as_posix(), name)] = counted(node)
    return found


def test_no_kit_function_takes_more_than_the_most_parameters():
    found = {k: n for k, n in long_lists(ROOT).items() if k not in ALLOWED}
    assert not found, "take one typed request instead: " + ", ".join(f"{p}:{f} ({n})" for (p, f), n in found.items())


def test_every_allowed_function_still_needs_it():
    assert set(long_lists(ROOT)) >= ALLOWED, "an allowed function takes few parameters now: drop it from ALLOWED"


def test_the_check_finds_planted_long_lists(tmp_path):
    (tmp_path / "kit").mkdir()
    (tmp_path / "kit" / "planted.py").write_text(
        "def ten(a, b, c, d, e, f, g, h, i, j):\n    pass\n\n\n"
        "def keywords(a, *, b, c, d, e, f, g, h, i, j):\n    pass\n\n\n"
        "def starred(a, b, c, d, e, f, g, h, *args, **kwargs):\n    pass\n\n\n"
        "class Held:\n    def method(self, a, b, c, d, e, f, g, h, i, j):\n        pass\n\n\n"
        "def nine(a, b, c, d, e, f, g, h, i):\n    pass\n\n\n"
        "class Few:\n    def __init__(self, a, b, c, d, e, f, g, h, i):\n        pass\n")
    assert set(long_lists(tmp_path)) == {("kit/planted.py", "ten"), ("kit/planted.py", "keywords"),
                                         ("kit/planted.py", "starred"), ("kit/planted.py", "Held.method")}
