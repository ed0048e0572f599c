"""The drift test: a systematic shift over all of a case's prompts that no single prompt's bound sees.

An engine fault that moves every prompt a little (a RoPE base a few percent off, a logit scale, one
projection scaled) keeps each prompt under its bound, yet it moves nearly every prompt. Per prompt,
bfloat16 noise is large and erratic (one prompt's error varies by 60 % between clean variants of the
same case); averaged over a case's prompts it is nearly constant (the mean error of clean hf bfloat16
variants spans 3 %: docs/calibration.md). So the test averages over prompts and compares the run
with the clean samples of its calibration record:

- ``error``: the mean max probability error over the prompts, which grows under any fault (one-sided);
- ``shift``: the mean signed change of the golden top token's probability, which a fault that sharpens
  or flattens the distributions moves one way (two-sided: its direction is part of the message).

Each statistic of a new clean run is taken as one more draw of the samples' normal distribution: the
run fails when it falls outside the prediction interval (Student's t with n-1 degrees of freedom, n
distinct samples) at the case's false-failure rate, split evenly over the tests and sides. A minimum
margin keeps a calibration whose samples agree to the last digit from failing every other rounding.
Stdlib only: it runs in the kernel.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

from kit.core.calibration import spread_factor
from kit.core.records import PromptScore

# The smallest difference the tests act on, whatever the samples' spread: a mean error 5 % above the
# calibration's, a mean shift of 10 % of its mean error, and never less than the dtype's resolution
# (kit.core.calibration.RESOLUTION). Below these, no reviewer would call it a fault.
MIN_RELATIVE_ERROR = 0.05
MIN_RELATIVE_SHIFT = 0.10


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with integer ``df`` (the closed forms of Abramowitz and Stegun 26.7)."""
    t = abs(t)
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        inside = s * total
    else:
        total = 0.0
        if df > 1:
            term = total = 1.0
            for k in range(1, (df - 1) // 2):
                term *= c2 * (2 * k) / (2 * k + 1)
                total += term
        inside = 2 / math.pi * (theta + s * math.cos(theta) * total)
    return max(0.0, min(1.0, 1.0 - inside))


def t_quantile_two_sided(p: float, df: int) -> float:
    """The t with P(|T| >= t) = p, by bisection (monotone; 80 halvings reach float precision)."""
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_two_sided_p(mid, df) > p:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass
class DriftStatistic:
    test: str  # "error" or "shift"
    value: float  # the run's mean over its prompts
    reference: float  # the clean samples' mean of the same
    low: float  # the clean interval; outside it the test fails
    high: float
    p_value: float | None  # two-sided for shift, one-sided for error; None from two samples (range rule)
    samples: int

    @property
    def failed(self) -> bool:
        return self.value > self.high if self.test == "error" else not (self.low <= self.value <= self.high)


@dataclass
class DriftResult:
    """The drift test of one case: its statistics, the smallest p-value (Bonferroni-adjusted), the verdict."""

    calibration: str  # the record's SHA-256
    alpha: float
    prompts: int
    statistics: list[DriftStatistic]
    passed: bool
    p_value: float | None
    failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> "DriftResult":
        return cls(calibration=d["calibration"], alpha=d["alpha"], prompts=d["prompts"],
                   statistics=[DriftStatistic(**s) for s in d["statistics"]], passed=d["passed"],
                   p_value=d["p_value"], failures=list(d.get("failures", [])))


def sample_means(samples: Sequence[Mapping], prompts: Sequence[str]) -> dict[str, list[float]]:
    """Each clean sample's mean error and mean shift over ``prompts`` (the calibration's side of the test)."""
    return {"error": [statistics.fmean(s["errors"][p] for p in prompts) for s in samples],
            "shift": [statistics.fmean(s["shifts"][p] for p in prompts) for s in samples]}


def interval(values: Sequence[float], alpha_side: float, two_sided: bool, minimum: float) -> tuple[float, float]:
    """The prediction interval of one more draw: mean +- t x sd x sqrt(1 + 1/n), at least +- ``minimum``.
    Two samples give no usable t (one degree of freedom: t = 1273 at 0.1 %); their range, widened by
    d2(10)/d2(2) as the bound rule widens a spread, stands in for it."""
    n = len(values)
    if n == 2:
        lo, hi = min(values), max(values)
        margin = max((hi - lo) * (spread_factor(2) - 1) / 2, minimum)
        return (lo - margin if two_sided else -math.inf), hi + margin
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if n > 1 else 0.0
    t = t_quantile_two_sided(2 * alpha_side, n - 1) if n > 1 else math.inf
    half = t * sd * math.sqrt(1 + 1 / n) if sd > 0 else 0.0
    half = max(half, minimum)
    return (mean - half if two_sided else -math.inf), mean + half


def drift_test(scores: Sequence[PromptScore], reference: Mapping) -> DriftResult:
    """The case's prompts against the calibration ``reference`` (CalibrationRecord.reference())."""
    scored = [s for s in scores if _finite(s.max_probability_error) and _finite(s.top_probability_shift)]
    return drift_of({s.id: s.max_probability_error for s in scored},
                    {s.id: s.top_probability_shift for s in scored}, reference)


def drift_of(errors: Mapping[str, float], shifts: Mapping[str, float], reference: Mapping) -> DriftResult:
    """The test on one run's per-prompt errors and shifts (prompts the reference has no sample of left out)."""
    alpha = reference["drift"]["alpha"]
    samples = reference["drift"]["samples"]
    ids = [p for p in errors if p in samples[0]["errors"] and p in shifts]
    means = sample_means(samples, ids)
    n = len(samples)
    run_error = statistics.fmean(errors[p] for p in ids)
    run_shift = statistics.fmean(shifts[p] for p in ids)
    ref_error = statistics.fmean(means["error"])
    floor = float(reference.get("resolution") or 0.0)  # a float32 case's means move this much between hosts
    stats = []
    for test, value, two_sided, minimum in (
            ("error", run_error, False, max(MIN_RELATIVE_ERROR * ref_error, floor)),
            ("shift", run_shift, True, max(MIN_RELATIVE_SHIFT * ref_error, floor))):
        side = alpha / 2 / (2 if two_sided else 1)  # two tests; a two-sided one splits its share again
        low, high = interval(means[test], side, two_sided, minimum)
        stats.append(DriftStatistic(test, value, statistics.fmean(means[test]), low, high,
                                    _p_value(value, means[test], two_sided), n))
    failures = [_message(s, len(ids)) for s in stats if s.failed]
    adjusted = min((min(1.0, 2 * s.p_value) for s in stats if s.p_value is not None), default=None)
    return DriftResult(reference["sha256"], alpha, len(ids), stats, not failures, adjusted, failures)


def _p_value(value: float, values: Sequence[float], two_sided: bool) -> float | None:
    n = len(values)
    if n < 3:  # no distribution to take a p-value from: the range rule decides (see interval)
        return None
    sd = statistics.stdev(values) if n > 1 else 0.0
    if sd == 0:
        return 0.0 if value != values[0] else 1.0
    t = (value - statistics.fmean(values)) / (sd * math.sqrt(1 + 1 / n))
    p = t_two_sided_p(t, n - 1)
    if two_sided:
        return p
    return p / 2 if t > 0 else 1 - p / 2


def _message(s: DriftStatistic, prompts: int) -> str:
    if s.test == "error":
        what = (f"mean max probability error over {prompts} prompts grew to {s.value:.4g}, "
                f"{s.value / s.reference:.2f} x the calibrated {s.reference:.4g} (clean runs stay below {s.high:.4g})")
    else:
        way = "up: the distributions sharpened" if s.value > s.high else "down: the distributions flattened"
        what = (f"golden top token's probability moved {way}; mean shift over {prompts} prompts {s.value:+.4g} "
                f"against the calibrated {s.reference:+.4g} (clean runs stay within {s.low:+.4g} .. {s.high:+.4g})")
    evidence = f"p = {s.p_value:.2g}" if s.p_value is not None else "the range rule, no p-value"
    return f"drift: {what}; {evidence} from {s.samples} clean samples"


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
