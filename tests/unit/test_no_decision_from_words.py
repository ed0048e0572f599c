"""No decision from the kit's own words: a guard over kit/'s syntax tree.

The kit writes its messages, reasons and failure lines for people. A reader that decides something by matching
those words (``reason.startswith("turned off")``, a regex over a result file's bytes) breaks silently the day the
words change, and no test of the writer sees it. Decisions travel as typed fields instead (a kind, an enum, a
status), and this test finds the word-matching by construction, not by a list of phrases:

- any string operation on kit-written text or an error's words: a ``startswith``/``endswith``/``split`` (with a
  separator)/``partition``/``find``/``index``/``count`` call, a literal searched ``in`` it, a comparison
  (``==``, ``!=``, ``in``) with a literal, or a regex call (``re.search(p, x)``, ``PATTERN.match(x)``) over it;
- where the text is named like kit-written text (a variable, attribute, or dict key one of whose ``_``-separated
  words is in ``TEXT_WORDS``: ``message``, ``reason``, ``error``, ...), or is an error's words (``str(exc)``,
  ``repr(exc)``, ``f"{exc}"``, ``exc.args[0]``, ``traceback.format_exc()``, an exception an ``except ... as``
  caught), seen through ``(x or "")``, ``x.lower()``, ``d.get("why")`` and any local assigned from such text;
- a regex call whose subject is a file's raw contents (``path.read_text()``, ``store.read_tail(...)``): a record
  the kit wrote is read as a record (its JSON field), never searched.

The few readers that must read words (records written before their fields existed, formats the kit does not
write) are listed in ``ALLOWED``, each with why; the planted cases below prove the guard fails.
"""

from __future__ import annotations

import ast

import pytest

from support.astguard import derived, kit_modules, own_nodes, scopes, with_nothing_allowed

pytestmark = pytest.mark.unit

# The words kit-written text goes by, in the kit's records and messages. Not ``text`` or ``line``: they name any
# text, most of it read to be shown (escaped, wrapped) or written by other programs (/proc, git, TOML).
TEXT_WORDS = frozenset({"message", "messages", "msg", "reason", "reasons", "why", "detail", "details", "skipped",
                        "remedy", "note", "notes", "failure", "failures", "words", "said", "says", "explanation",
                        "error"})
STRING_TESTS = frozenset({"startswith", "endswith", "split", "rsplit", "partition", "rpartition", "find", "rfind",
                          "index", "rindex", "count", "__contains__"})
# String methods whose value is the same words, changed in case or spacing.
KEEP_TEXT = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "casefold", "title"})
REGEX_CALLS = frozenset({"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"})
RAW_READS = frozenset({"read_text", "read_bytes", "read_tail", "read", "readlines", "decode"})
# (module, function): why it may read words. Keep it short: each entry is a reader of text no typed field holds.
ALLOWED: dict[tuple[str, str], str] = {
    ("kit.core.records.records", "drift_left_out"):
        "LEGACY: a case result written before results carried drift_off says why its drift test was left out only "
        "in drift_skipped's words; its kit's wording is frozen there",
    ("kit.core.rules.failure", "clause"):
        "LEGACY: a failure read from an older record's line (kit.core.verdict.legacy) has only its words; its "
        "clause is that line less its prompt, for display, deciding nothing",
    ("kit.run.warmkernels", "warm_holder"):
        "an external format: the kernel's /proc/<pid>/fdinfo, which says whether a file lock is held",
    ("kit.run.zygote", "confinement"):
        "an external format: the kernel's /proc/<pid>/limits, a process's resource limits as a table",
    ("kit.descriptor.load", "load_descriptor"):
        "an external format: tomllib's syntax error, whose line the descriptor's one-line refusal names",
    ("kit.gate.executors.ray_executor", "_start_local"):
        "an external format: Ray raises a bare Exception for a node that did not come up in time, known by its words",
    ("kit.baselines.marks", "mark_bad"): "a person's reason (--reason) checked to be one line, not the kit's words",
    ("kit.core.baselines.lineageclaims", "reason_problem"):
        "a person's reason (--reason, --accept-looser) checked not to be the next flag, not the kit's words",
    ("kit.gate.parameters", "_magic_binds"): "an external format: a notebook cell's IPython magic and its arguments",
    ("kit.gate.verify.runcheck", "selected_cases"):
        "an external format: the command line a run recorded, its --case words",
    ("kit.run.warmkernels", "secret_looking"): "an external format: the words of an environment variable's name",
}


def _subject_name(node: ast.AST, local: frozenset[str] = frozenset(),
                  errors: frozenset[str] = frozenset()) -> str | None:
    """The name a call's subject goes by, when it is kit-written text or an error's words: ``x``, ``o.x``,
    ``d["x"]``, ``d.get("x")``, through ``(x or "")``, ``str(x)``, ``f"{x}"`` and string methods that keep the
    text (``x.lower()``); an error's words (``str(exc)``, ``repr(exc)``, ``exc.args[0]``, ``f"{exc}"``,
    ``traceback.format_exc()``, ``exc`` caught by an ``except ... as``); a local assigned from any of these."""
    if isinstance(node, ast.Name) and node.id in local:
        return node.id
    if isinstance(node, ast.Name):
        return node.id if _is_text(node.id) else None
    if isinstance(node, ast.Attribute):
        if node.attr == "args" and _is_error(node.value, errors):
            return f"{_error_name(node.value)}.args"
        return node.attr if _is_text(node.attr) else None
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.slice.value if _is_text(node.slice.value) else None
        return _subject_name(node.value, local, errors)  # exc.args[0], words.split()[1]
    if isinstance(node, ast.BoolOp):
        return next((n for n in (_subject_name(v, local, errors) for v in node.values) if n), None)
    if isinstance(node, ast.JoinedStr):
        return next((n for v in node.values if isinstance(v, ast.FormattedValue)
                     for n in [_subject_name(v.value, local, errors) or (
                         f"str({_error_name(v.value)})" if _is_error(v.value, errors) else None)] if n), None)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            return node.args[0].value if _is_text(node.args[0].value) else None
        if isinstance(func, ast.Attribute) and func.attr in KEEP_TEXT:
            return _subject_name(func.value, local, errors)
        if isinstance(func, ast.Name) and func.id in ("str", "repr", "format") and node.args:
            if _is_error(node.args[0], errors):
                return f"{func.id}({_error_name(node.args[0])})"
            return _subject_name(node.args[0], local, errors)
        if isinstance(func, ast.Attribute) and func.attr in ("format_exc", "format_exception", "format_exception_only"):
            return f"traceback.{func.attr}()"
        if isinstance(func, ast.Attribute) and func.attr == "join" and node.args:  # "".join(format_exception(...))
            return _subject_name(node.args[0], local, errors)
    return None


def _is_text(name: str) -> bool:
    return any(word in TEXT_WORDS for word in name.lower().split("_"))


def _is_error(node: ast.AST, errors: frozenset[str]) -> bool:
    """Whether ``node`` is an exception: a name an ``except ... as`` binds, or one named like an error."""
    return isinstance(node, ast.Name) and (node.id in errors or bool({"exc", "err", "exception", "error"} & set(
        node.id.lower().split("_"))))


def _error_name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else "exc"


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


def _literal(node: ast.AST) -> bool:
    """A string written in the code: ``"x"``, ``f"x{y}"``, or a tuple, list or set of them."""
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        return isinstance(node, ast.JoinedStr) or isinstance(node.value, str)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts) and all(map(_literal, node.elts))


def _compared(node: ast.Compare, local: frozenset[str], errors: frozenset[str]) -> str | None:
    """What a comparison decides from words: ``"x" in words``, ``words == "x"``, ``words in ("x", "y")``."""
    operands = [node.left, *node.comparators]
    for op, left, right in zip(node.ops, operands, operands[1:]):
        if isinstance(op, (ast.In, ast.NotIn)) and _literal(left) and not isinstance(left, (ast.Tuple, ast.List,
                                                                                          ast.Set)):
            name = _subject_name(right, local, errors)
            if name:
                return f"a literal {'in' if isinstance(op, ast.In) else 'not in'} {name}"
        if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
            for subject, other in ((left, right), (right, left)):
                if _literal(other) and not (isinstance(op, (ast.In, ast.NotIn)) and subject is right):
                    name = _subject_name(subject, local, errors)
                    if name:
                        return f"{name} compared with a literal"
    return None


def findings(source: str, module: str) -> list[tuple[str, str, int, str]]:
    """(module, function, line, what) for each decision taken from words in ``source``."""
    tree = ast.parse(source)
    out = []
    for func, scope in scopes(tree):
        errors = frozenset(h.name for h in own_nodes(scope) if isinstance(h, ast.ExceptHandler) and h.name)
        local = frozenset(derived(scope, lambda v, found, caught=errors: _subject_name(v, frozenset(found), caught)
                                  is not None))
        for node in own_nodes(scope):
            what = None
            if isinstance(node, ast.Compare):
                what = _compared(node, local, errors)
            elif isinstance(node, ast.Call):
                f = node.func
                # ``x.split()`` alone cuts at whitespace, to show words on one line, and decides nothing
                whitespace = f.attr in ("split", "rsplit") and not node.args and not node.keywords \
                    if isinstance(f, ast.Attribute) else False
                if isinstance(f, ast.Attribute) and f.attr in STRING_TESTS and not whitespace and \
                        not (isinstance(f.value, ast.Name) and f.value.id == "re"):
                    name = _subject_name(f.value, local, errors)
                    if name:
                        what = f"{name}.{f.attr}(...)"
                subject = _regex_subject(node)
                if subject is not None:
                    name = _subject_name(subject, local, errors)
                    if name:
                        what = f"a regex over {name}"
                    elif _raw_read(subject):
                        what = "a regex over a file's raw contents"
            if what and (module, func) not in ALLOWED:
                out.append((module, func, node.lineno, what))
    return out


def _kit_findings() -> list[tuple[str, str, int, str]]:
    return [f for module, _, source in kit_modules() for f in findings(source, module)]


def test_the_kit_takes_no_decision_from_its_own_words():
    found = _kit_findings()
    assert found == [], "decisions taken from the kit's own words (carry a typed field):\n" + "\n".join(
        f"  {m}.{f}:{line}: {what}" for m, f, line, what in found)


def test_every_allowed_reader_still_exists():
    """An entry whose reader is gone is dropped, so the list stays the readers that need it."""
    used = {(m, f) for m, f, _, _ in _kit_findings_unfiltered()}
    assert set(ALLOWED) <= used, f"allowed but no longer reading words: {sorted(set(ALLOWED) - used)}"


def _kit_findings_unfiltered() -> list[tuple[str, str, int, str]]:
    return with_nothing_allowed(ALLOWED, _kit_findings)


@pytest.mark.parametrize("planted, what", [
    ('def f(r):\n    return (r.drift_skipped or "").startswith("turned off")\n', "drift_skipped.startswith(...)"),
    ('def f(e):\n    return e.message.endswith("golden")\n', "message.endswith(...)"),
    ('def f(d):\n    return d.get("reason").split(": ")[1]\n', "reason.split(...)"),
    ('def f(why):\n    return "fix" in why.lower().partition(";")[0]\n', "why.partition(...)"),
    ('import re\ndef f(p):\n    return re.search(r"x", p.remedy)\n', "a regex over remedy"),
    ('import re\n_AT_END = re.compile(rb"v")\ndef f(store):\n    return _AT_END.search(store.read_tail("r", 9))\n',
     "a regex over a file's raw contents"),
    # an error's words, by any string operation
    ('def f(r):\n    return "out of memory" in r.error\n', "a literal in error"),
    ('def f():\n    try:\n        g()\n    except OSError as e:\n        return "denied" in str(e)\n',
     "a literal in str(e)"),
    ('def f(r):\n    return r.reason == "no golden"\n', "reason compared with a literal"),
    ('def f(result):\n    return result.error not in ("timed out", "killed")\n', "error compared with a literal"),
    ('def f(r):\n    return r.error.find("CUDA") >= 0\n', "error.find(...)"),
    ('def f(r):\n    return r.notes[0].count("retried")\n', "notes.count(...)"),
    ('def f(r):\n    text = r.message.lower()\n    return "nan" in text\n', "a literal in text"),
    ('def f():\n    try:\n        g()\n    except ValueError as problem:\n        said = f"{problem}"\n'
     '        return said.startswith("bad")\n', "said.startswith(...)"),
    ('def f(exc):\n    return exc.args[0] == "gone"\n', "exc.args compared with a literal"),
    ('def f(r):\n    return r.error.split(":")[0] == "executor failed"\n', "error.split(...)"),
    ('import traceback\ndef f():\n    return "Killed" in traceback.format_exc()\n',
     "a literal in traceback.format_exc()"),
])
def test_a_planted_decision_from_words_is_found(planted, what):
    found = findings(planted, "kit.planted")
    assert found and {(m, fn) for m, fn, _, _ in found} == {("kit.planted", "f")}, found
    assert what in [w for _, _, _, w in found], found


def test_typed_fields_and_external_formats_pass():
    clean = ('import re\n_N = re.compile("x")\n'
             'def f(r, path, name):\n'
             '    return r.kind is K.A, name.startswith("a"), path.suffix.endswith("json"), _N.match(name), \\\n'
             '        r.error is None, r.reason in reasons_by_case, " ".join(str(exc).split()), r.status == "passed"\n')
    assert findings(clean, "kit.clean") == []
