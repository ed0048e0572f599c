"""The verdict's rules return typed failures whose words are made from their fields, and no reader parses them."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from kit.core.records.records import CaseResult, PromptScore, RepeatSpread
from kit.core.verdict.triage import TriageClass, classify
from kit.core.rules import rules
from kit.core.verdict import WINNER_GAP_FACTOR, Failure, Kind, failures_of, legacy

pytestmark = pytest.mark.unit

L = math.log
GOLDEN = ((5, L(0.6)), (7, L(0.3)), (9, L(0.1)))
KIT = Path(__file__).resolve().parents[3] / "kit"


def test_bound_for_a_bucket_overrides_the_case_bound_and_a_step_bound_the_buckets():
    assert rules.bound_for(128, 0.05, {"128": 0.02}) == 0.02 and rules.bound_for(256, 0.05, {"128": 0.02}) == 0.05
    assert rules.step_bound(2, 0.05, {"2": 0.09}) == 0.09 and rules.step_bound(3, 0.05, {"2": 0.09}) == 0.05
    assert rules.step_bound(1, None, None) is None


def test_over_bound_is_typed_and_says_the_line_the_kit_always_wrote():
    f = rules.over_bound("p-01", 128, 0.05, 0.04)
    assert (f.kind, f.prompt, f.bucket, f.step, f.value, f.bound) == (Kind.OVER_BOUND, "p-01", 128, None, 0.05, 0.04)
    assert str(f) == f.text == "p-01: max probability error 0.05 > bound 0.04 (bucket 128)"
    assert rules.over_bound("p-01", 128, 0.04, 0.04) is None and rules.over_bound("p", 1, 0.5, None) is None
    assert rules.over_bound("p", 1, math.nan, 0.01) is None  # unscorable: the non-finite rule says why
    step = rules.over_bound("p-01", 128, 0.05, 0.04, step=3)
    assert step.text == "p-01: decode step 3: max probability error 0.05 > bound 0.04 (bucket 128)"
    assert rules.over_bound("p", 2, 0.05, 0.04, decode=True).text == "p: decode: max probability error 0.05 > " \
                                                                       "bound 0.04 (bucket 2)"


@pytest.mark.parametrize("gap, err, expected", [
    (0.02, 0.01, True), (0.0200001, 0.01, False), (0.0, 0.0, True), (0.1, math.inf, None), (0.1, math.nan, None),
    (math.nan, 0.1, None), (None, 0.1, None), ("0.1", 0.1, None), (True, 0.1, None)])
def test_near_tie_is_one_rule_with_an_undecided_answer_for_what_is_not_a_finite_number(gap, err, expected):
    assert rules.near_tie(gap, err) is expected
    assert WINNER_GAP_FACTOR == 2.0


def test_winner_change_outside_a_near_tie_and_a_greedy_token_outside_the_golden():
    gap, failures = rules.winner("p", 1, GOLDEN, ((7, L(0.6)), (5, L(0.3))), 0.01)
    assert gap == pytest.approx(0.3) and [f.kind for f in failures] == [Kind.WINNER_CHANGE]
    assert failures[0].text == ("p: winner changed outside a near-tie: golden top token 5 leads backend greedy token "
                                "7 by 0.3 > 2 x max error 0.01")
    _, inside = rules.winner("p", 1, GOLDEN, ((7, L(0.6)), (5, L(0.3))), 0.2)
    assert inside == []
    _, outside = rules.winner("p", 1, GOLDEN, ((11, L(0.6)), (5, L(0.3))), 0.01)
    assert [f.kind for f in outside] == [Kind.GREEDY_OUTSIDE_TOP, Kind.WINNER_CHANGE]
    assert outside[0].text == "p: backend greedy token 11 is not in the golden top-3"


def test_plausibility_missing_tokens_and_exact():
    nan = rules.non_finite("p", 1, ((5, math.nan),))
    assert nan.kind is Kind.NON_FINITE and nan.text == "p: non-finite logprob nan for token 5 from the backend"
    assert rules.non_finite("p", 1, ()).text == "p: non-finite logprob nan for token -1 from the backend"
    assert rules.non_finite("p", 1, ((5, -0.1),)) is None
    missing = rules.missing_tokens("p", 1, GOLDEN, ((5, L(0.6)),))
    assert [(f.kind, f.golden_token) for f in missing] == [(Kind.MISSING_TOKEN, 7), (Kind.MISSING_TOKEN, 9)]
    assert missing[0].text == "p: golden token 7 is missing from the backend's top-1"
    short = rules.exact("p", 1, GOLDEN, GOLDEN[:2])
    assert short.kind is Kind.NOT_EXACT and short.text == "p: exact golden needs 3 logprobs, backend returned 2"
    off = rules.exact("p", 1, GOLDEN, (GOLDEN[0], (7, -1.5), GOLDEN[2]))
    assert off.rank == 2 and off.text == (f"p: not bit-exact at rank 2: golden token 7 logprob {L(0.3)!r}, backend "
                                          f"token 7 logprob -1.5")
    assert rules.exact("p", 1, GOLDEN, GOLDEN) is None


def test_decode_short_and_divergence_kinds():
    assert rules.decode_short("p", 1, 3, 3) is None
    short = rules.decode_short("p", 1, 2, 4)
    assert short.kind is Kind.DECODE_SHORT and short.text == "p: decode: the backend continued 2 steps, the case " \
                                                              "asks for 4"
    accepted = rules.divergence("p", 1, 2, GOLDEN, 7, 0.2, step_failed=False)
    assert accepted.accepted and accepted.failure is None and accepted.why.startswith("inside a near-tie")
    refused = rules.divergence("p", 1, 2, GOLDEN, 7, 0.01, step_failed=False)
    assert refused.failure.kind is Kind.DECODE_DIVERGENCE and refused.failure.step == 2
    assert refused.failure.text == ("p: decode step 2: continuations diverged outside a near-tie: golden token 5 "
                                    "leads backend token 7 by 0.3 > 2 x max error 0.01")
    at_failing = rules.divergence("p", 1, 2, GOLDEN, 7, 0.2, step_failed=True)
    assert at_failing.failure.kind is Kind.NEAR_TIE_DIVERGENCE and "that is itself too large" in at_failing.why
    elsewhere = rules.divergence("p", 1, 2, GOLDEN, 11, 0.2, step_failed=False)
    assert elsewhere.failure.kind is Kind.DECODE_OUTSIDE_TOP and elsewhere.gap is None
    assert elsewhere.failure.text.endswith("backend token 11, which is not in the golden top-3")


def _score(**kw) -> PromptScore:
    base = dict(id="p", bucket=1, n_tokens=4, passed=True, bound=0.05, max_probability_error=0.01,
                top_probability_l1_error=0.02, kl_shared=0.0, first_rank_agreement=True, golden_top_token=5,
                golden_top_probability=0.6, backend_top_token=5, backend_top_probability=0.6, winner_gap=0.0)
    return PromptScore(**{**base, **kw})


def test_the_rejudging_of_recorded_numbers_keeps_the_executors_words():
    said = "; the notebook said passed: its verdict disagreed with its own numbers"
    over = rules.recorded(_score(max_probability_error=0.09), 0.05, False)
    assert (over.kind, over.rejudged) == (Kind.OVER_BOUND, True)
    assert over.text == "p: max probability error 0.09 > bound 0.05" + said
    assert rules.recorded(_score(max_probability_error=None), 0.05, False).text == \
        "p: no finite max probability error (None)" + said
    assert rules.recorded(_score(winner_gap=0.5), 0.05, False).text == \
        "p: winner changed outside a near-tie: gap 0.5 > 2 x max error 0.01" + said
    assert rules.recorded(_score(), 0.05, True).kind is Kind.NOT_EXACT
    assert rules.recorded(_score(winner_gap=math.nan), 0.05, False) is None


def test_repeat_and_drift_failures():
    r = RepeatSpread("p", 3, 2, 0.125, 0.0625, False, "run 2 differs from run 1 at rank 1")
    f = rules.repeat(r)
    assert f.kind is Kind.REPEAT and f.text == ("p: repeats are not bit-exact across 3 runs in 2 launches: max logprob "
                                                "difference 0.125, max probability difference 0.0625 (run 2 differs "
                                                "from run 1 at rank 1)")
    assert rules.repeat(RepeatSpread("p", 3, 1, 0.0, 0.0, True)) is None
    d = rules.drift(0.03, 0.02, "mean grew")
    assert (d.kind, d.prompt, d.value, d.bound, d.text) == (Kind.DRIFT, None, 0.03, 0.02, "drift: mean grew")


def test_a_failure_survives_a_record_round_trip_and_a_record_pairs_each_line_with_its_kind():
    failures = [rules.over_bound("p", 1, 0.09, 0.05), rules.non_finite("q", 1, ((3, math.inf),))]
    result = CaseResult("c", "hf", "failed", failures=[f.text for f in failures], typed_failures=failures)
    back = CaseResult.from_dict(result.to_dict())
    assert back.typed_failures[0] == failures[0]
    # JSON has no infinity (kit.core.records.jsonio.json_safe): the value is null, and the words, made from the note,
    # hold.
    assert back.typed_failures[1].value is None and back.typed_failures[1].text == failures[1].text
    assert [(f.kind, f.text) for f in failures_of(back)] == [(f.kind, f.text) for f in failures]
    assert Failure.from_dict({"kind": "a-kind-of-a-newer-kit"}) is None


def test_a_record_without_kinds_is_read_by_the_one_legacy_reading():
    lines = ["a: max probability error 0.09 > bound 0.075 (bucket 128)",
             "b: winner changed outside a near-tie: golden top token 5 leads backend greedy token 7 by 0.3",
             "c: golden token 9 is missing from the backend's top-64",
             "drift: the mean grew; p = 1e-05 from 6 clean samples", "d: something else"]
    read = failures_of(CaseResult("c", "hf", "failed", failures=lines))
    assert [f.kind for f in read] == [Kind.OVER_BOUND, Kind.WINNER_CHANGE, Kind.MISSING_TOKEN, Kind.DRIFT, Kind.OTHER]
    assert [f.text for f in read] == lines and [f.prompt for f in read] == ["a", "b", "c", None, "d"]
    assert legacy.read_line("a: max probability error 0.09 > bound 0.05; the notebook said passed: its verdict "
                            "disagreed with its own numbers").rejudged


def test_triage_reads_kinds_not_words():
    # A winner change whose words were changed (here: made up) is still a winner change: triage asks the kind.
    odd = Failure(Kind.WINNER_CHANGE, "p", 1, value=0.01, golden_token=5, backend_token=7, gap=0.3)
    r = CaseResult("c", "hf", "failed", failures=[odd.text], typed_failures=[odd])
    assert classify(r).kind == TriageClass.NEAR_TIE
    over = rules.over_bound("p", 1, 0.09, 0.05)
    both = CaseResult("c", "hf", "failed", failures=[odd.text, over.text], typed_failures=[odd, over])
    assert classify(both).kind == TriageClass.NUMERIC
    assert "winner changes (1), over the bound (1)" in classify(both).evidence


# What kit/ must not do to a failure's or an error's words: each pattern is how a module read them before the
# verdict had kinds. Only the legacy reading (kit/core/verdict/legacy.py) may hold them.
FORBIDDEN_WORDS = ("winner changed", "greedy token", "> bound", "is missing from the backend", "non-finite logprob",
                   "not in the golden top", "bit-exact", "exact golden needs", "kernel died", "not healthy within",
                   "Connection ?refused", "out of memory")
LEGACY = KIT / "core" / "verdict" / "legacy.py"
RENDERERS = {KIT / "core" / "verdict" / "failure.py"}  # where the words are made, not read


def _reads(tree: ast.AST) -> list[str]:
    """Every string a module tests text against: a regular expression's pattern, the left side of ``in``, the
    argument of startswith/endswith, and the names it imports from the legacy reading."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if (isinstance(node.func.value, ast.Name) and node.func.value.id == "re") or \
                    node.func.attr in ("startswith", "endswith"):
                found += [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and \
                isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            found.append(node.left.value)
    return found


def test_no_module_of_the_kit_matches_a_failures_or_an_errors_words():
    offenders = []
    for path in sorted(KIT.rglob("*.py")):
        if path == LEGACY or path in RENDERERS:
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in _reads(ast.parse(text)):
            if any(word in pattern for word in FORBIDDEN_WORDS):
                offenders.append(f"{path.relative_to(KIT.parent)}: {pattern!r}")
        for name in ("is_bound_failure", "_WINNER_CHANGE", "INFRASTRUCTURE_SIGNS", "bound_failure("):
            if name in text:
                offenders.append(f"{path.relative_to(KIT.parent)}: {name}")
    assert offenders == []


def test_the_scan_sees_each_way_a_module_used_to_read_words():
    old = '''
import re
_W = re.compile(r"winner changed outside a near-tie: gap ")
def f(line):
    return "> bound" in line or line.startswith("non-finite logprob") or re.search("kernel died", line)
'''
    assert sorted(_reads(ast.parse(old))) == ["> bound", "kernel died", "non-finite logprob",
                                              "winner changed outside a near-tie: gap "]


def test_the_near_tie_rule_is_written_once():
    """Every module that judges a winner change asks rules.near_tie: no other module multiplies by the factor."""
    copies = [str(p.relative_to(KIT.parent)) for p in sorted(KIT.rglob("*.py"))
              if "* WINNER_GAP_FACTOR" in p.read_text(encoding="utf-8") or
              "WINNER_GAP_FACTOR *" in p.read_text(encoding="utf-8")]
    assert copies == ["kit/core/rules/rules.py"]
