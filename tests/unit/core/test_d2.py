"""d2(n), the expected range of n standard normal samples, which widens a spread seen in fewer than ten samples
(kit.core.noise.rule): to the float's precision, not the three decimals of the quality-control tables."""

from __future__ import annotations

import math

import pytest

from kit.core.noise.rule import d2, spread_factor

pytestmark = pytest.mark.unit


def test_d2_is_the_closed_form_where_there_is_one():
    # E[range] of two normals is E|X - Y| = 2 / sqrt(pi); of three, 3 / sqrt(pi)
    assert d2(2) == pytest.approx(2 / math.sqrt(math.pi), rel=1e-15, abs=0)
    assert d2(3) == pytest.approx(3 / math.sqrt(math.pi), rel=1e-15, abs=0)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9, 10, 25, 100])
def test_d2_is_scipys_integral_of_the_range(n):
    integrate = pytest.importorskip("scipy.integrate")
    stats = pytest.importorskip("scipy.stats")
    reference, error = integrate.quad(lambda x: 1 - stats.norm.cdf(x) ** n - stats.norm.sf(x) ** n, -math.inf,
                                      math.inf, epsabs=1e-14, epsrel=1e-13)
    assert error < 1e-12
    assert d2(n) == pytest.approx(reference, rel=1e-12, abs=0)


def test_the_three_decimal_tables_are_gone_from_the_spread_factor():
    assert spread_factor(2) == pytest.approx(d2(10) / (2 / math.sqrt(math.pi)), rel=1e-15, abs=0)
    assert abs(spread_factor(2) - 3.078 / 1.128) > 1e-5  # what the table gave


def test_a_range_needs_two_samples():
    with pytest.raises(ValueError, match="n >= 2"):
        d2(1)
