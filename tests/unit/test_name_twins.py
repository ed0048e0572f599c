"""Each public top-level name of the kit means one thing: a class or function defined in two modules is either one
contract written once per implementation (a backend's hook, a view's entry a notebook calls, a command's report)
listed here with why, or a name to change. Two `Plan`s, two `Kind`s and two `near_tie`s with different contracts
once sent readers to the wrong one."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

KIT = Path(__file__).resolve().parents[2] / "kit"

# One contract, implemented in each module that defines it.
SAME_CONTRACT = {
    # A backend's hooks, named by BackendInfo's dotted paths (kit/backends/base.py); the registry's is the
    # dispatcher that opens, reads or places through the backend's own.
    "open_backend": "a backend's runtime opens it; kit.backends.registry.open_backend dispatches",
    "residual_stream": "a backend's activations hook (and the jax model's own pass it wraps)",
    "golden_options": "a backend's golden hook",
    "golden_flags": "a backend's golden hook",
    "legacy_runtime": "hf's hook; kit.backends.registry.legacy_runtime dispatches",
    "placement": "jax's hook; kit.backends.base.placement is the default",
    # The registry's forms of a golden's question that ask each golden's backend for its runtime key.
    "choose_for_runtime": "kit.core.baselines.golden's, with each golden's key read through its backend",
    "duplicate_runtime": "kit.core.baselines.golden's, with each golden's key read through its backend",
    "remake_command": "kit.core.baselines.golden's, with the flags the golden's backend gives",
    # What a notebook calls of its view (kit/views): read its folder, then show it.
    "load": "a view's reader, called by its notebook",
    "show": "a view's display, called by its notebook",
    # A command's paragraph for an issue, and its directory for an issue comment.
    "evidence_markdown": "a command's paragraph for an issue or a pull request",
    "markdown_report": "a command's directory for an issue comment (`parity-kit report --markdown`)",
    "main": "a program's entry: the CLI's, the warm process's, Levanter's activations reader's",
}


def twins(root: Path) -> dict[str, list[str]]:
    """Each public class or function name defined at the top of more than one module under ``root``, and where."""
    where: dict[str, list[str]] = defaultdict(list)
    for module in sorted(root.rglob("*.py")):
        for node in ast.parse(module.read_text(), str(module)).body:
            defines = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if defines and not node.name.startswith("_"):
                where[node.name].append(f"{module.relative_to(root.parent).as_posix()}:{node.lineno}")
    return {name: places for name, places in where.items() if len(places) > 1}


def test_no_name_is_defined_in_two_modules_with_two_meanings():
    found = twins(KIT)
    assert {name: found[name] for name in found if name not in SAME_CONTRACT} == {}
    assert sorted(set(SAME_CONTRACT) - set(found)) == [], "a listed name is defined once now: take it off the list"


def test_the_check_finds_a_twin(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "kit" / name).mkdir(parents=True)
        (tmp_path / "kit" / name / "m.py").write_text("class Plan:\n    pass\n\n\ndef _private():\n    pass\n")
    assert twins(tmp_path / "kit") == {"Plan": ["kit/a/m.py:1", "kit/b/m.py:1"]}
