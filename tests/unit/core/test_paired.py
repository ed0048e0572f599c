"""The paired comparison's statistics (kit.core.verdict.paired): known differences give known intervals, a constant
shift is found, pure noise is not, near-ties are left out and counted, and fewer than three prompts give no
number at all."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from kit.core.verdict import paired
from kit.core.records.records import PromptScore


def score(pid: str, err: float, *, flipped_gap: float | None = None) -> PromptScore:
    """One scored prompt; ``flipped_gap``: the backend's winner is another golden token, led by that much."""
    flipped = flipped_gap is not None
    return PromptScore(id=pid, bucket=128, n_tokens=40, passed=True, bound=0.075, max_probability_error=err,
                       top_probability_l1_error=err, kl_shared=0.0, first_rank_agreement=not flipped,
                       golden_top_token=5, golden_top_probability=0.5, backend_top_token=7 if flipped else 5,
                       backend_top_probability=0.5, winner_gap=flipped_gap if flipped else 0.0)


def scores(errors) -> list[PromptScore]:
    return [score(f"p-{i}", float(e)) for i, e in enumerate(errors)]


def test_known_differences_give_the_t_interval_by_hand():
    pin = scores([0.10, 0.20, 0.30, 0.40, 0.50])
    diffs = [0.01, 0.02, 0.03, 0.04, 0.05]
    candidate = scores([a + d for a, d in zip([0.10, 0.20, 0.30, 0.40, 0.50], diffs)])
    r = paired.compare(pin, candidate)
    # mean 0.03, sd 0.0158114, t(0.975, 4) = 2.776445: half-width 0.0196324
    assert r.paired == 5 and (r.near_ties, r.unpaired) == (0, 0)
    assert r.mean == pytest.approx(0.03)
    assert r.low == pytest.approx(0.03 - 0.0196324, abs=1e-6) and r.high == pytest.approx(0.03 + 0.0196324, abs=1e-6)
    assert r.worse
    # Five positive differences: 2 of the 32 sign patterns are as extreme (all +, all -).
    assert r.p_value == pytest.approx(2 / 32)
    assert r.text == ("candidate's error is 0.030 above the pin's (95 % interval 0.010 .. 0.050, p = 0.062, "
                      "5 prompts paired)")


def test_the_t_interval_matches_the_textbook_quantile():
    d = [0.3, -0.1, 0.4, 0.2, 0.0, 0.5, 0.1, 0.2, 0.3, 0.1]
    low, high = paired.t_interval(d)
    half = 2.262157 * statistics.stdev(d) / math.sqrt(len(d))  # t(0.975, 9)
    assert (low, high) == (pytest.approx(statistics.fmean(d) - half, abs=1e-6),
                           pytest.approx(statistics.fmean(d) + half, abs=1e-6))


def test_a_small_constant_shift_on_every_prompt_is_found():
    rng = np.random.default_rng(7)
    pin = rng.uniform(0.05, 0.4, 64)
    # A shift a tenth of the spread between prompts, with prompt-level noise a fifth of the shift.
    candidate = pin + 0.003 + rng.normal(0, 0.0006, 64)
    r = paired.compare(scores(pin), scores(candidate))
    assert r.worse and r.low > 0.0025 and r.high < 0.0035
    assert r.p_value < 0.001  # Monte Carlo: (1 + 0) / (1 + 20000) at best
    assert r.p_value == pytest.approx(1 / (1 + paired.PERMUTATIONS))
    # Two significant digits of the half-width set the decimals of all three numbers.
    assert r.text == ("candidate's error is 0.00290 above the pin's (95 % interval 0.00277 .. 0.00304, p = 5e-05, "
                      "64 prompts paired)")


def test_pure_noise_is_not_a_shift():
    rng = np.random.default_rng(11)
    pin = rng.uniform(0.05, 0.4, 64)
    candidate = pin + rng.normal(0, 0.003, 64)
    r = paired.compare(scores(pin), scores(candidate))
    assert not r.worse and r.low < 0 < r.high and r.p_value > 0.05
    # The same two runs, the same p-value: the permutations are drawn with a fixed seed.
    assert paired.compare(scores(pin), scores(candidate)).p_value == r.p_value


def test_a_candidate_better_than_the_pin_is_not_worse():
    pin = scores([0.2, 0.3, 0.25, 0.4])
    r = paired.compare(pin, scores([0.1, 0.21, 0.14, 0.3]))
    assert r.high < 0 and not r.worse
    assert r.text.startswith("candidate's error is 0.100 below the pin's (95 % interval -0.113 .. -0.087, ")


def test_identical_errors_are_no_effect():
    pin = scores([0.2, 0.3, 0.25])
    r = paired.compare(pin, scores([0.2, 0.3, 0.25]))
    assert (r.mean, r.low, r.high, r.p_value, r.worse) == (0.0, 0.0, 0.0, 1.0, False)
    assert r.text == "candidate's error is the pin's on average (95 % interval 0.0 .. 0.0, p = 1, 3 prompts paired)"


def test_near_ties_on_either_side_are_left_out_and_counted():
    pin = scores([0.1, 0.2, 0.3, 0.4, 0.5])
    candidate = scores([0.11, 0.21, 0.31, 0.41, 0.51])
    pin[0] = score("p-0", 0.1, flipped_gap=0.15)  # winner changed, led by 0.15 <= 2 x 0.1: a near-tie
    candidate[1] = score("p-1", 0.21, flipped_gap=0.5)  # led by 0.5 > 2 x 0.21: no tie, a failure; kept
    candidate[2] = score("p-2", 0.31, flipped_gap=0.05)
    r = paired.compare(pin, candidate)
    assert (r.paired, r.near_ties, r.unpaired) == (3, 2, 0)
    assert paired.differences(pin, candidate)[0] == pytest.approx([0.01, 0.01, 0.01])
    assert r.text.endswith("3 prompts paired, 2 near-ties left out)")
    changed = paired.changed_in_near_tie
    assert changed(pin[0]) and not changed(candidate[1]) and not changed(pin[1])


def test_prompts_scored_on_one_side_or_not_finite_are_unpaired():
    pin = scores([0.1, 0.2, 0.3, 0.4])
    candidate = scores([0.1, float("nan"), 0.3, 0.4]) + [score("extra", 0.2)]
    d, ties, unpaired = paired.differences(pin, candidate)
    assert (len(d), ties, unpaired) == (3, 0, 2)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_fewer_than_three_prompts_give_no_number(n):
    pin = scores([0.1, 0.2][:n]) + [score("tie", 0.1, flipped_gap=0.01)]
    r = paired.compare(pin, scores([0.5, 0.6][:n]) + [score("tie", 0.1)])
    assert r.paired == n and (r.low, r.high, r.p_value) == (None, None, None) and not r.worse
    assert r.text == f"too few prompts to pair ({n} prompt{'s' if n != 1 else ''} paired, 1 near-tie left out)"


def test_the_effect_in_units_of_the_clean_error():
    pin = scores([0.1, 0.2, 0.3, 0.4])
    r = paired.compare(pin, scores([0.12, 0.22, 0.31, 0.43]), clean_error=0.05)
    assert r.relative == pytest.approx(r.mean / 0.05)
    assert ", +0.4 x the clean error 0.05, " in r.text
    assert paired.PairedResult.from_dict(r.to_dict()) == r


def test_the_drawn_permutation_p_estimates_the_exact_one():
    rng = np.random.default_rng(3)
    d = rng.normal(0.6, 1.0, paired.EXACT_UP_TO + 2)  # past the exact enumeration: drawn patterns
    codes = np.arange(2 ** len(d))[:, None]
    signs = 1.0 - 2.0 * ((codes >> np.arange(len(d))) & 1)
    exact = float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-12))
    drawn = paired.sign_flip_p(list(d))
    assert 0.01 < exact < 0.5
    assert abs(drawn - exact) < 4 * math.sqrt(exact * (1 - exact) / paired.PERMUTATIONS)
    # Up to EXACT_UP_TO prompts the p-value is the enumeration itself.
    small = d[:paired.EXACT_UP_TO]
    codes = np.arange(2 ** len(small))[:, None]
    signs = 1.0 - 2.0 * ((codes >> np.arange(len(small))) & 1)
    assert paired.sign_flip_p(list(small)) == float(np.mean(np.abs(signs @ small) >= abs(small.sum()) - 1e-12))
