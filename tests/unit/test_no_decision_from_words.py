"""No decision from the kit's own words: a guard over kit/'s syntax tree.

The kit writes its messages, reasons and failure lines for people. A reader that decides something by matching
those words (``reason.startswith("turned off")``, a regex over a result file's bytes) breaks silently the day the
words change, and no test of the writer sees it. Decisions travel as typed fields instead (a kind, an enum, a
status), and this test finds the word-matching by construction, not by a list of phrases:

- a ``startswith``/``endswith``/``split``/``rsplit``/``partition``/``rpartition`` call, or a regex call
  (``re.search(p, x)``, ``PATTERN.match(x)``), whose subject is named like kit-written text: a variable,
  attribute, or dict key one of whose ``_``-separated words is in ``TEXT_WORDS`` (``message``, ``reason``,
  ``why``, ``drift_skipped``, ...), seen through ``(x or "")``, ``str(x)``, ``x.lower()``, ``d.get("why")``;
- a regex call whose subject is a file's raw contents (``path.read_text()``, ``store.read_tail(...)``): a record
  the kit wrote is read as a record (its JSON field), never searched.

The few readers that must read words (records written before their fields existed, formats the kit does not
write) are listed in ``ALLOWED``, each with why; the planted cases below prove the guard fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

KIT = Path(__file__).resolve().parents[2] / "kit"
# The words kit-written text goes by, in the kit's records and messages. Not ``text`` or ``line``: they name any
# text, most of it read to be shown (escaped, wrapped) or written by other programs (/proc, git, TOML).
TEXT_WORDS = frozenset({"message", "messages", "msg", "reason", "reasons", "why", "detail", "details", "skipped",
                        "remedy", "note", "notes", "failure", "failures", "words", "said", "says", "explanation",
                        "error"})
STRING_TESTS = frozenset({"startswith", "endswith", "split", "rsplit", "partition", "rpartition"})
REGEX_CALLS = frozenset({"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"})
RAW_READS = frozenset({"read_text", "read_bytes", "read_tail", "read", "readlines", "decode"})
# (module, function): why it may read words. Keep it short: each entry is a reader of text no typed field holds.
ALLOWED: dict[tuple[str, str], str] = {
    ("kit.core.records.records", "drift_left_out"):
        "LEGACY: a case result written before results carried drift_off says why its drift test was left out only "
        "in drift_skipped's words; its kit's wording is frozen there",
    ("kit.core.verdict.failure", "clause"):
        "LEGACY: a failure read from an older record's line (kit.core.verdict.legacy) has only its words; its "
        "clause is that line less its prompt, for display, deciding nothing",
    ("kit.run.warmkernels", "warm_holder"):
        "an external format: the kernel's /proc/<pid>/fdinfo, which says whether a file lock is held",
    ("kit.run.zygote", "confinement"):
        "an external format: the kernel's /proc/<pid>/limits, a process's resource limits as a table",
}


def _subject_name(node: ast.AST) -> str | None:
    """The name a call's subject goes by: ``x``, ``o.x``, ``d["x"]``, ``d.get("x")``, through ``(x or "")``,
    ``str(x)`` and string methods that keep the text (``x.lower()``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.BoolOp):
        return next((n for n in map(_subject_name, node.values) if n and _is_text(n)), None)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            return node.args[0].value
        if isinstance(func, ast.Attribute) and func.attr in {"lower", "upper", "strip", "lstrip", "rstrip", "casefold"}:
            return _subject_name(func.value)
        if isinstance(func, ast.Name) and func.id == "str" and node.args:
            return _subject_name(node.args[0])
    return None


def _is_text(name: str) -> bool:
    return any(word in TEXT_WORDS for word in name.lower().split("_"))


def _raw_read(node: ast.AST) -> bool:
    """Whether ``node`` is a file's contents as read, unparsed."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RAW_READS \
        and node.func.attr != "decode" or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                                           and node.func.attr == "decode" and _raw_read(node.func.value))


def _regex_subject(call: ast.Call) -> ast.AST | None:
    """The text a regex call searches: ``re.f(pattern, subject)`` or ``COMPILED.f(subject)``."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in REGEX_CALLS):
        return None
    if isinstance(func.value, ast.Name) and func.value.id == "re":
        return call.args[-1] if func.attr in {"sub", "subn"} and len(call.args) >= 3 else \
            call.args[1] if len(call.args) >= 2 else None
    if isinstance(func.value, ast.Name) and func.value.id.isupper() or (
            isinstance(func.value, ast.Name) and func.value.id.startswith("_") and func.value.id[1:].isupper()):
        return call.args[-1] if func.attr in {"sub", "subn"} and len(call.args) >= 2 else \
            call.args[0] if call.args else None
    return None


def findings(source: str, module: str) -> list[tuple[str, str, int, str]]:
    """(module, function, line, what) for each decision taken from words in ``source``."""
    tree = ast.parse(source)
    out = []
    for func, call in _calls(tree):
        what = None
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr in STRING_TESTS:
            name = _subject_name(f.value)
            if name and _is_text(name) and not (isinstance(f.value, ast.Name) and f.value.id == "re"):
                what = f"{name}.{f.attr}(...)"
        subject = _regex_subject(call)
        if subject is not None:
            name = _subject_name(subject)
            if name and _is_text(name):
                what = f"a regex over {name}"
            elif _raw_read(subject):
                what = "a regex over a file's raw contents"
        if what and (module, func) not in ALLOWED:
            out.append((module, func, call.lineno, what))
    return out


def _calls(tree: ast.AST):
    """Every call with the name of the function (or '<module>') it sits in."""
    def walk(node, where):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else where
            if isinstance(child, ast.Call):
                yield where, child
            yield from walk(child, inner)
    yield from walk(tree, "<module>")


def _kit_findings() -> list[tuple[str, str, int, str]]:
    out = []
    for path in sorted(KIT.rglob("*.py")):
        module = ".".join(path.relative_to(KIT.parent).with_suffix("").parts)
        out += findings(path.read_text(encoding="utf-8"), module)
    return out


def test_the_kit_takes_no_decision_from_its_own_words():
    found = _kit_findings()
    assert found == [], "decisions taken from the kit's own words (carry a typed field):\n" + "\n".join(
        f"  {m}.{f}:{line}: {what}" for m, f, line, what in found)


def test_every_allowed_reader_still_exists():
    """An entry whose reader is gone is dropped, so the list stays the readers that need it."""
    used = {(m, f) for m, f, _, _ in _kit_findings_unfiltered()}
    assert set(ALLOWED) <= used, f"allowed but no longer reading words: {sorted(set(ALLOWED) - used)}"


def _kit_findings_unfiltered() -> list[tuple[str, str, int, str]]:
    kept = dict(ALLOWED)
    ALLOWED.clear()
    try:
        return _kit_findings()
    finally:
        ALLOWED.update(kept)


@pytest.mark.parametrize("planted, what", [
    ('def f(r):\n    return (r.drift_skipped or "").startswith("turned off")\n', "drift_skipped.startswith(...)"),
    ('def f(e):\n    return e.message.endswith("golden")\n', "message.endswith(...)"),
    ('def f(d):\n    return d.get("reason").split(": ")[1]\n', "reason.split(...)"),
    ('def f(why):\n    return "fix" in why.lower().partition(";")[0]\n', "why.partition(...)"),
    ('import re\ndef f(p):\n    return re.search(r"x", p.remedy)\n', "a regex over remedy"),
    ('import re\n_AT_END = re.compile(rb"v")\ndef f(store):\n    return _AT_END.search(store.read_tail("r", 9))\n',
     "a regex over a file's raw contents"),
])
def test_a_planted_decision_from_words_is_found(planted, what):
    (found,) = findings(planted, "kit.planted")
    assert (found[0], found[1], found[3]) == ("kit.planted", "f", what)


def test_typed_fields_and_external_formats_pass():
    clean = ('import re\n_N = re.compile("x")\n'
             'def f(r, path, name):\n'
             '    return r.kind is K.A, name.startswith("a"), path.suffix.endswith("json"), _N.match(name)\n')
    assert findings(clean, "kit.clean") == []
