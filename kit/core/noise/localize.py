"""Where a failing candidate first leaves the noise: the comparison behind `parity-kit localize`.

The residual stream is read at every *point* of the forward pass: after the embeddings, and in each decoder
block after attention and after the MLP. At each point the candidate's hidden states are compared with the
float32 reference's, and so are those of a clean run (the case's own settings and model, nothing broken).
The clean run's difference is the noise at that point: it grows from layer to layer as rounding compounds,
so one fixed threshold would either miss an early fault or flag every late layer. A point has left the noise
when the candidate's difference is above ``k`` times the clean run's there (and above an absolute floor, so
that a bit-exact clean run, a float32 case, does not make every last-ulp difference a divergence).

``k = 4``: clean bfloat16 runs that differ only in how a healthy engine computes stay close to one another
at every point. On the embedded model, over all 64 prompts, torch's math SDPA kernel is within 1.05 x of the
default's difference, and even eager attention (whose score x value product is another precision) within
1.51 x (docs/figures.md). A 5 % scale of layer 1's attention output projection
(o_proj_scale 0.05) moves its point by 4.1-5.8 x, 5 % noise in layer 0's MLP (mlp_noise 0.05) by 7.6-8.1 x.
4 is past every clean spread measured, with room for a larger model's, and still names faults that small.

Stdlib and numpy only: the comparison can run in any kernel.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Mapping, Sequence

K = 4.0  # how far above the clean run's difference a point must be to leave the noise (see above)
# Relative L2 differences below this are float32 rounding (about 8 ulps), whatever the clean run says.
FLOOR = 1e-6
# The metric that decides: the relative L2 difference over all positions, the one least moved by a single
# outlier; the others are reported beside it.
METRIC = "rel_l2_all"
METRICS = ("rel_l2_all", "rel_l2_last", "max_abs_all", "max_abs_last")


class Sublayer(StrEnum):
    """Where in the residual stream a point is: after the embeddings, or after one block's attention or MLP."""
    EMBEDDINGS = "embeddings"
    ATTENTION = "attention"
    MLP = "mlp"


@dataclass(frozen=True)
class Point:
    """A place in the residual stream: the embeddings (layer None), or one block's attention or MLP."""

    layer: int | None
    sublayer: Sublayer

    @property
    def label(self) -> str:
        """The point as a reader names it: the embeddings, or a layer and its sublayer (attention, MLP)."""
        return Sublayer.EMBEDDINGS if self.layer is None else f"layer {self.layer} {self.sublayer}"


def points(n_layers: int) -> list[Point]:
    """Every point of a model of ``n_layers`` blocks, in the order the forward pass reaches them."""
    return [Point(None, Sublayer.EMBEDDINGS)] + [Point(i, s) for i in range(n_layers)
                                                 for s in (Sublayer.ATTENTION, Sublayer.MLP)]


def stream(embedded, after_attention, after_mlp) -> list[tuple[Point, "object"]]:
    """A residual stream in forward order (as ``points`` lists them) from the embeddings [positions, hidden]
    and each layer's states after its attention and after its MLP, [layers, positions, hidden] each."""
    out = [(Point(None, Sublayer.EMBEDDINGS), embedded)]
    for i, (attention, mlp) in enumerate(zip(after_attention, after_mlp)):
        out += [(Point(i, Sublayer.ATTENTION), attention), (Point(i, Sublayer.MLP), mlp)]
    return out


def point_metrics(candidate, reference) -> dict[str, float]:
    """The four metrics of one point: ``candidate`` and ``reference`` are [positions, hidden] arrays."""
    import numpy as np

    c, r = np.asarray(candidate, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if c.shape != r.shape:
        raise ValueError(f"hidden states of shapes {c.shape} and {r.shape} cannot be compared")
    d = c - r

    def rel(x, ref) -> float:
        norm = float(np.linalg.norm(ref))
        return float(np.linalg.norm(x)) / norm if norm > 0 else (0.0 if not np.any(x) else math.inf)

    return {"rel_l2_all": rel(d, r), "rel_l2_last": rel(d[-1], r[-1]),
            "max_abs_all": float(np.abs(d).max()), "max_abs_last": float(np.abs(d[-1]).max())}


@dataclass(frozen=True)
class PointResult:
    point: Point
    candidate: dict[str, float]  # candidate against the reference, every metric
    clean: dict[str, float]  # the clean run against the reference: the noise here
    threshold: float  # max(k x clean, floor) on METRIC
    ratio: float  # candidate / clean on METRIC (inf when the clean run is exact and the candidate is not)
    diverged: bool

    def to_dict(self) -> dict:
        """The comparison at one point as localize.json keeps it; an infinite ratio (a clean difference of 0)
        is written as null, which strict JSON can hold."""
        return {"point": self.point.label, "layer": self.point.layer, "sublayer": self.point.sublayer,
                "candidate": self.candidate, "clean": self.clean, "threshold": self.threshold,
                "ratio": _finite(self.ratio), "diverged": self.diverged}


@dataclass(frozen=True)
class Localization:
    """One prompt's curve and the first point where it leaves the noise (None: it never does)."""

    prompt_id: str
    results: list[PointResult]
    k: float = K
    floor: float = FLOOR
    metric: str = METRIC
    notes: list[str] = field(default_factory=list)

    @property
    def first(self) -> PointResult | None:
        """The first point, in the model's order, whose candidate difference left the noise; None where none did."""
        return next((r for r in self.results if r.diverged), None)

    @property
    def verdict(self) -> str:
        """The localization's verdict line (``verdict_line``) for its first divergent point."""
        return verdict_line(self.first.point if self.first else None, self.k)

    def to_dict(self) -> dict:
        """The localization of one prompt as localize.json keeps it: every point compared, the first
        divergent one and the verdict."""
        first = self.first
        return {"prompt": self.prompt_id, "k": self.k, "floor": self.floor, "metric": self.metric,
                "first_divergent": asdict(first.point) | {"label": first.point.label} if first else None,
                "verdict": self.verdict, "points": [r.to_dict() for r in self.results], "notes": list(self.notes)}


def leaves_noise(point: Point, candidate: Mapping[str, float], clean: Mapping[str, float], k: float = K,
                 floor: float = FLOOR, metric: str = METRIC) -> PointResult:
    """Whether the candidate's difference at ``point`` is above ``k`` x the clean run's (and the floor)."""
    c, noise = candidate[metric], clean[metric]
    threshold = max(k * noise, floor)
    ratio = c / noise if noise > 0 else (1.0 if c == 0 else math.inf)
    return PointResult(point, dict(candidate), dict(clean), threshold, ratio, c > threshold)


def localize(prompt_id: str, curve_points: Sequence[Point], candidate: Sequence[Mapping[str, float]],
             clean: Sequence[Mapping[str, float]], k: float = K, floor: float = FLOOR,
             metric: str = METRIC) -> Localization:
    """Judge every point of one prompt's curves (candidate and clean, each against the reference)."""
    if not (len(curve_points) == len(candidate) == len(clean)):
        raise ValueError(f"{len(curve_points)} points, {len(candidate)} candidate and {len(clean)} clean differences")
    if k < 1:
        raise ValueError(f"k = {k}: a candidate within the clean run's own difference cannot have left the noise")
    judged = [leaves_noise(p, c, n, k, floor, metric) for p, c, n in zip(curve_points, candidate, clean)]
    return Localization(prompt_id, judged, k, floor, metric)


def earliest(localizations: Sequence[Localization]) -> Localization | None:
    """The prompt whose curve leaves the noise first (ties: the first prompt given); None if none does."""
    order: dict[int, Localization] = {}
    for loc in localizations:
        if loc.first is not None:
            index = [r.point for r in loc.results].index(loc.first.point)
            order.setdefault(index, loc)
    return order[min(order)] if order else None


def verdict_line(point: Point | None, k: float = K) -> str:
    """localize's verdict in one line: the first point that left the noise, or that none did (and by what factor
    of the clean run's difference)."""
    if point is None:
        return (f"first divergent: none (every point stays within {k:g} x the clean run's difference from "
                "the reference)")
    return f"first divergent: {point.label}"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
