"""One enumeration style: a guard over kit/'s syntax tree.

Every closed set of names the kit decides on or branches on is an ``enum.StrEnum``, defined once
(docs/architecture.md, "Enumerations: one style"). Its members are strings, so records, JSON and the kernels of
other environments read and write the same words as before; a second spelling of the set (a group of constants
and a tuple of them, a ``Literal`` alias, a tuple of the words beside the enum) is a list that drifts the day one
of them gains a name. This finds, in any module of the kit:

- an ``Enum`` with string members that is not a ``StrEnum`` (``class K(str, Enum)``, ``class K(Enum)``);
- a module-level ``Literal[...]`` alias (``Direction = Literal["up", "down"]``);
- a module-level tuple, list, set or frozenset of two or more names, each a module-level constant of that module
  bound to a string (``PASSED, FAILED = "passed", "failed"`` then ``STATUSES = (PASSED, FAILED)``);
- a module-level assignment that binds two or more names to string literals at once (``PASSED, FAILED = "passed",
  "failed"``, on one line or over several): written together, they are one set's words, whether or not a tuple of
  them follows; a pair that is no set (an environment variable's name and its default number) binds more than
  strings and is not this;
- a tuple, list, set or frozenset of string literals, or a ``Literal[...]``, whose words are all the values of one
  StrEnum of the kit: the enum's set spelled again;
- two or more string constants of one module, bound one per line, compared (``==``, ``!=``, ``in``, ``not in``),
  in that module or any module importing them, with one field of a class that module defines (``row.standing ==
  MATCH`` here, ``row.standing in (MISSING, FALLBACK)`` there, ``standing`` a field of the module's own record):
  the field's values are a closed set, spelled as loose constants. A constant compared with a name that is no
  field of its module's classes (a file name with ``path.name``) is not this.

A tuple of words that is no closed set the kit branches on (a record format's keys, environment variables, file
patterns) is none of these: its words are literals and no enum holds them.
"""

from __future__ import annotations

import ast
from collections import defaultdict

import pytest

from support.astguard import kit_modules, name_of, with_nothing_allowed

pytestmark = pytest.mark.unit

COLLECTIONS = ("frozenset", "set", "tuple")
# (module, name): why this module-level group of constants is no closed set for a StrEnum.
ALLOWED: dict[tuple[str, str], str] = {
    ("kit.core.records.rundir", "CASE_FILES"): "the files a case leaves (suffixes of its name), moved together",
    ("kit.core.records.rundir", "SEALED"): "the files of a case a manifest seals by digest",
    ("kit.core.noise.calibration", "FORMATS"): "the record formats this kit reads, each a constant it also writes",
    ("kit.gate.verify.claims", "V3, V4"): "two hardware classes a CPU's kernels may leave, of an open set (every "
                                          "x86-64 level, another machine's own name, each GPU card)",
    ("kit.views.history", "RELEASE, BASELINE, STEP"): "the colours of the history plot's three kinds of line: "
                                                     "values drawn, never words the kit decides on",
}


def _is_name(node: ast.AST, name: str) -> bool:
    """``name`` or ``<module>.name``."""
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def _strings_of_literal(node: ast.AST) -> list[str] | None:
    """The words of ``Literal["a", "b"]``; None for anything else."""
    if not (isinstance(node, ast.Subscript) and _is_name(node.value, "Literal")):
        return None
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _elements(node: ast.AST) -> list[ast.expr] | None:
    """The elements of a tuple, list or set display, or of ``frozenset({...})`` / ``set((...))``; None otherwise."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return list(node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in COLLECTIONS and \
            len(node.args) == 1 and not node.keywords:
        return _elements(node.args[0])
    return None


def _module_assignments(tree: ast.Module) -> list[tuple[str, ast.expr, int]]:
    """(name, value, line) of each module-level assignment of one name, ``a, b = x, y`` unpacked."""
    out = []
    for node in tree.body:
        targets, value = ([node.target], node.value) if isinstance(node, ast.AnnAssign) else \
            (node.targets, node.value) if isinstance(node, ast.Assign) else ([], None)
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                out.append((target.id, value, node.lineno))
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                    len(target.elts) == len(value.elts):
                out += [(t.id, v, node.lineno) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name)]
    return out


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _strings_bound_at_once(tree: ast.Module) -> list[tuple[str, int]]:
    """(names, line) of each module-level ``A, B = "a", "b"``: two or more names bound to string literals by one
    unpacking, the names written ``A, B`` as the source has them."""
    out = []
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) and \
                    len(target.elts) == len(node.value.elts) >= 2 and \
                    all(isinstance(t, ast.Name) for t in target.elts) and all(_is_str(v) for v in node.value.elts):
                out.append((", ".join(t.id for t in target.elts), node.lineno))  # type: ignore[attr-defined]
    return out


def str_enums(tree: ast.Module) -> dict[str, frozenset[str]]:
    """Each StrEnum ``tree`` defines (at any depth), by name, with its members' values."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(_is_name(b, "StrEnum") for b in node.bases):
            out[node.name] = frozenset(s.value.value for s in node.body
                                       if isinstance(s, ast.Assign) and _is_str(s.value))
    return out


def _enum_spelled_again(words: list[str], enums: dict[str, frozenset[str]]) -> str | None:
    """The StrEnum whose values ``words`` (two or more) all are; None if none."""
    if len(words) < 2:
        return None
    return next((name for name, values in enums.items() if set(words) <= values), None)


def findings(source: str, module: str, enums: dict[str, frozenset[str]]) -> list[tuple[str, str, int, str]]:
    """(module, name, line, what) for each closed set of names spelled otherwise than one StrEnum in ``source``;
    ``enums`` are the kit's StrEnums (name: values), whose values spelled again are found too. ``name`` is the
    class, the module-level name, or for a set spelled again where it is used, what spells it."""
    tree = ast.parse(source)
    out = []
    aliases = {id(value) for _, value, _ in _module_assignments(tree)}  # found below, as an alias
    literal_words = {id(n.slice) for n in ast.walk(tree) if _strings_of_literal(n) is not None}  # found as a Literal
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(_is_name(b, "Enum") for b in node.bases) and \
                any(isinstance(s, ast.Assign) and _is_str(s.value) for s in node.body):
            out.append((module, node.name, node.lineno, "an Enum of strings that is not a StrEnum"))
        elif isinstance(node, ast.Subscript) and id(node) not in aliases:
            again = _enum_spelled_again(_strings_of_literal(node) or [], enums)
            if again:
                out.append((module, "Literal", node.lineno, f"a Literal of {again}'s values"))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in literal_words and \
                all(_is_str(e) for e in node.elts):
            again = _enum_spelled_again([e.value for e in node.elts], enums)  # type: ignore[attr-defined]
            if again:
                out.append((module, type(node).__name__.lower(), node.lineno, f"{again}'s values listed again"))
    assigned = _module_assignments(tree)
    constants = {name for name, value, _ in assigned if _is_str(value)}
    for name, value, line in assigned:
        elements = _elements(value)
        if _strings_of_literal(value) is not None:
            out.append((module, name, line, "a module-level Literal alias"))
        elif elements is not None and len(elements) >= 2 and (module, name) not in ALLOWED and \
                all(isinstance(e, ast.Name) and e.id in constants for e in elements):
            out.append((module, name, line, "a group of string constants"))
    out += [(module, names, line, "string constants bound at once") for names, line in _strings_bound_at_once(tree)
            if (module, names) not in ALLOWED]
    return sorted(out, key=lambda f: f[2])


def _string_constants(tree: ast.Module) -> dict[str, int]:
    """Each module-level name bound to a string literal (alone, or unpacked beside others), with its line."""
    return {name: line for name, value, line in _module_assignments(tree) if _is_str(value)}


def _fields(tree: ast.Module) -> set[str]:
    """The names annotated in the body of a class the module defines: a dataclass's or a record's fields."""
    return {s.target.id for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def _imported(tree: ast.Module, modules: set[str]) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """What a module imports, anywhere in it: (local name -> (module, name) of each name taken from a module,
    local name -> module of each module of ``modules`` it names)."""
    names: dict[str, tuple[str, str]] = {}
    named_modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                local, whole = alias.asname or alias.name, f"{node.module}.{alias.name}"
                if whole in modules:
                    named_modules[local] = whole
                else:
                    names[local] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            named_modules.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
    return names, named_modules


def compared_as_one_set(sources: list[tuple[str, str]]) -> list[tuple[str, str, int, str]]:
    """(module, names, line, what) for each group of two or more string constants of one module that ``sources``
    ((module, source) of every module) compare with the same field of a class that module defines: a closed set
    written one constant per line. ``names`` in the order the module binds them, ``line`` the first's."""
    trees = {module: ast.parse(source) for module, source in sources}
    constants = {module: _string_constants(tree) for module, tree in trees.items()}
    imported = {module: _imported(tree, set(trees)) for module, tree in trees.items()}

    def constant(module: str | None, name: str, hops: int = 0) -> tuple[str, str] | None:
        """(defining module, name) of the string constant ``name`` means in ``module``, through re-exports."""
        if module in constants and name in constants[module]:
            return module, name
        taken = imported[module][0].get(name) if module in imported and hops < 8 else None
        return constant(*taken, hops + 1) if taken else None

    def named(module: str, node: ast.AST) -> tuple[str, str] | None:
        if isinstance(node, ast.Name):
            return constant(module, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return constant(imported[module][1].get(node.value.id), node.attr)
        return None

    compared: dict[tuple[str, str], set[str]] = defaultdict(set)  # (defining module, field) -> its constants
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            for left, op, right in zip([node.left, *node.comparators], node.ops, node.comparators):
                if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                    continue
                listed = isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set))
                for subject, values in ((left, right.elts if listed else [right]), (right, [left])):
                    field = name_of(subject)
                    if field is None or named(module, subject):
                        continue
                    for found in filter(None, (named(module, v) for v in values)):
                        compared[(found[0], field)].add(found[1])
    out = []
    for (module, field), names in sorted(compared.items()):
        if len(names) >= 2 and field in _fields(trees[module]):
            order = sorted(names, key=constants[module].__getitem__)
            out.append((module, ", ".join(order), constants[module][order[0]],
                        f"string constants compared with its field {field} as one set"))
    return [f for f in out if (f[0], f[1]) not in ALLOWED]


def _kit() -> list[tuple[str, str, str]]:
    return list(kit_modules())


def _kit_enums(modules: list[tuple[str, str, str]]) -> dict[str, frozenset[str]]:
    enums: dict[str, frozenset[str]] = {}
    for module, _, source in modules:
        enums.update({f"{module}.{name}": values for name, values in str_enums(ast.parse(source)).items()})
    return enums


def _kit_findings() -> list[tuple[str, str, int, str]]:
    modules = _kit()
    enums = _kit_enums(modules)
    return [f for module, _, source in modules for f in findings(source, module, enums)] + \
        compared_as_one_set([(module, source) for module, _, source in modules])


def test_every_closed_set_of_names_is_one_str_enum():
    found = _kit_findings()
    assert found == [], "closed sets of names spelled otherwise than one StrEnum (make it one):\n" + "\n".join(
        f"  {m}:{line}: {name}: {what}" for m, name, line, what in found)


def test_every_allowed_group_still_exists():
    used = {(m, n) for m, n, _, _ in with_nothing_allowed(ALLOWED, _kit_findings)}
    assert set(ALLOWED) <= used, f"allowed but no longer a group of constants: {sorted(set(ALLOWED) - used)}"


def test_the_kit_has_str_enums_to_compare_against():
    enums = _kit_enums(_kit())
    assert "kit.core.records.records.Status" in enums and "passed" in enums["kit.core.records.records.Status"]


PLANTED_ENUM = {"kit.planted.Side": frozenset({"left", "right"})}


@pytest.mark.parametrize("planted, name, what", [
    ("from enum import Enum\nclass Kind(str, Enum):\n    A = 'a'\n", "Kind",
     "an Enum of strings that is not a StrEnum"),
    ("import enum\nclass Kind(enum.Enum):\n    A = 'a'\n    B = 'b'\n", "Kind",
     "an Enum of strings that is not a StrEnum"),
    ("from typing import Literal\nDirection = Literal['up', 'down']\n", "Direction", "a module-level Literal alias"),
    ("import typing\nRule: typing.TypeAlias = typing.Literal['a', 'b']\n", "Rule", "a module-level Literal alias"),
    ("PASSED = 'passed'\nFAILED = 'failed'\nSTATUSES = (PASSED, FAILED)\n", "STATUSES", "a group of string constants"),
    ("A = 'a'\nB = 'b'\nKINDS = frozenset({A, B})\n", "KINDS", "a group of string constants"),
    ("PASSED, FAILED = 'passed', 'failed'\n", "PASSED, FAILED", "string constants bound at once"),
    ("HIDDEN, DEEP, OUTSIDE = (\n    'hidden', 'deep',\n    'outside')\n", "HIDDEN, DEEP, OUTSIDE",
     "string constants bound at once"),
    ("[UP, DOWN] = ['up', 'down']\n", "UP, DOWN", "string constants bound at once"),
    ("SIDES = ('left', 'right')\n", "tuple", "kit.planted.Side's values listed again"),
    ("def f(p, side):\n    p.add_argument('--side', choices=['right', 'left'])\n", "list",
     "kit.planted.Side's values listed again"),
    ("def f(side):\n    return side in {'left', 'right'}\n", "set", "kit.planted.Side's values listed again"),
    ("from typing import Literal\nfrom pydantic import BaseModel\n"
     "class O(BaseModel):\n    side: Literal['right', 'left'] = 'right'\n", "Literal",
     "a Literal of kit.planted.Side's values"),
])
def test_a_planted_second_spelling_is_found(planted, name, what):
    (found,) = findings(planted, "kit.planted", PLANTED_ENUM)
    assert (found[0], found[1], found[3]) == ("kit.planted", name, what)


def test_constants_bound_at_once_then_listed_are_found_as_both():
    planted = "PASSED, FAILED = 'passed', 'failed'\nSTATUSES = (PASSED, FAILED)\n"
    assert [(name, line, what) for _, name, line, what in findings(planted, "kit.planted", PLANTED_ENUM)] == [
        ("PASSED, FAILED", 1, "string constants bound at once"), ("STATUSES", 2, "a group of string constants")]


def test_an_allowed_binding_at_once_passes():
    assert findings('RELEASE, BASELINE, STEP = "#3070b0", "#d08020", "#c03030"\n', "kit.views.history", {}) == []
    assert findings('RELEASE, BASELINE, STEP = "#3070b0", "#d08020", "#c03030"\n', "kit.planted", {}) != []


def test_a_str_enum_and_lists_that_are_no_closed_set_pass():
    clean = ("import enum\nfrom enum import StrEnum\nfrom typing import Literal\n"
             "class Side(StrEnum):\n    LEFT = 'left'\n    RIGHT = 'right'\n"
             "class Code(enum.IntEnum):\n    OK = 0\n"
             "KEYS = ('format', 'reason', 'marked_at')\n"  # a record format's keys: literals, no enum holds them
             "SUMMARY = 'summary.html'\nFILES = (SUMMARY, other.NAME)\n"  # not every element a constant of its own
             "LIMIT = 3\nSIZES = (LIMIT, 4)\n"
             "GRACE_ENV, GRACE_S = 'PARITY_KIT_GRACE_S', 30.0\n"  # a variable's name and its default: not all strings
             "SUMMARY, EVIDENCE = rundir.SUMMARY, rundir.EVIDENCE\n"  # names bound to another module's constants
             "def g():\n    low, high = 'a', 'b'\n    return low + high\n"  # local names: no module-level set
             "def f(x: Literal['a', 'b']) -> None:\n    return None\n")  # a one-off Literal, not an alias
    assert findings(clean, "kit.clean", {"kit.clean.Side": frozenset({"left", "right"})}) == []


# A record's field and two of its words, one constant per line, one of them compared in the module itself.
PLANTED_ROWS = ("from dataclasses import dataclass\n"
                "MATCH = 'matches'\n"
                "MISSING = 'missing'  # none here\n"
                "@dataclass\nclass Row:\n    standing: str\n"
                "def gaps(rows):\n    return [r for r in rows if r.standing == MISSING]\n")


@pytest.mark.parametrize("user", [
    "from kit.planted.rows import MATCH, MISSING\ndef f(row):\n    return row.standing in (MATCH, MISSING)\n",
    "from kit.planted import rows\ndef f(row):\n    return rows.MATCH != row.standing\n",
    "import kit.planted.rows as rows\ndef f(row):\n    return row['standing'] == rows.MATCH\n",
    "from kit.planted.again import MATCH\ndef f(row):\n    standing = row.standing\n    return standing == MATCH\n",
])
def test_constants_compared_with_one_field_of_their_module_are_found(user):
    modules = [("kit.planted.rows", PLANTED_ROWS), ("kit.planted.again", "from kit.planted.rows import MATCH\n"),
               ("kit.planted.use", user)]
    assert compared_as_one_set(modules) == [
        ("kit.planted.rows", "MATCH, MISSING", 2, "string constants compared with its field standing as one set")]


@pytest.mark.parametrize("user", [
    "from kit.planted.rows import MATCH\ndef f(row):\n    return row.kind == MATCH\n",  # another field
    "from kit.planted.rows import MATCH, MISSING\ndef f():\n    return MATCH == MISSING\n",  # no field at all
    "from kit.planted.rows import MATCH\ndef f(row):\n    return row.standing is MATCH or row.standing < MATCH\n",
    "from kit.planted.files import RESULT\ndef f(p):\n    return p.name == RESULT\n",
])
def test_constants_compared_with_no_field_of_their_module_as_one_set_pass(user):
    # File names compared with a path's name: ``name`` is a field of some class, not of the module that names them.
    files = "RESULT = 'result.json'\nMANIFEST = 'manifest.json'\ndef f(p):\n    return p.name == MANIFEST\n"
    record = "from dataclasses import dataclass\n@dataclass\nclass Entry:\n    name: str\n"
    modules = [("kit.planted.rows", PLANTED_ROWS), ("kit.planted.files", files), ("kit.planted.entry", record),
               ("kit.planted.use", user)]
    assert compared_as_one_set(modules) == []


def test_an_allowed_group_compared_as_one_set_passes(monkeypatch):
    modules = [("kit.planted.rows", PLANTED_ROWS.replace("== MISSING", "in (MATCH, MISSING)"))]
    assert [f[1] for f in compared_as_one_set(modules)] == ["MATCH, MISSING"]
    monkeypatch.setitem(ALLOWED, ("kit.planted.rows", "MATCH, MISSING"), "two words of an open set")
    assert compared_as_one_set(modules) == []
