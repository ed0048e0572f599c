"""The drift test's p-value and quantile and the Clopper-Pearson bound, held to scipy's over a grid of counts from 1
to a million and results down to 1e-300. The drift p-value floored at 1.1e-16 (one minus a number near 1) and
``upper_bound(600, 1200)`` raised OverflowError (a binomial sum in floats).

Tolerances, relative: the t tail and its quantile 1e-12 at any degrees of freedom (to 10^12); the incomplete beta,
the binomial tail and the Clopper-Pearson bound 1e-12 for counts up to 1,000 and 1e-10 up to 10^6 (where x near 1
is rounded as a float, and scipy's own incomplete beta differs from an exact one by about 1e-12). A p-value above
1/2 is held to 1e-15 absolute: it is read against alphas of 1e-3 and below, and scipy's ``stdtr`` itself is off by
3e-9 at t = 1e-8 (the reference there is its incomplete beta of the complement).
"""

from __future__ import annotations

import math

import pytest

from kit.core.noise import special
from kit.core.noise.drift import t_quantile_two_sided, t_two_sided_p
from kit.core.noise.falsefailure import upper_bound

scipy_special = pytest.importorskip("scipy.special")
stats = pytest.importorskip("scipy.stats")

DFS = (1, 2, 3, 4, 5, 7, 10, 29, 30, 99, 100, 999, 1000, 10**4, 19_999, 20_000, 10**5, 10**6, 10**9, 10**12)
TS = (0, 1e-8, 1e-3, 0.1, 0.5, 1, 1.5, 2, 3, 5, 8, 10, 20, 30, 50, 100, 300, 1e3, 1e4, 1e6, 1e10, 1e50, 1e100,
      1e150, 1e200)
TRIALS = (1, 2, 5, 20, 100, 600, 1000, 1200, 10**4, 10**5, 10**6)


def tolerance(size: float) -> float:
    return 1e-12 if size <= 1000 else 1e-10


def failure_counts(n: int) -> list[int]:
    return sorted({k for k in (0, 1, 2, n // 100, n // 10, n // 2, n - 2, n - 1) if 0 <= k < n})


@pytest.mark.parametrize("df", DFS)
def test_the_t_tail_is_scipys_at_every_size_and_down_to_1e_300(df):
    checked = 0
    for t in TS:
        got, reference = t_two_sided_p(t, df), 2 * float(stats.t.sf(t, df))
        if reference > 0.5:  # the reference as its complement's incomplete beta (see the module)
            reference = 1 - float(scipy_special.betainc(0.5, df / 2, t * t / (df + t * t)))
            assert got == pytest.approx(reference, rel=0, abs=1e-15), t
        elif reference >= 1e-300:
            assert got == pytest.approx(reference, rel=1e-12, abs=0), t
            checked += reference < 1e-16  # below the old floor
    assert checked >= 3 or df == 1 and checked >= 1  # tiny p-values are in the grid


@pytest.mark.parametrize("df", DFS)
def test_the_t_quantile_is_scipys_for_p_down_to_1e_300(df):
    for p in (0.9, 0.5, 0.05, 1e-3, 1e-6, 1e-10, 1e-30, 1e-100, 1e-250, 1e-300):
        reference = float(stats.t.isf(p / 2, df))
        got = t_quantile_two_sided(p, df)
        if math.isfinite(reference) and reference > 0:
            assert got == pytest.approx(reference, rel=1e-12), p
        else:  # scipy gives up (-inf) at the far tail: the quantile still gives back its p
            assert t_two_sided_p(got, df) == pytest.approx(p, rel=1e-9), p
    assert t_quantile_two_sided(1, df) == 0.0


@pytest.mark.parametrize("df", DFS)
def test_the_t_quantile_keeps_its_precision_near_p_1(df):
    # p = 1 - 2^-k: 1 - p is exact, and so is scipy's argument 1/2 + (1 - p)/2. The reference is the definition,
    # P(|T| < t) = I_y(1/2, df/2) at y = t^2 / (df + t^2), inverted by scipy's betaincinv; scipy's t.ppf is no
    # reference there, as it loses digits near 1/2 itself (1.5e-4 relative at df 4, p = 1 - 2^-20).
    for k in (2, 5, 10, 20, 30, 40, 52):
        d = 2.0 ** -k
        got = t_quantile_two_sided(1 - d, df)
        y = float(scipy_special.betaincinv(0.5, df / 2, d))
        assert got == pytest.approx(math.sqrt(df * y / (1 - y)), rel=1e-12, abs=0), k
        if df == 1:  # Cauchy's, in closed form: P(|T| < t) = 2 atan(t) / pi
            assert got == pytest.approx(math.tan(math.pi * d / 2), rel=1e-13, abs=0), k
        if df == 2:  # P(|T| < t) = t / sqrt(2 + t^2)
            assert got == pytest.approx(d * math.sqrt(2 / (1 - d * d)), rel=1e-13, abs=0), k
    for k in (20, 52):  # and the central probability gives 1 - p back
        central = special.t_central(t_quantile_two_sided(1 - 2.0 ** -k, df), df)
        assert central == pytest.approx(2.0 ** -k, rel=1e-13, abs=0)


@pytest.mark.parametrize("n", TRIALS)
def test_the_clopper_pearson_bound_is_scipys_at_every_count(n):
    for k in failure_counts(n):
        for confidence in (0.5, 0.95, 0.999999):
            reference = float(stats.beta.ppf(confidence, k + 1, n - k))
            assert upper_bound(k, n, confidence) == pytest.approx(reference, rel=tolerance(n)), (k, confidence)


@pytest.mark.parametrize("n", TRIALS)
def test_the_binomial_tail_is_scipys_at_every_count(n):
    for k in failure_counts(n):
        for p in (1e-12, 1e-3, (k or 0.5) / n, 0.5, 0.9):
            reference = float(stats.binom.cdf(k, n, p))
            if reference >= 1e-300:
                assert special.binomial_cdf(k, n, p) == pytest.approx(reference, rel=tolerance(n)), (k, p)


def test_what_overflowed_and_floored_before():
    assert upper_bound(600, 1200) == pytest.approx(float(stats.beta.ppf(0.95, 601, 600)), rel=1e-12)
    assert t_two_sided_p(40.0, 5) == pytest.approx(2 * float(stats.t.sf(40.0, 5)), rel=1e-12)  # 1.8e-7
    assert 0 < t_two_sided_p(1e4, 8) < 1e-28  # 1.1e-29; it was 1.1e-16


@pytest.mark.parametrize("a, b", [(0.5, 0.5), (1, 1), (2.5, 7), (10, 10), (37.5, 1), (1e3, 1e3), (1e5, 1e3),
                                  (10, 1e6), (1e6, 0.5)])
def test_the_incomplete_beta_is_scipys(a, b):
    for x in (1e-12, 1e-6, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1 - 1e-6):
        reference = float(scipy_special.betainc(a, b, x))
        if reference >= 1e-300:
            assert special.betainc(a, b, x) == pytest.approx(reference, rel=tolerance(max(a, b))), x
    assert special.betainc(a, b, 0) == 0 and special.betainc(a, b, 1) == 1


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        special.betainc(0, 1, 0.5)
    with pytest.raises(ValueError):
        special.t_two_sided(1.0, 0)
    with pytest.raises(ValueError):
        special.beta_quantile(1.5, 1, 1)
    with pytest.raises(ValueError):
        special.binomial_cdf(5, 10, math.nan)
    assert math.isnan(special.t_two_sided(math.nan, 3))
    assert special.t_two_sided(math.inf, 3) == 0.0
