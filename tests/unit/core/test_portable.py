"""Float64 rounded to float32: the reported top-k is the same for any float64 result within the margin of the
maker's, and the margin says truly how far that is."""

from __future__ import annotations

import numpy as np

from kit.core.host.portable import SAFE_MARGIN, margin_of, ranking_margin, rounded_top, rounding_margin


def boundary_above(value: float) -> float:
    """The midpoint between ``value``'s float32 and the next float32 toward zero... or away: the one above."""
    f = np.float32(value)
    return (float(f) + float(np.nextafter(f, np.float32(np.inf)))) / 2


def test_ties_after_rounding_are_ordered_by_token_id_not_by_float64():
    # Two float64 values that round to one float32: whichever a host computed larger, the ranking is the same.
    a = rounded_top([-1.0 - 1e-12, -1.0, -3.0], [9, 4, 7], 3)
    b = rounded_top([-1.0, -1.0 - 1e-12, -3.0], [9, 4, 7], 3)
    assert a == b == ((4, -1.0), (9, -1.0), (7, -3.0))
    assert all(isinstance(v, float) and float(np.float32(v)) == v for _, v in a)


def test_the_margin_is_the_distance_to_the_nearest_rounding_boundary():
    edge = boundary_above(-1.7)
    assert np.isclose(rounding_margin([edge - 3e-13]), 3e-13, rtol=1e-3)
    assert np.isclose(rounding_margin([edge + 2e-13, -5.5]), 2e-13, rtol=1e-3)
    exact_float32 = float(np.float32(-2.25))  # a float32 itself: half a step from either boundary
    assert rounding_margin([exact_float32]) == float(np.spacing(np.float32(2.25))) / 2
    assert rounding_margin([]) == float("inf")


def test_any_move_smaller_than_the_margin_reports_the_same_bits_and_ranks():
    rng = np.random.default_rng(7)
    for _ in range(200):
        values = np.sort(rng.uniform(-25.0, 0.0, 40))[::-1]
        ids = rng.permutation(1000)[:40]
        margin = margin_of([(values, 25)])
        moved = values + rng.uniform(-1, 1, values.size) * margin.holds_within * 0.999
        assert rounded_top(moved, ids, 25) == rounded_top(values, ids, 25)


def test_a_move_beyond_the_margin_can_change_a_bit():
    edge = boundary_above(-0.75)
    values = [edge - 1e-13, -4.0]
    margin = margin_of([(values, 2)])
    assert margin.holds_within < 2e-13 and not margin.safe
    assert rounded_top([edge + 1e-13, -4.0], [1, 2], 2) != rounded_top(values, [1, 2], 2)


def test_the_ranking_margin_counts_only_gaps_the_rounding_keeps():
    assert np.isclose(ranking_margin([-1.0, -1.0 - 1e-12, -2.0], 3), 1.0)  # the first two round to one float32
    assert ranking_margin([-1.0, -1.5, -1.75], 1) == 0.5  # only the first and the first left out
    assert ranking_margin([-1.0], 1) == float("inf")


def test_the_embedded_golden_records_a_safe_margin(embedded):
    from kit.core.baselines.golden import load_golden

    golden = load_golden(embedded.goldens["exact"])
    margin = golden.provenance["release"]["portable_margin"]
    assert golden.provenance["dtype"] == "float64" and margin["holds_within"] >= SAFE_MARGIN
