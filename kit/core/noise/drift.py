"""The drift test: a systematic shift over all of a case's prompts that no single prompt's bound sees.

An engine fault that moves every prompt a little (a RoPE base a few percent off, a logit scale, one
projection scaled) keeps each prompt under its bound, yet it moves nearly every prompt. Per prompt,
bfloat16 noise is large and erratic (one prompt's error varies by 60 % between clean variants of the
same case); averaged over a case's prompts it is nearly constant (the mean error of clean hf bfloat16
variants spans 3 %: docs/calibration.md). So the test averages over prompts and compares the run
with the clean samples of its calibration record:

- ``error``: the mean max probability error over the prompts, which grows under any fault; and which no
  clean run of a reduced-precision case takes far below the clean samples' (a bfloat16 engine's error
  against a float32 golden is its rounding, the same on every variant). A run below the lower end is
  implausibly exact for its noise class: the engine is not computing in the dtype the case says, or it
  replays the golden, and either way what passed is not the engine the case describes. That side is
  tested only where the interval's lower end is clearly above zero (above the dtype's cross-host
  resolution): a float32 case's error sits at the floor, where an exact run is an ordinary one;
- ``shift``: the mean signed change of the golden top token's probability, which a fault that sharpens
  or flattens the distributions moves one way (two-sided: its direction is part of the message).

Each statistic of a new clean run is taken as one more draw of the samples' normal distribution: the
run fails when it falls outside the prediction interval (Student's t with n-1 degrees of freedom, n
distinct samples). The case's false-failure rate is split in halves over the two tests; the shift test
splits its half evenly over its sides, the error test spends 90 % of its half on the upper side, where
faults are small, and 10 % on the lower, where what it catches (an exact replay) lies far off. So the
rate stays the case's alpha, and the upper side is as sensitive as a one-sided test at 90 % of its share.
A minimum margin keeps a calibration whose samples agree to the last digit from failing every other
rounding. Stdlib only: it runs in the kernel.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence, TypeGuard

from kit.core.noise import special
from kit.core.noise.rule import SETTLES_FROM, spread_factor
from kit.core.records.records import PromptScore
from kit.core.rules import rules
from kit.core.rules.failure import Failure

# The smallest difference the tests act on, whatever the samples' spread: a mean error 5 % above the
# calibration's, a mean shift of 10 % of its mean error, and never less than the dtype's resolution
# (kit.core.noise.rule.RESOLUTION). Below these, no reviewer would call it a fault.
MIN_RELATIVE_ERROR = 0.05
MIN_RELATIVE_SHIFT = 0.10
# The error test's share of its half of the false-failure rate spent on its lower side (see the module).
LOW_SHARE = 0.1


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom, the tail itself (kit.core.noise.special), so that a
    p-value of 1e-30 reads as such, not as the 1.1e-16 that one minus a number near 1 floors at."""
    return special.t_two_sided(t, df)


def t_quantile_two_sided(p: float, df: int) -> float:
    """The t with P(|T| >= t) = p, for any p in (0, 1] (kit.core.noise.special)."""
    return special.t_two_sided_quantile(p, df)


@dataclass(frozen=True)
class DriftStatistic:
    test: str  # "error" or "shift"
    value: float  # the run's mean over its prompts
    reference: float  # the clean samples' mean of the same
    low: float  # the clean interval; outside it the test fails (-inf, or None once in JSON: no lower side)
    high: float
    # Two-sided for shift; for error one-sided, upward, or downward for a run below the lower end. None from
    # two samples (range rule).
    p_value: float | None
    samples: int

    @property
    def failed(self) -> bool:
        """Whether the statistic lies outside its interval (an open lower end for a one-sided test): one
        failed statistic fails the drift test."""
        low = -math.inf if self.low is None else self.low
        return not (low <= self.value <= self.high)


@dataclass(frozen=True)
class DriftResult:
    """The drift test of one case: its statistics, the smallest p-value (Bonferroni-adjusted), the verdict."""

    calibration: str  # the record's SHA-256
    alpha: float
    prompts: int
    statistics: list[DriftStatistic]
    passed: bool
    p_value: float | None
    failures: list[str] = field(default_factory=list)
    # ``failures`` as data (kit.core.verdict); empty in a record written before failures had kinds.
    typed_failures: list[Failure] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The result as a case result keeps it, its failures typed, so a reader asks their kinds rather than
        their words."""
        d = asdict(self)
        d["typed_failures"] = [f.to_dict() for f in self.typed_failures]
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "DriftResult":
        """A recorded drift result read back; a failure of a kind this kit does not know is left out of the
        typed ones (its line stays)."""
        return cls(calibration=d["calibration"], alpha=d["alpha"], prompts=d["prompts"],
                   statistics=[DriftStatistic(**s) for s in d["statistics"]], passed=d["passed"],
                   p_value=d["p_value"], failures=list(d.get("failures", [])),
                   typed_failures=[f for f in map(Failure.from_dict, d.get("typed_failures") or []) if f is not None])


@dataclass(frozen=True)
class RecordDepth:
    """How deep the record a case's drift test ran against is: its distinct clean samples, the test's degrees of
    freedom (None for two samples, where the range rule stands in), and the smallest rise of the case's mean error
    over the clean mean that fails the test (relative; None where the clean mean is 0)."""

    samples: int
    dof: int | None
    detects_rise: float | None
    # The engine repeats itself across launches (calibration.launches_repeat): more launches add nothing, so a record
    # below the settling point is as deep as its variants make it and is not called thin.
    repeats: bool = False

    @property
    def settled(self) -> bool:
        """Whether the record holds enough distinct samples for its bounds to have settled (rule.SETTLES_FROM)."""
        return self.samples >= SETTLES_FROM

    def text(self) -> str:
        """"10 distinct samples, 9 degrees of freedom, the drift test fails a mean error 6.1 % above the clean"."""
        dof = f"{self.dof} degrees of freedom" if self.dof is not None else "the range rule (two samples)"
        rise = f", the drift test fails a mean error {100 * self.detects_rise:.2g} % above the clean" \
            if self.detects_rise is not None else ""
        return f"{self.samples} distinct samples, {dof}{rise}"

    def thin(self, case: str, descriptor: str) -> str | None:
        """The line a summary's first screen and the evidence give a record too thin for its bounds to have settled
        (and the command that deepens it); None for a settled one."""
        if self.settled or self.repeats:
            return None
        return (f"{case}: its record holds {self.samples} distinct samples, and bounds settle from {SETTLES_FROM}: "
                f"its bounds are wider and its drift test weaker than its noise needs ({self.text()}); `parity-kit "
                f"baseline deepen {descriptor} --case {case} --reason \"...\"` adds clean launches")


def record_depth(drift: Mapping | None) -> RecordDepth | None:
    """The depth of the record a case's recorded drift test (``DriftResult.to_dict()``) ran against; None where the
    test did not run."""
    if not drift:
        return None
    error = next((s for s in drift.get("statistics") or [] if s.get("test") == "error"), None)
    if error is None:
        return None
    n = int(error["samples"])
    reference, high = error.get("reference"), error.get("high")
    rise = high / reference - 1 if _finite(reference) and _finite(high) and reference > 0 else None
    return RecordDepth(n, n - 1 if n > 2 else None, rise)


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
    errors: dict[str, float] = {}
    shifts: dict[str, float] = {}
    for s in scores:
        error, shift = s.max_probability_error, s.top_probability_shift
        if _finite(error) and _finite(shift):
            errors[s.id], shifts[s.id] = error, shift
    return drift_of(errors, shifts, reference)


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
    stats = [_error_statistic(run_error, means["error"], alpha / 2, max(MIN_RELATIVE_ERROR * ref_error, floor),
                              floor)]
    low, high = interval(means["shift"], alpha / 4, True, max(MIN_RELATIVE_SHIFT * ref_error, floor))
    stats.append(DriftStatistic("shift", run_shift, statistics.fmean(means["shift"]), low, high,
                                _p_value(run_shift, means["shift"], "both"), n))
    failures = [_failure(s, len(ids), reference.get("noise_class")) for s in stats if s.failed]
    adjusted = min((min(1.0, 2 * s.p_value) for s in stats if s.p_value is not None), default=None)
    return DriftResult(reference["sha256"], alpha, len(ids), stats, not failures, adjusted,
                       [f.text for f in failures], failures)


def _error_statistic(value: float, means: Sequence[float], share: float, minimum: float,
                     floor: float) -> DriftStatistic:
    """The error test with its ``share`` of the rate split unevenly over its sides (see the module); its lower
    side only where the interval's lower end is clearly above zero, else -inf (no lower test)."""
    high = interval(means, share * (1 - LOW_SHARE), False, minimum)[1]
    # Two samples give a range, not a rate (see interval): a clean run below the range of two is no rarity.
    low = interval(means, share * LOW_SHARE, True, minimum)[0] if len(means) > 2 else -math.inf
    if low <= floor:
        low = -math.inf
    side = "down" if value < low else "up"
    return DriftStatistic("error", value, statistics.fmean(means), low, high, _p_value(value, means, side),
                          len(means))


def _p_value(value: float, values: Sequence[float], side: str) -> float | None:
    """The p-value of ``value`` as one more draw of ``values``: two-sided (``both``), or one-sided ``up``
    or ``down``."""
    n = len(values)
    if n < 3:  # no distribution to take a p-value from: the range rule decides (see interval)
        return None
    sd = statistics.stdev(values) if n > 1 else 0.0
    if sd == 0:
        return 0.0 if value != values[0] else 1.0
    t = (value - statistics.fmean(values)) / (sd * math.sqrt(1 + 1 / n))
    p = t_two_sided_p(t, n - 1)
    if side == "both":
        return p
    toward = t > 0 if side == "up" else t < 0
    return p / 2 if toward else 1 - p / 2


def _failure(s: DriftStatistic, prompts: int, noise_class: Mapping | None = None) -> Failure:
    """The drift rule's failure (kit.core.rules.rules.drift), at the end of the clean interval it crossed."""
    crossed = s.high if s.value > s.high else s.low
    return rules.drift(s.value, crossed, _words(s, prompts, noise_class))


def _words(s: DriftStatistic, prompts: int, noise_class: Mapping | None = None) -> str:
    if s.test == "error" and s.value < s.low:
        what = _too_exact(s, prompts, noise_class or {})
    elif s.test == "error":
        what = (f"mean max probability error over {prompts} prompts grew to {s.value:.4g}, "
                f"{s.value / s.reference:.2f} x the calibrated {s.reference:.4g} (clean runs stay below {s.high:.4g})")
    else:
        way = "up: the distributions sharpened" if s.value > s.high else "down: the distributions flattened"
        what = (f"golden top token's probability moved {way}; mean shift over {prompts} prompts {s.value:+.4g} "
                f"against the calibrated {s.reference:+.4g} (clean runs stay within {s.low:+.4g} .. {s.high:+.4g})")
    evidence = f"p = {s.p_value:.2g}" if s.p_value is not None else "the range rule, no p-value"
    return f"{what}; {evidence} from {s.samples} clean samples"


def _too_exact(s: DriftStatistic, prompts: int, noise_class: Mapping) -> str:
    """Why a run far below its clean samples fails: an engine of the case's noise class cannot be this exact."""
    dtype, device = noise_class.get("dtype"), noise_class.get("device")
    named = f" ({dtype} on {device})" if dtype and device else ""
    computes = f"is not computing in {dtype}" if dtype else "is not the engine the case describes"
    return (f"mean max probability error over {prompts} prompts fell to {s.value:.4g}, "
            f"{s.value / s.reference:.2f} x the calibrated {s.reference:.4g} (clean runs stay above {s.low:.4g}): "
            f"implausibly exact for its noise class{named}; an engine of that class does not reproduce the golden "
            f"this closely: it {computes}, or it replays the golden")


def _finite(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and math.isfinite(x)
