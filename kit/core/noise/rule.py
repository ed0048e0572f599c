"""The bound rule: how a case's measured noise becomes its bounds, written once.

A bucket's bound is its largest clean error plus a margin for what the samples have not shown, rounded up
(``bound_rule``; a decode step's by the same rule, kit.core.noise.stepnoise). Every figure that rests on a bound
(a calibration record's buckets, their re-derivation when a record is read, the drift test's two-sample interval,
the benchmarks' what-ifs) asks here, so a change of rule reaches them all; a record names the rule that made it
(``RULES``), and is re-derived by that one.

Stdlib only: the case kernel reads the bounds this rule gives.
"""

from __future__ import annotations

import math


def d2(n: int) -> float:
    """The expected range of ``n`` standard normal samples: the integral over x of 1 - Phi(x)^n - (1 - Phi(x))^n
    (the probability that x lies inside the range), to the float's precision. The trapezoid rule on a step of 1/16
    over |x| <= 12 is that precise here: the integrand is smooth and falls as a normal tail, and for such a function
    the rule's error falls exponentially with the step (held to scipy's quadrature in tests/unit/core/test_d2.py).
    The tables of quality control give three decimals (1.128 for two), which moved a spread factor by 4e-4."""
    if n < 2:
        raise ValueError(f"expected n >= 2 samples for a range, got {n}")
    h, half = 1 / 16, 12 * 16
    total = 0.0
    for i in range(-half, half + 1):
        below = 0.5 * math.erfc(-i * h / math.sqrt(2))  # Phi(x), and 1 - Phi(x) without cancellation
        above = 0.5 * math.erfc(i * h / math.sqrt(2))
        total += 1 - below ** n - above ** n
    return total * h


# d2(n) for the sample counts a spread is widened from: a range seen in n samples underestimates what more samples
# would show; scaling it by d2(10)/d2(n) states every spread as if ten samples had been taken (a confidence margin
# for the number of samples). Made once, here: every record's bounds are re-derived through them.
_D2 = {n: d2(n) for n in range(2, 11)}

# How many distinct clean samples a record needs before more samples stop moving its bounds: from every subset of k
# samples of a record, the median bound per bucket comes within 5 % of the bound all of them give from k = 7 or 8
# (jax-bf16 on an H100 80GB, 10 distinct samples), 6 or 7 (hf-bf16 on an H200, 7); below 5 samples, clean samples the
# subset had not seen fail its bounds (benchmarks/bound_by_samples.py, docs/calibration.md "Records that deepen").
# A record thinner than this is said to be so wherever its case's bounds are shown.
SETTLES_FROM = 8

RULE_NAME = "largest-plus-margin/3"
RULE_TEXT = ("per bucket: largest error + max(spread x d2(10)/d2(n), 0.1 x largest error, 5 x the dtype's "
             "resolution), rounded up to two significant digits; spread is the largest per-prompt range across "
             "the n distinct samples")

# The smallest probability difference a dtype reproduces from one runtime to the next: the embedded
# model's float32 goldens made on an AVX2 and an AVX-512 host differ by up to 1.4e-6. Below it, a
# float32 case's "noise" is the host's instruction set, not the engine. bfloat16's own noise is far larger.
RESOLUTION = {"float32": 2e-6}


def spread_factor(n_distinct: int) -> float:
    """How much a range of ``n_distinct`` samples is widened to stand for ten (1 from ten on)."""
    if n_distinct >= 10:
        return 1.0
    return _D2[10] / _D2[max(n_distinct, 2)]


def round_up(x: float, digits: int = 2) -> float:
    """``x`` rounded up to ``digits`` significant digits (0.01234 -> 0.013).

    The real gate's rule rounds to one digit; at these error sizes that widens a bound by up to 100 % at random
    (0.0110 -> 0.02), a margin (bound - error) no clean run needed, which the fault catalogue showed lets small
    systematic faults through."""
    if x <= 0:
        return 0.0
    scale = 10 ** (math.floor(math.log10(x)) - digits + 1)
    return round(math.ceil(round(x / scale, 9)) * scale, 12)


def resolution(dtype: str) -> float:
    """The smallest probability difference ``dtype`` reproduces from one runtime to the next (0 where none is
    known): a floor under every margin, so a host's instruction set is never taken for noise."""
    return RESOLUTION.get(dtype, 0.0)


# The real gate's rule adds 2 x the spread of repeats. Here the spread is already the range across every
# implementation variant, the whole of a healthy release's latitude, and one such range above the worst
# clean error is margin enough: each embedded record's variants, left out one at a time, reach at most
# 0.89 of the bound the others give (benchmarks/calibration_figures.py), while at 2 x a fault on a few
# prompts at 1.7 x the clean error went through (the fault catalogue's embedding_swap at 0.2).
SPREAD_FACTOR = 1.0

# Every rule a record may have been made by: its text and how many scaled spreads its margin holds. A record
# names its rule and is re-derived by that one, so one made before a change of rule keeps the bounds it was
# reviewed with (and says which rule gave them) instead of being silently judged by another.
RULES = {
    RULE_NAME: (RULE_TEXT, SPREAD_FACTOR),
    "largest-plus-margin/2": ("per bucket: largest error + max(2 x spread x d2(10)/d2(n), 0.1 x largest error, "
                              "5 x the dtype's resolution), rounded up to two significant digits; spread is the "
                              "largest per-prompt range across the n distinct samples", 2.0),
}


def bound_rule(largest: float, spread: float, n_distinct: int, dtype: str = "bfloat16", rule: str = RULE_NAME) -> float:
    """The bound a bucket's measured noise justifies (RULE_TEXT, in one place; ``rule``: an earlier rule's)."""
    factor = RULES[rule][1]
    margin = max(factor * spread * spread_factor(n_distinct), 0.1 * largest, 5 * resolution(dtype))
    return min(1.0, round_up(largest + margin))
