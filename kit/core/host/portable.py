"""Exact results that no machine can move: computed in float64, reported rounded to float32.

A float32 forward's last bits follow whichever kernels computed it: ATen's vector width, oneDNN's instruction
set, MKL's blocking (chosen by CPU vendor, model and cache size) and the thread count each change the order of
its sums. Pinning them does not carry the bits across CPU vendors and models (docs/exact-baselines.md). The same
forward in float64 differs between those kernels too, but by about 1e-16 of each value, about a billionth of a
float32 step: rounded to float32, every value lands on the same float32 unless its float64 value lies within that
distance of the midpoint between two float32 numbers.

So an exact golden made this way holds on any host whose float64 result is closer to the maker's than the
golden's **margin**: the smallest distance, over every value it records, between the maker's float64 value and
the nearest float32 rounding boundary (and, for the ranking, between two values whose order the float32 values do
not already decide). ``golden make`` records the margin; docs/exact-baselines.md compares it with the largest
float64 difference measured under every kernel choice a host allows.

Ties after rounding are ordered by token id, so that a ranking never depends on which of two float64 values a
host computed as larger. Stdlib and numpy only: it runs in the case kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

# The runtime key of a portable exact result: it holds on every host (kit.core.host.runtime keys the others).
PORTABLE_RUNTIME = "portable: float64 rounded to float32"
PORTABLE_DTYPE = "float64"
# A margin under this is too close to float64's own differences between kernels (about 1e-16 of a value, 1e-15
# in the logprobs of the embedded model) to promise the same float32 on every host.
SAFE_MARGIN = 1e-12


def rounded_top(values: Sequence[float], ids: Sequence[int], top_n: int) -> tuple[tuple[int, float], ...]:
    """The ``top_n`` most likely tokens of float64 logprobs ``values`` (for token ``ids``), each value rounded to
    float32 and the ranking ordered by (rounded logprob descending, token id ascending). ``values`` must hold more
    than ``top_n`` candidates where the cut could fall inside a tie (the caller takes a few more than it keeps)."""
    rounded = np.asarray(values, dtype=np.float64).astype(np.float32)
    order = sorted(range(len(rounded)), key=lambda i: (-float(rounded[i]), int(ids[i])))
    return tuple((int(ids[i]), float(rounded[i])) for i in order[:top_n])


def rounding_margin(values: Sequence[float]) -> float:
    """The smallest distance from any float64 value in ``values`` to the nearest float32 rounding boundary (the
    midpoint between the two float32 numbers around it): how far another host's float64 result may move before
    one of these values rounds to another float32. ``inf`` for an empty sequence."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("inf")
    nearest = x.astype(np.float32)
    # The boundaries halfway to the float32 neighbours on either side (the spacing differs across a power of 2).
    up = (nearest.astype(np.float64) + np.nextafter(nearest, np.float32(np.inf)).astype(np.float64)) / 2
    down = (nearest.astype(np.float64) + np.nextafter(nearest, np.float32(-np.inf)).astype(np.float64)) / 2
    return float(np.min(np.minimum(np.abs(up - x), np.abs(x - down))))


def ranking_margin(values: Sequence[float], kept: int) -> float:
    """The smallest float64 gap between two of the ``kept`` most likely values (and the first value left out) whose
    float32 roundings differ: the ranking they decide holds while no host moves a value by half of it. Values that
    round to one float32 are ordered by token id, so their float64 order does not matter. ``inf`` when fewer than
    two values are given."""
    x = np.sort(np.asarray(values, dtype=np.float64)[np.isfinite(values)])[::-1][: kept + 1]
    if x.size < 2:
        return float("inf")
    gaps = x[:-1] - x[1:]
    distinct = x[:-1].astype(np.float32) != x[1:].astype(np.float32)
    return float(np.min(gaps[distinct])) if distinct.any() else float("inf")


@dataclass(frozen=True)
class Margin:
    """How far a portable exact result's float64 values may move on another host before a float32 bit changes:
    the smallest rounding margin, and half the smallest ranking gap, over every prompt."""

    rounding: float
    ranking: float

    @property
    def holds_within(self) -> float:
        """The smallest float64 move that could change a reported bit or rank."""
        return min(self.rounding, self.ranking / 2)

    @property
    def safe(self) -> bool:
        """Whether the float64 values sit far enough from a float32 rounding boundary (SAFE_MARGIN) that
        another host's float64 kernels cannot flip a reported bit."""
        return self.holds_within >= SAFE_MARGIN

    def to_dict(self) -> dict:
        """The margin as a golden's provenance records it, so a reader can see how near the result came to a
        rounding or ranking boundary."""
        return {"rounding": self.rounding, "ranking": self.ranking, "holds_within": self.holds_within}


def margin_of(per_prompt: Sequence[tuple[Sequence[float], int]]) -> Margin:
    """The margin of a whole result: ``per_prompt`` holds each prompt's float64 candidate values and how many of
    them it keeps."""
    rounding = min((rounding_margin(v[:k]) for v, k in per_prompt), default=float("inf"))
    ranking = min((ranking_margin(v, k) for v, k in per_prompt), default=float("inf"))
    return Margin(rounding, ranking)
