"""No module of the kit decides by a kind's word: a baseline-lineage kind is a BaselineKind and a bound's source a
BoundKind, compared as objects.

A word compared with a name is a third spelling waiting to drift: an entry whose kind is misspelt belongs to no
chain and is never superseded, a result whose bounds were "calibrated" reads as hand-set. The words live where the
kinds are defined and where JSON is read or written; this scan finds a comparison (==, !=, in, not in, is) with one
of those words anywhere else in kit/, and the planted snippets show it finds each shape it is meant to.
"""

from __future__ import annotations

import ast

import pytest

from kit.core.baselines.baselinekind import KINDS
from kit.core.records.records import BoundKind
from support import ROOT

pytestmark = pytest.mark.unit

# Every spelling a baseline kind has had, and every bound-source kind's word.
WORDS = frozenset({*(s for k in KINDS for s in (k.name, *k.spellings)), *(b.value for b in BoundKind)})
# Where the words may be compared: the modules that define the kinds and read or write their JSON.
ALLOWED = frozenset({"kit/core/baselines/baselinekind.py", "kit/core/baselines/lineage.py",
                     "kit/core/records/records.py"})


# A kind object's word taken out to compare (``CALIBRATION.name``, ``BoundKind.CALIBRATED.value``) is the same
# word by another road.
KIND_OBJECTS = frozenset({"EXACT_GOLDEN", "SEMANTIC_GOLDEN", "CALIBRATION", "HAND_SET_BOUND", "POWER",
                          "IN_KERNEL_REFERENCE", *(f"BoundKind.{b.name}" for b in BoundKind)})


def _words(node: ast.expr) -> list[str]:
    """The kind words a side of a comparison holds: a literal or a kind's word taken out of it, alone or in a
    tuple, list or set."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    found = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in WORDS]
    return found + [ast.unparse(i) for i in items if isinstance(i, ast.Attribute) and i.attr in ("name", "value")
                    and ast.unparse(i.value) in KIND_OBJECTS]


def compared_words(source: str) -> list[tuple[int, str]]:
    """(line, word) for each kind word compared in ``source``, in order."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            found += [(node.lineno, w) for side in (node.left, *node.comparators) for w in _words(side)]
        elif isinstance(node, ast.match_case):  # a `case "calibrated":` is a comparison too
            found += [(node.pattern.lineno, p.value.value) for p in ast.walk(node.pattern)
                      if isinstance(p, ast.MatchValue) and isinstance(p.value, ast.Constant)
                      and p.value.value in WORDS]
    return sorted(found)


def test_the_words_are_the_kinds_json_spellings():
    assert {"calibration", "exact-golden", "semantic-golden", "power", "exact golden"} <= WORDS
    assert {"calibrated", "hand-set", "exact"} <= WORDS


def test_no_module_of_the_kit_compares_a_kinds_word():
    found = []
    for path in sorted((ROOT / "kit").rglob("*.py")):
        shown = path.relative_to(ROOT).as_posix()
        if shown not in ALLOWED:
            found += [f"{shown}:{line}: compares {word!r}" for line, word in compared_words(path.read_text())]
    assert found == [], "compare the kind object (BaselineKind, BoundKind), not its word:\n" + "\n".join(found)


PLANTED = '''
def f(entry, source, kind):
    if entry.kind == "calibration":
        return 1
    if source.get("kind") != "calibrated":
        return 2
    if kind in ("hand-set", "exact"):
        return 3
    if "exact-golden" not in {kind}:
        return 4
    match kind:
        case "power":
            return 5
    if entry.kind != POWER.name or source["kind"] in (BoundKind.EXACT.value,):
        return 6
    if kind == "bucket" or kind in ("semantic", "other") or kind.name == "x":  # not kind words: never reported
        return 7
    return {"kind": "calibrated"}  # written, not compared: the JSON edge
'''


def test_the_scan_finds_each_planted_comparison_and_nothing_else():
    assert compared_words(PLANTED) == [(3, "calibration"), (5, "calibrated"), (7, "exact"), (7, "hand-set"),
                                       (9, "exact-golden"), (12, "power"),
                                       (14, "BoundKind.EXACT.value"), (14, "POWER.name")]
