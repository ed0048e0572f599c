"""The regularized incomplete beta function and its inverse: Student's t tail and the binomial tail, exact at any size.

The drift test's p-value (kit.core.noise.drift) and the Clopper-Pearson bound (kit.core.noise.falsefailure) are both
tails of the incomplete beta function: P(|T| >= t) for Student's t with v degrees of freedom is I_x(v/2, 1/2) at
x = v / (v + t^2), and P(X <= k) for X ~ Binomial(n, p) is I_{1-p}(n - k, k + 1). Computed as one minus a sum, as they
were, a tail floors at the float's resolution near 1 (1.1e-16: a p-value of 1e-30 read as 1e-16), and a sum of
binomial terms overflows a float from about a thousand trials (``math.comb(1200, 600)`` has 360 digits).

Here the tail itself is computed, never its complement, as the continued fraction of Numerical Recipes (section
6.4, "Incomplete Beta Function", evaluated by the modified Lentz method), which converges fast on the side where
x < (a + 1) / (a + b + 2); the other side is 1 - I_{1-x}(b, a) there, whose value is then at least about 1/2, so
no precision is lost. The factor x^a (1 - x)^b / B(a, b) in front is summed in logarithms, with B's
Stirling-series remainders (``_delta``) taken apart from the large terms that cancel for large a and b. Against
scipy (tests/unit/core/test_special.py), down to results of 1e-300: the t tail within 1e-12 relative at any degrees
of freedom (from 20,000 on by Hill's expansion, see ``t_two_sided``); the incomplete beta, binomial tail and
Clopper-Pearson bound within 1e-12 for counts up to 1,000 and 1e-10 up to 10^6. Beyond, their error grows as the
count times 1e-16 (an x near 1 rounded as a float, in a fraction of that many terms). The t quantile is the tail's
inverse below p = 1/2 and the central probability's, I_{1-x}(1/2, v/2), above it, so that near p = 1 (t near 0) it
too keeps its relative precision. Standard library only: it runs in the kernel.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

_TINY = 1e-300  # keeps Lentz's method from dividing by zero
LARGE_DF = 20_000  # from here on the t tail is Hill's expansion (see t_two_sided)
_EPS = 1e-16
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# 1/(12 a) - 1/(360 a^3) + ... : Stirling's series for lgamma's remainder, used from a = 10 on
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)


def _delta(a: float) -> float:
    """lgamma(a) - ((a - 1/2) log a - a + log sqrt(2 pi)): Stirling's remainder, small for large a."""
    if a < 10:
        return math.lgamma(a) - ((a - 0.5) * math.log(a) - a + _HALF_LOG_2PI)
    inv, inv2 = 1 / a, 1 / (a * a)
    total, power = 0.0, inv
    for c in _STIRLING:
        total += c * power
        power *= inv2
    return total


@dataclass(frozen=True)
class _Point:
    """Where I_x(a, b) is evaluated: x and y = 1 - x, their logarithms, and x exactly (None where neither x nor y
    is exact), each as precisely as the caller knows it."""

    x: float
    y: float
    log_x: float
    log_y: float
    exact_x: Fraction | None

    def swapped(self) -> "_Point":
        return _Point(self.y, self.x, self.log_y, self.log_x, None if self.exact_x is None else 1 - self.exact_x)


def _at(x: float) -> _Point:
    """x exact, 1 - x in exact arithmetic (its logarithm as log1p(-x))."""
    return _Point(x, 1 - x, math.log(x), math.log1p(-x), Fraction(x))


def _at_complement(y: float) -> _Point:
    """1 - x = y exact: a binomial tail at a tiny p, where 1 - p as a float has lost p's digits."""
    return _Point(1 - y, y, math.log1p(-y), math.log(y), 1 - Fraction(y))


def _log_front(a: float, b: float, at: _Point) -> float:
    """log(x^a y^b / B(a, b)). For large a and b, the large terms of a log x + b log y and of log B(a, b) cancel:
    they are taken together, as a log(x / x0) + b log(y / y0) around x0 = a / (a + b) (its differences from 1
    computed exactly, from x exactly), and B's remainders apart."""
    total = a + b
    if max(a, b) < 10:
        return a * at.log_x + b * at.log_y - (math.lgamma(a) + math.lgamma(b) - math.lgamma(total))
    if min(a, b) < 10:  # log B(a, b) = lgamma(small) + lgamma(big) - lgamma(big + small), the last two by Stirling
        big, small = max(a, b), min(a, b)
        ratio = (big - 0.5) * math.log1p(-small / total) - small * math.log(total) + small
        return a * at.log_x + b * at.log_y - math.lgamma(small) - ratio - (_delta(big) - _delta(total))
    if at.exact_x is not None:  # x / x0 - 1 and y / y0 - 1, rounded once: x * total rounded, times a million,
        whole = Fraction(total)  # would be an error of 1e-10 in the result
        dx = float(at.exact_x * whole / Fraction(a) - 1)
        dy = float((1 - at.exact_x) * whole / Fraction(b) - 1)
    else:
        dx, dy = at.x * total / a - 1, at.y * total / b - 1
    deviation = (a * (math.log1p(dx) if abs(dx) < 0.5 else at.log_x - math.log(a / total))
                 + b * (math.log1p(dy) if abs(dy) < 0.5 else at.log_y - math.log(b / total)))
    # log(x0^a y0^b / B(a, b)) = log sqrt(a b / (2 pi (a + b))) - (delta(a) + delta(b) - delta(a + b))
    peak = 0.5 * math.log(a * b / total) - _HALF_LOG_2PI - (_delta(a) + _delta(b) - _delta(total))
    return deviation + peak


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (Numerical Recipes' betacf), by the modified Lentz method."""
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > _TINY else _TINY)
    h = d
    limit = 200 + int(20 * math.sqrt(max(a, b)))  # it converges in O(sqrt(max(a, b))) steps
    for m in range(1, limit + 1):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > _TINY else _TINY)
            c = 1 + aa / c
            c = c if abs(c) > _TINY else _TINY
            step = d * c
            h *= step
        if abs(step - 1) < _EPS:
            return h
    raise ArithmeticError(f"the incomplete beta fraction did not converge for a={a}, b={b}, x={x}")


def betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    return _betainc_of(a, b, x, complement=False)


def betainc_complement(a: float, b: float, y: float) -> float:
    """I_{1-y}(a, b), for a y known exactly where 1 - y is not (a tiny probability)."""
    return _betainc_of(a, b, y, complement=True)


def _betainc_of(a: float, b: float, v: float, complement: bool) -> float:
    _check(a, b, v)
    if v <= 0 or v >= 1:  # x = 0 gives 0, x = 1 gives 1
        return float((v >= 1) != complement)
    return _betainc(a, b, _at_complement(v) if complement else _at(v))


def _check(a: float, b: float, x: float) -> None:
    if not (a > 0 and b > 0):
        raise ValueError(f"expected a, b > 0, got {a}, {b}")
    if not 0 <= x <= 1:
        raise ValueError(f"expected 0 <= x <= 1, got {x}")


def _betainc(a: float, b: float, at: _Point) -> float:
    """I_x(a, b) by the continued fraction on the side where it converges; the other side as one minus the
    complement, which is then at least about 1/2."""
    if at.x < (a + 1) / (a + b + 2):
        return math.exp(_log_front(a, b, at)) * _continued_fraction(a, b, at.x) / a
    return 1 - math.exp(_log_front(b, a, at.swapped())) * _continued_fraction(b, a, at.y) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom, exact down to the smallest float. From
    ``LARGE_DF`` degrees of freedom on, Hill's expansion (``_hill_z``) instead: there x = df / (df + t^2) lies
    so near 1 that its rounding, times df / 2 in the continued fraction, costs more than the expansion's error."""
    return _t_tail(t, df, central=False)


def t_central(t: float, df: float) -> float:
    """P(|T| < |t|), the complement of ``t_two_sided``, computed as itself: near t = 0 it is tiny, and one minus
    the tail (near 1) would keep none of its digits."""
    return _t_tail(t, df, central=True)


def _t_tail(t: float, df: float, central: bool) -> float:
    """P(|T| >= |t|), or with ``central`` P(|T| < |t|): I_x(df/2, 1/2) at x = df / (df + t^2), or I_{1-x}(1/2, df/2),
    each evaluated where it is small, so each keeps its relative precision."""
    if not df > 0:
        raise ValueError(f"expected df > 0, got {df}")
    if math.isnan(t):
        return math.nan
    if df >= LARGE_DF:
        z = _hill_z(abs(t), df)
        return math.erf(z / math.sqrt(2)) if central else math.erfc(z / math.sqrt(2))
    r = abs(t) / math.sqrt(df)
    if math.isinf(r) or r == 0:
        return float(math.isinf(r) == central)
    if r > 1e150:  # x = 1 / (1 + r^2) underflows; then I_x(a, 1/2) = x^a / (a B(a, 1/2)) to within a part in x
        a = df / 2
        tail = math.exp(-2 * a * math.log(r) - (math.lgamma(a) + math.lgamma(0.5) - math.lgamma(a + 0.5))) / a
        return 1 - tail if central else tail
    # x = df / (df + t^2) = 1 / (1 + r^2) and 1 - x, with their logarithms from log1p, neither rounded through the
    # other; and no square of a t that would overflow
    if r > 1:
        s2 = (1 / r) ** 2
        at = _Point(s2 / (1 + s2), 1 / (1 + s2), -2 * math.log(r) - math.log1p(s2), -math.log1p(s2), None)
    else:  # log r^2 as 2 log r: r^2 underflows for t below 1e-162, where the central probability is still a number
        r2 = r * r
        at = _Point(1 / (1 + r2), r2 / (1 + r2), -math.log1p(r2), 2 * math.log(r) - math.log1p(r2), None)
    return _betainc(0.5, df / 2, at.swapped()) if central else _betainc(df / 2, 0.5, at)


def _hill_z(t: float, df: float) -> float:
    """The normal deviate z of Hill's expansion (G. W. Hill, "Algorithm 395: Student's t-distribution",
    Communications of the ACM 13(10), 1970) from df and log1p(t^2 / df): P(|T| >= t) is erfc(z / sqrt 2), within
    1e-12 of scipy's from 10^4 degrees of freedom on (tests/unit/core/test_special.py)."""
    if math.isinf(t):
        return math.inf
    a = df - 0.5
    b = 48 * a * a
    y = a * math.log1p(t * t / df)
    return (((((-0.4 * y - 3.3) * y - 24) * y - 85.5) / (0.8 * y * y + 100 + b) + y + 3) / b + 1) * math.sqrt(y)


@functools.lru_cache(maxsize=4096)  # pure, and asked the same (p, df) hundreds of times as records are summarized
def t_two_sided_quantile(p: float, df: float) -> float:
    """The t >= 0 with P(|T| >= t) = p: bisection on log t, which reaches the float's precision for any p in (0, 1]
    (t from 0 to about 1e300). Above p = 1/2 the central probability P(|T| < t) is matched to 1 - p instead (exact
    there): near p = 1, t is near 0 and the tail near 1 is known only to 1e-16 absolute, which at p = 1 - 2^-40 cost
    t four of its digits."""
    if not 0 < p <= 1:
        if p <= 0:
            return math.inf
        raise ValueError(f"expected 0 < p <= 1, got {p}")
    if p == 1:
        return 0.0
    central = p > 0.5

    def below(t: float) -> bool:  # whether the quantile lies above t
        return t_central(t, df) < 1 - p if central else t_two_sided(t, df) > p

    lo, hi = -745.0, 709.0  # log t: from the smallest float to the largest
    for _ in range(200):
        mid = (lo + hi) / 2
        if below(math.exp(mid)):
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return math.exp(hi)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), at any n."""
    if not 0 <= p <= 1:
        raise ValueError(f"expected 0 <= p <= 1, got {p}")
    if k < 0:
        return 0.0
    if k >= n or p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    return betainc_complement(n - k, k + 1, p)


def beta_quantile(q: float, a: float, b: float) -> float:
    """The x with I_x(a, b) = q, by bisection (I_x rises with x): halving x's interval while it is wide, its
    logarithm while it spans orders of magnitude, to the float's precision."""
    if not 0 <= q <= 1:
        raise ValueError(f"expected 0 <= q <= 1, got {q}")
    if q == 0:
        return 0.0
    if q == 1:
        return 1.0
    # Above 1/2 the upper tail is matched to 1 - q (exact there) instead: I_x near 1 is known only to 1e-16 absolute.
    upper = q > 0.5

    def below(x: float) -> bool:
        return betainc_complement(b, a, x) > 1 - q if upper else betainc(a, b, x) < q

    lo, hi = 0.0, 1.0
    for _ in range(2000):
        mid = math.sqrt(lo * hi) if lo > 0 and hi > 4 * lo else (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        if below(mid):
            lo = mid
        else:
            hi = mid
    return hi
