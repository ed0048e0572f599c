"""A step in one case's error series, found while every run still passes.

A case passes while its error stays under its bound, so a gate sees nothing until the bound is crossed. The
story this guards against: one backend's error went from 0.068 to 0.0998 across releases, always under its
bound of 0.1; the jump came with one release and nobody saw it until the error crossed. A change in level is
visible long before a crossing, and this module tests for one.

The test: for every split of the series into a before and an after segment (each at least ``min_segment``
points), the two-sample t statistic of the after segment against the before one; the statistic is the
largest |t| over the splits and the split that attains it is the step. Its significance is a permutation
test: under the null hypothesis (no change: the points are i.i.d., or merely exchangeable) every reordering
of the series is as likely as the observed one, so the statistic of reordered series is its null
distribution. That makes the false-alarm rate hold for any noise distribution (skewed, heavy-tailed,
quantised with ties), with no asymptotics for short series, which is what a history of 10 to 1000 runs is.
What it assumes is independence: noise correlated from run to run (a slow wander) reads as steps.

Why a t statistic over values rather than ranks: a permutation test's validity does not depend on the
statistic, only its power does, and ranks cap the evidence of the few newest points. With 10 runs before a
step and 3 after, a rank statistic cannot tell a step of 8 noise sd from one of 1 (both put the 3 on top),
and the centre splits' chance fluctuations drown it; values let the 3 newest runs count for what they
show. In the replayed story (a step of about 8 sd) values announce it two runs after the step, ranks
four. ``ranks=True`` gives the rank version (a max-over-splits Mann-Whitney) for series with wild
outliers; benchmarks/changepoint_power.py measures both.

Why not ``ruptures``: it places change points by a penalised cost, and its penalty is not a false-alarm
rate; the significance, which is what a gate must state, would still have to be built here.

The permutation p-value is Monte Carlo (random reorderings drawn from a fixed seed, so one series always
gets one answer), counted as (1 + reorderings at least as extreme) / (1 + reorderings), which keeps the
rate at or under ``false_alarm``; drawing stops once the count makes significance impossible, so a
series with no step costs one batch, and once it makes significance all but certain (a 1e-6 chance the
full draw would differ), so a clear step costs two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Sequence

import numpy as np

# How many reorderings per unit of false-alarm rate: at 0.01, 10,000. A clear step at the edge of what a
# series can show sits near p = 0.007 (3 new runs after 10); at 2,000 draws the Monte Carlo count would
# miss it about one time in twelve, at 10,000 about one in three thousand.
_DRAWS_PER_ALARM = 100
_SEED = 20260
# Drawing stops early on a clear step once the chance that the full draw would overturn it is below this.
_SETTLED_RISK = 1e-6
# Reorderings drawn per batch: bounds memory (rows x points doubles) for long series.
_BATCH_CELLS = 500_000
# A within-segment variance below this fraction of the total reads as zero (quantised errors can make
# both segments constant while they differ).
_VAR_FLOOR = 1e-12

class Direction(StrEnum):
    """Which way a series stepped, as a step's ``direction`` (and its description) spells it."""

    UP = "up"
    DOWN = "down"


@dataclass(frozen=True)
class SeriesStep:
    """The most likely single step of a series, significant at ``false_alarm``.

    ``index`` is the position (in the series as given, NaNs counted) of the first point after the step;
    ``before``/``after`` are the medians of the two segments; ``statistic`` is the max-over-splits |t|,
    ``threshold`` the critical value from the reorderings drawn (a statistic above it is significant),
    ``p_value`` the permutation p-value. ``skipped`` counts NaN points left out.
    """

    index: int
    before: float
    after: float
    direction: Direction
    statistic: float
    threshold: float
    p_value: float
    false_alarm: float
    points: int
    skipped: int = 0

    def describe(self, label: str | None = None) -> str:
        """One line, e.g. "stepped up from 0.068 to 0.085 at release 2.3"; ``label`` names the index's run."""
        where = label if label is not None else f"point {self.index}"
        line = f"stepped {self.direction} from {self.before:.3g} to {self.after:.3g} at {where}"
        return line + (f" ({self.skipped} missing points skipped)" if self.skipped else "")


@dataclass(frozen=True)
class Finding:
    """The outcome of one test: the step, or None and the reason in one line."""

    step: SeriesStep | None
    reason: str


def find_step(
    values: Sequence[float], *, false_alarm: float = 0.01, min_segment: int = 3, ranks: bool = False
) -> SeriesStep | None:
    """The most likely single step in ``values`` if significant at ``false_alarm`` per series, else None.

    ``examine`` gives the same answer with the reason when there is no step.
    """
    return examine(values, false_alarm=false_alarm, min_segment=min_segment, ranks=ranks).step


def examine(
    values: Sequence[float], *, false_alarm: float = 0.01, min_segment: int = 3, ranks: bool = False
) -> Finding:
    """``find_step`` with its reason: too short, constant, or the p-value that was not small enough."""
    if not 0.0 < false_alarm < 1.0:
        raise ValueError(f"false_alarm must be in (0, 1), not {false_alarm}")
    if min_segment < 1:
        raise ValueError(f"min_segment must be at least 1, not {min_segment}")
    raw = np.asarray(values, dtype=float)
    finite = np.flatnonzero(np.isfinite(raw))
    x = raw[finite]
    skipped = len(raw) - len(x)
    note = f" ({skipped} missing points skipped)" if skipped else ""
    if len(x) < 2 * min_segment:
        return Finding(None, f"too short: {len(x)} points, a step needs {min_segment} on each side{note}")
    if np.all(x == x[0]):
        return Finding(None, f"constant: all {len(x)} points are {x[0]:.3g}{note}")
    scores = _average_ranks(x) if ranks else x
    stat, split, signed = _scan(scores, min_segment)
    p, threshold = _permutation_p(scores, min_segment, stat, false_alarm)
    if p > false_alarm:
        return Finding(None, f"no step: p = {p:.3g} > {false_alarm:g} (max |t| {stat:.3g}){note}")
    step = SeriesStep(
        index=int(finite[split]),
        before=float(np.median(x[:split])),
        after=float(np.median(x[split:])),
        direction=Direction.UP if signed > 0 else Direction.DOWN,
        statistic=stat,
        threshold=threshold,
        p_value=p,
        false_alarm=false_alarm,
        points=len(x),
        skipped=skipped,
    )
    return Finding(step, step.describe() + f" (p = {p:.3g})")


def find_steps(
    values: Sequence[float], *, false_alarm: float = 0.01, min_segment: int = 3, ranks: bool = False
) -> list[SeriesStep]:
    """Every step, oldest first: a step, then the next one in the points after it, and so on.

    Each step is tested at ``false_alarm`` on the points after the previous one, so a history table can
    show a second step that the one-step test of the whole series would hide behind the first.
    """
    steps: list[SeriesStep] = []
    start = 0
    while True:
        found = find_step(values[start:], false_alarm=false_alarm, min_segment=min_segment, ranks=ranks)
        if found is None:
            return steps
        step = replace(found, index=found.index + start)
        steps.append(step)
        start = step.index


def completed_at_last(
    values: Sequence[float], *, false_alarm: float = 0.01, min_segment: int = 3, ranks: bool = False
) -> SeriesStep | None:
    """The step the newest point completes: found with it, not found without it, else None.

    For online use after each run: a step at run 10 is announced at the first run that makes it
    significant, and not again at runs after it (it was already found without them); a later second step
    is announced when it completes. The history table shows every step through ``find_steps``.
    """
    if len(values) < 2 or not math.isfinite(values[-1]):
        return None
    now = find_steps(values, false_alarm=false_alarm, min_segment=min_segment, ranks=ranks)
    before = find_steps(values[:-1], false_alarm=false_alarm, min_segment=min_segment, ranks=ranks)
    # Counted, not matched by index: the estimated index of an announced step may move by a point as runs
    # arrive, and that must not read as a new step.
    return now[-1] if len(now) > len(before) else None


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, tied values sharing the mean of their ranks."""
    order = np.argsort(x, kind="stable")
    ranked = np.empty(len(x))
    ranked[order] = np.arange(1, len(x) + 1)
    uniq, inverse = np.unique(x, return_inverse=True)
    sums = np.bincount(inverse, weights=ranked)
    counts = np.bincount(inverse)
    return (sums / counts)[inverse] if len(uniq) < len(x) else ranked


def _t_rows(rows: np.ndarray, min_segment: int) -> np.ndarray:
    """Signed t of the after segment against the before one, for each row and each allowed split.

    Rows are centred and scaled by their (shared) spread so the running sums stay well conditioned.
    """
    n = rows.shape[1]
    k = np.arange(min_segment, n - min_segment + 1, dtype=float)  # points before the split
    s = np.cumsum(rows, axis=1)[:, min_segment - 1 : n - min_segment]
    total = rows.sum(axis=1, keepdims=True)
    squares = (rows * rows).sum(axis=1, keepdims=True)
    within = squares - s * s / k - (total - s) ** 2 / (n - k)
    var = np.maximum(within, _VAR_FLOOR * squares) / max(n - 2, 1)
    diff = (total - s) / (n - k) - s / k
    return diff / np.sqrt(var * (1.0 / k + 1.0 / (n - k)))


def _standardised(x: np.ndarray) -> np.ndarray:
    """``x`` centred and scaled to unit spread. It is divided by its largest magnitude first: the square of a value
    above about 1e154 overflows and of one below about 1e-154 underflows, which made the statistic NaN (read as a
    significant step, the wrong way); the t statistic does not depend on the scale."""
    scaled = x / np.max(np.abs(x))
    centred = scaled - scaled.mean()
    spread = np.sqrt(np.mean(centred * centred))
    return centred / spread if spread > 0 else centred


def _scan(x: np.ndarray, min_segment: int) -> tuple[float, int, float]:
    """The max |t| over splits, the split attaining it (first index after), and its signed t."""
    t = _t_rows(_standardised(x)[None, :], min_segment)[0]
    best = int(np.argmax(np.abs(t)))
    return float(abs(t[best])), best + min_segment, float(t[best])


def _permutation_p(x: np.ndarray, min_segment: int, stat: float, false_alarm: float) -> tuple[float, float]:
    """Monte Carlo permutation p-value of ``stat``, and the critical |t| of the draws made.

    Stops drawing once the count of reorderings at least as extreme makes p > false_alarm certain.
    """
    draws = math.ceil(_DRAWS_PER_ALARM / false_alarm) - 1
    allowed = math.floor(false_alarm * (draws + 1)) - 1  # extreme reorderings a significant p tolerates
    z = _standardised(x)
    rng = np.random.default_rng(_SEED)
    batch = max(100, min(1000, _BATCH_CELLS // len(z)))
    extreme, made = 0, 0
    null: list[np.ndarray] = []
    # The observed value is compared at a hair below itself: reorderings that reproduce the observed
    # arrangement give the same |t| up to rounding, and must count as at least as extreme.
    bar = stat * (1.0 - 1e-9)
    while made < draws:
        rows = rng.permuted(np.broadcast_to(z, (min(batch, draws - made), len(z))), axis=1)
        maxima = np.abs(_t_rows(rows, min_segment)).max(axis=1)
        extreme += int(np.count_nonzero(maxima >= bar))
        made += len(rows)
        null.append(maxima)
        if extreme > allowed or _surely_significant(extreme, made, false_alarm):
            break
    p = (1 + extreme) / (1 + made)
    drawn = np.sort(np.concatenate(null))[::-1]
    # A statistic above the (alarm x draws)-th largest draw would have been significant at this count.
    cut = max(math.floor(false_alarm * (made + 1)) - 1, 0)
    threshold = float(drawn[min(cut, len(drawn) - 1)]) if p <= false_alarm else math.nan
    return p, threshold


def _surely_significant(extreme: int, made: int, false_alarm: float) -> bool:
    """Whether the count so far leaves at most a 1e-6 chance that the full count would not be significant.

    A clear step is settled after a fraction of the draws (about 1,400 of 10,000 at 0.01): the Chernoff
    bound on a binomial count says a true p at ``false_alarm`` would show this few extreme reorderings in
    ``made`` with probability under ``_SETTLED_RISK``.
    """
    seen = extreme / made
    if seen >= false_alarm:
        return False
    kl = (seen * math.log(seen / false_alarm) if seen else 0.0) + (1 - seen) * math.log((1 - seen) / (1 - false_alarm))
    return made * kl > math.log(1 / _SETTLED_RISK)
