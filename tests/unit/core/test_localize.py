"""The localizer's comparison: metrics of one point, the noise threshold, and the first point that leaves it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kit.core.noise.localize import (FLOOR, K, Localization, Point, Sublayer, earliest, leaves_noise, localize,
                                     point_metrics, points, verdict_line)


def curve(*values: float) -> list[dict[str, float]]:
    """A synthetic curve: only the deciding metric matters to the verdict; the others ride along."""
    return [{"rel_l2_all": v, "rel_l2_last": v, "max_abs_all": v, "max_abs_last": v} for v in values]


PTS = points(2)  # embeddings, layer 0 attention, layer 0 mlp, layer 1 attention, layer 1 mlp


def test_points_run_in_forward_order_with_their_labels():
    assert [p.label for p in PTS] == ["embeddings", "layer 0 attention", "layer 0 mlp", "layer 1 attention",
                                      "layer 1 mlp"]


def test_differences_of_a_known_change():
    ref = np.array([[3.0, 4.0], [0.0, 5.0]])  # norms: 5 per row, sqrt(50) in all
    cand = ref.copy()
    cand[1, 1] = 6.0  # only the last position moves, by 1
    d = point_metrics(cand, ref)
    assert d["max_abs_all"] == 1.0 and d["max_abs_last"] == 1.0
    assert d["rel_l2_last"] == pytest.approx(1 / 5)
    assert d["rel_l2_all"] == pytest.approx(1 / math.sqrt(50))
    assert point_metrics(ref, ref) == {"rel_l2_all": 0.0, "rel_l2_last": 0.0, "max_abs_all": 0.0, "max_abs_last": 0.0}
    with pytest.raises(ValueError, match="shapes"):
        point_metrics(ref[:1], ref)


def test_a_curve_that_grows_like_its_noise_names_nothing():
    # Rounding compounds layer by layer: the candidate grows as the clean run does, never k x past it.
    loc = localize("p", PTS, curve(1e-3, 3e-3, 4e-3, 6e-3, 9e-3), curve(1e-3, 2e-3, 3e-3, 4e-3, 5e-3))
    assert loc.first is None
    assert loc.verdict == f"first divergent: none (every point stays within {K:g} x the clean run's difference " \
                          "from the reference)"


def test_the_first_point_above_k_times_its_own_noise_is_named():
    # Layer 0's attention is within its noise, its MLP 5 x past it; later points follow the fault downstream.
    loc = localize("p", PTS, curve(1e-3, 2e-3, 1.5e-2, 2e-2, 2.5e-2), curve(1e-3, 2e-3, 3e-3, 4e-3, 5e-3))
    assert loc.first.point == Point(0, Sublayer.MLP)
    assert loc.first.ratio == pytest.approx(5.0)
    assert loc.first.threshold == pytest.approx(K * 3e-3)
    assert loc.verdict == "first divergent: layer 0 mlp"
    assert [r.diverged for r in loc.results] == [False, False, True, True, True]


def test_the_threshold_is_per_point_not_one_line():
    # 8e-3 at layer 1's MLP is within 4 x its noise there, but the same size at layer 0 attention is not.
    late = localize("p", PTS, curve(1e-3, 1e-3, 1e-3, 1e-3, 8e-3), curve(1e-3, 1e-3, 1e-3, 1e-3, 4e-3))
    early = localize("p", PTS, curve(1e-3, 8e-3, 8e-3, 8e-3, 8e-3), curve(1e-3, 1e-3, 1e-3, 1e-3, 4e-3))
    assert late.first is None
    assert early.first.point == Point(0, Sublayer.ATTENTION)


def test_exactly_k_times_the_noise_is_still_noise():
    loc = localize("p", PTS[:2], curve(1e-3, K * 2e-3), curve(1e-3, 2e-3))
    assert loc.first is None


def test_a_bit_exact_clean_run_keeps_a_floor():
    # A float32 case: the clean run matches the reference exactly, so k x 0 would make any last-ulp
    # difference a divergence; the floor keeps it noise, and past the floor the point is named.
    below = localize("p", PTS[:3], curve(0.0, FLOOR / 2, FLOOR / 2), curve(0.0, 0.0, 0.0))
    assert below.first is None
    assert below.results[0].ratio == 1.0
    above = localize("p", PTS[:3], curve(0.0, FLOOR / 2, 1e-3), curve(0.0, 0.0, 0.0))
    assert above.first.point == Point(0, Sublayer.MLP) and above.first.ratio == math.inf
    assert above.to_dict()["points"][2]["ratio"] is None  # JSON has no infinity


def test_k_below_one_is_refused_and_lengths_must_match():
    with pytest.raises(ValueError, match="k = 0.5"):
        localize("p", PTS[:1], curve(1.0), curve(1.0), k=0.5)
    with pytest.raises(ValueError, match="5 points, 4 candidate"):
        localize("p", PTS, curve(1, 1, 1, 1), curve(1, 1, 1, 1, 1))


def test_judge_uses_only_the_deciding_metric():
    cand = {"rel_l2_all": 1e-3, "rel_l2_last": 1.0, "max_abs_all": 9.0, "max_abs_last": 9.0}
    clean = {"rel_l2_all": 1e-3, "rel_l2_last": 1e-3, "max_abs_all": 1e-3, "max_abs_last": 1e-3}
    assert not leaves_noise(Point(0, Sublayer.MLP), cand, clean).diverged
    assert leaves_noise(Point(0, Sublayer.MLP), cand, clean, metric="rel_l2_last").diverged


def test_earliest_takes_the_prompt_that_leaves_the_noise_first():
    noise = curve(1e-3, 1e-3, 1e-3, 1e-3, 1e-3)
    late = localize("late", PTS, curve(1e-3, 1e-3, 1e-3, 1e-2, 1e-2), noise)
    early = localize("early", PTS, curve(1e-3, 1e-3, 1e-2, 1e-2, 1e-2), noise)
    clean = localize("clean", PTS, noise, noise)
    assert earliest([late, clean, early]).prompt_id == "early"
    assert earliest([clean]) is None
    assert isinstance(earliest([late]), Localization)


def test_verdict_line_names_layer_and_sublayer_or_the_embeddings():
    assert verdict_line(Point(1, "attention")) == "first divergent: layer 1 attention"
    assert verdict_line(Point(None, "embeddings")) == "first divergent: embeddings"


def test_a_stream_from_per_layer_arrays_runs_in_the_order_points_lists():
    from kit.core.noise.localize import stream

    built = stream("e", ["a0", "a1"], ["m0", "m1"])
    assert [p for p, _ in built] == points(2)
    assert [s for _, s in built] == ["e", "a0", "m0", "a1", "m1"]
