"""What the syntax-tree guards of the unit tier share: every function of a module with its qualified place, the
name an expression goes by, and the names a function derives from a watched expression.

Each guard (a decision taken from words, a run's file read past its reader, a folder claimed past the lifecycle, a
bound compared past the rules) asks one question of each node; what they share is how an expression is named and
how a name picks up what it was assigned from, so that ``text = str(exc)`` followed by ``"x" in text`` is found
as surely as ``"x" in str(exc)``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable, Iterator, TypeVar

KIT = Path(__file__).resolve().parents[2] / "kit"


def kit_modules() -> Iterator[tuple[str, str, str]]:
    """(module, path relative to kit/, source) of every module of the kit."""
    for path in sorted(KIT.rglob("*.py")):
        parts = path.relative_to(KIT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield module, path.relative_to(KIT).as_posix(), path.read_text(encoding="utf-8")


T = TypeVar("T")


def with_nothing_allowed(allowed: dict, find: Callable[[], T]) -> T:
    """What ``find`` reports with the guard's ``allowed`` table emptied for the call (and restored after), so that a
    guard can check every allowance still covers a finding of its own and none outlives the code it excused."""
    kept = dict(allowed)
    allowed.clear()
    try:
        return find()
    finally:
        allowed.update(kept)


def scopes(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """Each function (and the module itself, as ``<module>``) with its name, innermost first for nested ones."""
    yield "<module>", tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node


def own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``scope`` that no function nested in it holds (each node is judged in one scope only)."""
    for child in ast.iter_child_nodes(scope):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and child is not scope:
            if isinstance(child, ast.Lambda):
                yield from ast.walk(child)
            continue
        yield child
        yield from own_nodes(child)


def name_of(node: ast.AST) -> str | None:
    """The name an expression goes by: ``x``, ``o.x``, ``d["x"]``, ``d.get("x")``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
            node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def words(name: str) -> set[str]:
    """The ``_``-separated words of a name, lower case: ``detectable_limit`` -> {detectable, limit}."""
    return {w for w in name.lower().split("_") if w}


def derived(scope: ast.AST, watched: Callable[[ast.AST, set[str]], bool]) -> set[str]:
    """The local names of ``scope`` assigned (directly, by ``for``, or by ``with ... as``) from an expression
    ``watched`` finds, given the names found so far: ``text = str(exc)`` makes ``text`` one, and a name assigned
    from it another, to a fixed point."""
    found: set[str] = set()
    pairs: list[tuple[ast.AST, ast.AST]] = []
    for node in own_nodes(scope):
        if isinstance(node, ast.Assign):
            pairs += [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            pairs.append((node.target, node.value))
        elif isinstance(node, ast.NamedExpr):
            pairs.append((node.target, node.value))
        elif isinstance(node, (ast.For, ast.comprehension)):
            pairs.append((node.target, node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs.append((node.optional_vars, node.context_expr))
    pairs = [pair for target, value in pairs for pair in _unpacked(target, value)]
    while True:
        more = {t.id for target, value in pairs for t in _bound_names(target)
                if t.id not in found and watched(value, found)}
        if not more:
            return found
        found |= more


def _unpacked(target: ast.AST, value: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """``a, b = x, y`` as ``a = x`` and ``b = y``; any other assignment as it is."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and \
            len(target.elts) == len(value.elts) and not any(isinstance(e, ast.Starred) for e in target.elts):
        return [p for t, v in zip(target.elts, value.elts) for p in _unpacked(t, v)]
    return [(target, value)]


def _bound_names(target: ast.AST) -> list[ast.Name]:
    """The names an assignment's target binds: ``x``, ``a, *b``; not ``o.x`` or ``d[k]``, which bind no name."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _bound_names(e)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def mentions(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` reads any of the local ``names``."""
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of ``tree``'s docstring constants: a docstring may name a file or a word without using it."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out
