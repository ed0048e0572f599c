"""No bound compared outside the rules: a guard over kit/'s syntax tree.

Whether an error is past its bound, and every figure a reader derives from the two, is one rule's
(kit.core.rules.rules: ``past``, ``ratio``, ``margin``, ``over_bound``): a copy written out elsewhere (``err >
bound``, ``max(e / b ...)``) misses the day the rule changes, and no test of the rule sees it. This finds the copies
by construction: in any module but the rules,

- an ordering comparison (``<``, ``<=``, ``>``, ``>=``) one of whose operands is, or computes from, a value named or
  attributed like a bound (a ``_``-word ``bound``/``bounds``/``limit``/``limits``/``threshold``/``thresholds``, as a
  variable, an attribute, a key or a ``.get`` key; or a local assigned from one);
- a call to ``min`` or ``max`` over such values.

What is named so but is no bound a verdict rests on (a confidence interval's upper end, a size limit) is listed in
``ALLOWED`` with why.
"""

from __future__ import annotations

import ast

import pytest

from support.astguard import derived, kit_modules, name_of, own_nodes, scopes, with_nothing_allowed, words

pytestmark = pytest.mark.unit

RULES = "kit.core.rules.rules"
BOUND_WORDS = frozenset({"bound", "bounds", "limit", "limits", "threshold", "thresholds"})
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
# (module, function): why it may compare a value so named. Each is a figure no verdict's bound decides.
ALLOWED: dict[tuple[str, str], str] = {
    ("kit.core.records.records", "bound_text"): "the span of a result's bounds, shown (min-max), deciding nothing",
    ("kit.cli.golden", "_golden_diff"): "golden diff's --threshold: which moved prompts to list, no verdict",
    ("kit.core.model.modelconfig", "check_prompts_fit"): "the model's context length, not a bound",
    ("kit.core.model.modelconfig", "check_prompt_tokens"): "the model's vocabulary size, not a bound",
    ("kit.core.model.modelconfig", "check_top_k_fits"): "the model's vocabulary size, not a bound",
    ("kit.core.verdict.decode", "check_continuations_fit"): "the model's context length, not a bound",
    ("kit.core.noise.localize", "leaves_noise"):
        "localize's own test (k x the clean run's difference at a point), which no calibration bound decides",
    ("kit.views.localize", "curve"): "localize's threshold drawn on a log axis (a floor under it), deciding nothing",
    ("kit.core.baselines.lineage", "entry_from_dict"): "a lineage entry's bounds checked positive, not an error",
    ("kit.history.rows", "bucket_rows"): "a stored bound's shape checked (a probability in (0, 1]), not an error",
    ("kit.gate.verify.safeio", "read_limited"): "a file's size against verify's read limit, not a bound",
    ("kit.run.devices", "room"): "a share's limit of cases at once, not a bound",
    ("kit.views.audit", "_short"): "a table cell's length limit, not a bound",
}


def _is_bound(node: ast.AST, local: set[str]) -> bool:
    """Whether ``node`` is, or computes from (arithmetic, a subscript, a conditional), a bound; a call's value is
    the callee's (``rules.ratio(err, bound)`` is the rule's figure, not the bound), but a bound's own values are
    bounds (``bounds.values()``, ``bounds.get(k)``)."""
    if isinstance(node, ast.Name) and node.id in local:
        return True
    name = name_of(node)
    if name is not None and words(name) & BOUND_WORDS:
        return True
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("values", "items", "get", "copy"):
            return _is_bound(node.func.value, local) or bool(words(name_of(node) or "") & BOUND_WORDS)
        return False
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.IfExp, ast.BoolOp, ast.Subscript, ast.Attribute,
                         ast.GeneratorExp, ast.ListComp, ast.Starred)):
        return any(_is_bound(child.iter if isinstance(child, ast.comprehension) else child, local)
                   for child in ast.iter_child_nodes(node) if not isinstance(child, ast.expr_context))
    return False


def findings(source: str, module: str) -> list[tuple[str, str, int, str]]:
    """(module, function, line, what) for each bound compared in ``source`` outside the rules."""
    if module == RULES:
        return []
    tree = ast.parse(source)
    out = []
    for func, scope in scopes(tree):
        local = derived(scope, lambda value, found: _is_bound(value, found))
        for node in own_nodes(scope):
            what = None
            if isinstance(node, ast.Compare) and any(isinstance(op, ORDERING) for op in node.ops) and \
                    any(_is_bound(n, local) for n in [node.left, *node.comparators]):
                what = "a bound compared"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
                    and any(_is_bound(a, local) for a in node.args):
                what = f"{node.func.id}() over bounds"
            if what and (module, func) not in ALLOWED:
                out.append((module, func, node.lineno, what))
    return out


def _kit_findings() -> list[tuple[str, str, int, str]]:
    return [f for module, _, source in kit_modules() for f in findings(source, module)]


def test_no_bound_is_compared_outside_the_rules():
    found = _kit_findings()
    assert found == [], "bounds compared outside kit.core.rules.rules (ask the rule):\n" + "\n".join(
        f"  {m}.{f}:{line}: {what}" for m, f, line, what in found)


def test_every_allowed_comparison_still_exists():
    used = {(m, f) for m, f, _, _ in with_nothing_allowed(ALLOWED, _kit_findings)}
    assert set(ALLOWED) <= used, f"allowed but no longer comparing a bound: {sorted(set(ALLOWED) - used)}"


@pytest.mark.parametrize("planted, what", [
    ("def f(err, bound):\n    return err > bound\n", "a bound compared"),
    ("def f(s, b):\n    return s.max_err <= b.bound\n", "a bound compared"),
    ("def f(e, bounds, b):\n    return e / bounds[str(b)]['bound'] >= 1\n", "a bound compared"),
    ("def f(worst, spec):\n    return 1.0 < worst / spec.detectable_limit\n", "a bound compared"),
    ("def f(e, d):\n    return e > d.get('threshold', 0.1)\n", "a bound compared"),
    ("def f(e, case):\n    b = case.bound * 2\n    return e > b\n", "a bound compared"),
    ("def f(errs, bounds):\n    return max(e / b['bound'] for e, b in zip(errs, bounds))\n", "max() over bounds"),
    ("def f(rec):\n    return min(rec.bucket_bounds.values())\n", "min() over bounds"),
    ("def f(e, limit):\n    return e if e < limit else limit\n", "a bound compared"),
])
def test_a_planted_bound_comparison_is_found(planted, what):
    (found,) = findings(planted, "kit.planted")
    assert (found[0], found[1], found[3]) == ("kit.planted", "f", what)


def test_the_rules_and_their_callers_pass():
    clean = ("from kit.core.rules import rules\n"
             "def f(err, bound, n, items):\n"
             "    return rules.past(err, bound), rules.ratio(err, bound) > 1.5, n > 3, max(items), err == bound\n")
    assert findings(clean, "kit.clean") == []
    assert findings("def past(e, bound):\n    return e > bound\n", RULES) == []
