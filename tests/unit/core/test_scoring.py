"""Scoring against numbers worked out by hand (docs/architecture.md, Scoring)."""

import math

import pytest

from kit.core.records.records import Observation
from kit.core.verdict.scoring import bound_for, score_prompt

L = math.log
GOLDEN = ((5, L(0.6)), (7, L(0.3)), (9, L(0.1)))


def obs(*pairs, n_tokens=200):
    return Observation("tool-atlas-03", tuple((t, L(p) if p > 0 else p) for t, p in pairs), n_tokens)


def test_metric_panel_matches_hand_computation():
    s = score_prompt("tool-atlas-03", 256, GOLDEN, obs((5, 0.55), (7, 0.33), (9, 0.10), (11, 0.02)), bound=0.075)
    assert s.passed and s.failures == []
    assert s.max_probability_error == pytest.approx(0.05, abs=1e-12)
    assert s.top_probability_l1_error == pytest.approx(0.08, abs=1e-12)
    # KL(p || q) with q renormalized over {5, 7, 9}: 0.6 ln(0.6/0.5612) + 0.3 ln(0.3/0.3367) + 0.1 ln(0.1/0.1020)
    assert s.kl_shared == pytest.approx(0.00341106, abs=1e-7)
    assert s.first_rank_agreement and s.winner_gap == 0.0
    assert s.golden_top_token == 5 and s.backend_top_token == 5
    assert s.golden_top_probability == pytest.approx(0.6)


def test_bound_exceeded_names_case_error_bound_and_bucket():
    s = score_prompt("tool-atlas-03", 256, GOLDEN, obs((5, 0.55), (7, 0.33), (9, 0.10)), bound=0.04)
    assert not s.passed
    assert s.failures == ["tool-atlas-03: max probability error 0.05 > bound 0.04 (bucket 256)"]


def test_winner_change_inside_near_tie_passes():
    golden = ((5, L(0.45)), (7, L(0.44)), (9, L(0.11)))
    s = score_prompt("chat-sharegpt-01", 128, golden, obs((7, 0.46), (5, 0.43), (9, 0.11)), bound=0.075)
    assert s.passed
    assert not s.first_rank_agreement
    assert s.winner_gap == pytest.approx(0.01)
    assert s.max_probability_error == pytest.approx(0.02)


def test_missing_golden_token_is_named_and_winner_change_outside_tie_fails():
    # The golden's winner (token 5) is absent from the backend's top-2.
    s = score_prompt("code-humaneval-07", 512, GOLDEN, obs((7, 0.31), (9, 0.10)), bound=0.075)
    assert not s.passed
    assert s.missing_tokens == [5]
    assert s.failures == [
        "code-humaneval-07: golden token 5 is missing from the backend's top-2",
        "code-humaneval-07: winner changed outside a near-tie: golden top token 5 leads backend greedy token 7 "
        "by 0.3 > 2 x max error 0.01",
    ]


def test_greedy_token_outside_golden_top_k_fails():
    s = score_prompt("math-gsm-02", 128, GOLDEN, obs((11, 0.62), (5, 0.2), (7, 0.1), (9, 0.05)), bound=1.0)
    assert not s.passed
    assert "math-gsm-02: backend greedy token 11 is not in the golden top-3" in s.failures


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_logprob_fails_naming_case(bad):
    o = Observation("knowledge-longbench-02", ((5, L(0.6)), (7, bad), (9, L(0.1))), 90)
    s = score_prompt("knowledge-longbench-02", 128, GOLDEN, o, bound=0.075)
    assert not s.passed
    assert s.failures == [f"knowledge-longbench-02: non-finite logprob {bad} for token 7 from the backend"]


def test_exact_golden_requires_identical_bits():
    same = Observation("x", GOLDEN, 10)
    assert score_prompt("x", 128, GOLDEN, same, bound=None, exact=True).exact_match is True
    nudged = ((5, math.nextafter(L(0.6), 0.0)), *GOLDEN[1:])
    s = score_prompt("x", 128, GOLDEN, Observation("x", nudged, 10), bound=None, exact=True)
    assert not s.passed and s.exact_match is False
    assert s.failures == [f"x: not bit-exact at rank 1: golden token 5 logprob {L(0.6)!r}, "
                          f"backend token 5 logprob {nudged[0][1]!r}"]


def test_exact_golden_order_of_tokens_matters():
    swapped = Observation("x", (GOLDEN[1], GOLDEN[0], GOLDEN[2]), 10)
    s = score_prompt("x", 128, GOLDEN, swapped, bound=None, exact=True)
    assert not s.passed and "rank 1: golden token 5" in s.failures[-1]


def test_bucket_bound_overrides_case_bound():
    assert bound_for(1024, 0.075, {"1024": 0.1}) == 0.1
    assert bound_for(256, 0.075, {"1024": 0.1}) == 0.075
