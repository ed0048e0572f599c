"""The paired comparison of one case under two releases: is the candidate's error above the pin's?

A control scores the same prompts of the same fixture against the same golden under both releases, so the
per-prompt errors are paired data: each prompt's difficulty cancels in its own difference, and what remains
is the releases' difference plus noise. A paired test on those differences sees a small shift that moves
every prompt a little, which no comparison of the two failures (or of their largest errors) can.

The metric, defined here and nowhere else (docs/architecture.md, Diagnosis):

- d_i = candidate max_probability_error_i - pin max_probability_error_i, over the prompts both sides scored
  with a finite error, in the fixture's order;
- a prompt where either side changed its winner inside a near-tie (kit.core.rules.rules.near_tie: the backend's
  greedy token is another of the golden's tokens, led by at most WINNER_GAP_FACTOR x the prompt's max error)
  is left out and counted: its winner is the flake family's, and which side of the tie it fell on is no
  property of either release;
- the effect is the mean of d_i, and, where the case's calibration record says what its clean error is
  (kit.core.noise.power.clean_error), that mean in units of it;
- its 95 % interval is Student's t interval of the mean (n - 1 degrees of freedom). A t interval, not a
  bootstrap or a permutation inversion: it is closed-form and deterministic, the effect it bounds is a mean
  over tens of prompts (where the central limit theorem makes the t interval close to exact even for the
  skewed per-prompt differences of a bfloat16 engine), and it needs no seed to be reproduced from the record;
- the p-value is a two-sided sign-flip permutation test of the mean (exact over every sign pattern up to
  EXACT_UP_TO prompts, else PERMUTATIONS patterns drawn with the fixed SEED): distribution-free, so a heavy
  tail of one prompt cannot fake significance. The interval decides (``worse``); the p-value is reported
  beside it as the check that does not lean on normality. Below 6 prompts the permutation p cannot reach
  0.05 (its smallest value is 2 / 2^n), which the reader sees in the number.

With fewer than MIN_PAIRED usable prompts there is no interval and no p-value: the text says "too few prompts".
Only the first token's errors are paired: a decode check's later steps stop being the same context on both
sides once either continuation diverges, so kit.core.verdict.diagnosis keeps comparing those by its noise rule.

Pure: numpy and the stdlib, no records written, nothing read.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np

from kit.core.noise.drift import t_quantile_two_sided
from kit.core.records.records import PromptScore
from kit.core.rules.rules import near_tie as within_near_tie

CONFIDENCE = 0.95
# Two prompts give a t interval on one degree of freedom (12.7 standard errors wide) and a permutation p of
# at least 0.5: no statement about an effect.
MIN_PAIRED = 3
EXACT_UP_TO = 16  # 2^16 sign patterns: exact and still instant
PERMUTATIONS = 20_000  # a p-value of 0.05 is then known to about +-0.003
SEED = 20260  # fixed: the same two runs give the same p-value, on every host
_CHUNK = 2_000  # sign patterns per matrix product: bounds memory on a fixture of thousands of prompts


@dataclass(frozen=True)
class PairedResult:
    """One case's paired comparison: the candidate's error minus the pin's, prompt by prompt.

    ``low``/``high``/``p_value`` are None with fewer than MIN_PAIRED prompts; ``relative`` (the mean in
    units of ``clean_error``) is None without a calibrated clean error."""

    paired: int  # prompts in the test
    near_ties: int  # prompts scored on both sides but left out: a near-tie winner on either side
    unpaired: int  # prompts scored on one side only, or without a finite error on either
    mean: float | None  # None without any usable prompt
    low: float | None
    high: float | None
    p_value: float | None
    clean_error: float | None = None
    confidence: float = CONFIDENCE

    @property
    def enough(self) -> bool:
        """Whether enough prompts paired (MIN_PAIRED) for an interval to say anything: fewer, and the
        comparison states no direction."""
        return self.paired >= MIN_PAIRED and self.low is not None and self.high is not None

    @property
    def worse(self) -> bool:
        """The candidate's error is above the pin's beyond chance: the whole interval lies above 0."""
        return self.enough and self.low is not None and self.low > 0

    @property
    def relative(self) -> float | None:
        """The mean paired effect in units of the case's clean error, where that is known and finite: how
        large the change is against the noise."""
        if self.mean is None or not self.clean_error or not math.isfinite(self.clean_error):
            return None
        return self.mean / self.clean_error

    @property
    def text(self) -> str:
        """The effect in one clause, e.g. "candidate's error is 0.0031 above the pin's (95 % interval 0.0012 ..
        0.0050, p = 0.002, 62 prompts paired, 2 near-ties left out)"."""
        counts = _counts(self)
        if not self.enough or self.mean is None or self.low is None or self.high is None:
            return f"too few prompts to pair ({counts})"
        digits = _decimals(self.high - self.low, self.mean)
        size = f"{abs(self.mean):.{digits}f}"
        if float(size) == 0:
            head = "candidate's error is the pin's on average"
        else:
            head = f"candidate's error is {size} {'above' if self.mean > 0 else 'below'} the pin's"
        parts = [f"{self.confidence:.0%}".replace("%", " %") + f" interval {self.low:.{digits}f} .. "
                 f"{self.high:.{digits}f}"]
        if self.relative is not None and self.clean_error:
            # In units of the mean as shown, so that a mean shown as 0 is not 1e-17 clean errors.
            parts.append(f"{round(self.mean, digits) / self.clean_error:+.2g} x the clean error {self.clean_error:.2g}")
        if self.p_value is not None:
            parts.append(f"p = {self.p_value:.2g}")
        parts.append(counts)
        return f"{head} ({', '.join(parts)})"

    def to_dict(self) -> dict:
        """The comparison as a control row holds it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> "PairedResult":
        """A comparison read back, keys of a newer kit left out."""
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def changed_in_near_tie(p: PromptScore) -> bool:
    """Whether the prompt's winner changed inside a near-tie (the verdict's accepted winner change)."""
    return not p.first_rank_agreement and within_near_tie(p.winner_gap, p.max_probability_error) is True


def differences(pin: Sequence[PromptScore], candidate: Sequence[PromptScore]) -> tuple[list[float], int, int]:
    """The per-prompt differences (candidate - pin), the near-ties left out, and the prompts left unpaired."""
    theirs = {p.id: p for p in candidate}
    ours = {p.id for p in pin}
    d: list[float] = []
    ties = unpaired = 0
    for a in pin:
        b = theirs.get(a.id)
        if b is None or not (_finite(a.max_probability_error) and _finite(b.max_probability_error)):
            unpaired += 1
        elif changed_in_near_tie(a) or changed_in_near_tie(b):
            ties += 1
        else:
            d.append(b.max_probability_error - a.max_probability_error)
    unpaired += sum(1 for p in candidate if p.id not in ours)
    return d, ties, unpaired


def compare(pin: Sequence[PromptScore], candidate: Sequence[PromptScore],
            clean_error: float | None = None) -> PairedResult:
    """The paired comparison of two scorings of one case (see the module for every definition)."""
    d, ties, unpaired = differences(pin, candidate)
    mean = statistics.fmean(d) if d else None
    if len(d) < MIN_PAIRED or mean is None:
        return PairedResult(len(d), ties, unpaired, mean, None, None, None, clean_error)
    low, high = t_interval(d, CONFIDENCE)
    return PairedResult(len(d), ties, unpaired, mean, low, high, sign_flip_p(d), clean_error)


def t_interval(d: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student's t interval of the mean of ``d`` (at least two values)."""
    n = len(d)
    mean = statistics.fmean(d)
    half = t_quantile_two_sided(1 - confidence, n - 1) * statistics.stdev(d) / math.sqrt(n)
    return mean - half, mean + half


def sign_flip_p(d: Sequence[float]) -> float:
    """Two-sided sign-flip permutation p-value of the mean of ``d`` against 0."""
    x = np.asarray(d, dtype=np.float64)
    n = len(x)
    observed = abs(x.sum())
    # A pattern's sum equal to the observed one up to rounding counts as at least as extreme.
    tol = 1e-12 * max(float(np.abs(x).sum()), 1e-300)
    if n <= EXACT_UP_TO:
        codes = np.arange(2 ** n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n)) & 1)
        return float(np.mean(np.abs(signs @ x) >= observed - tol))
    rng = np.random.default_rng(SEED)
    extreme = 0
    for start in range(0, PERMUTATIONS, _CHUNK):
        size = min(_CHUNK, PERMUTATIONS - start)
        signs = rng.choice((-1.0, 1.0), size=(size, n))
        extreme += int(np.count_nonzero(np.abs(signs @ x) >= observed - tol))
    # The observed pattern is one of the draws' population: (1 + k) / (1 + N), never an impossible 0.
    return (1 + extreme) / (1 + PERMUTATIONS)


def _counts(r: PairedResult) -> str:
    parts = [f"{r.paired} prompt{'s' if r.paired != 1 else ''} paired"]
    if r.near_ties:
        parts.append(f"{r.near_ties} near-tie{'s' if r.near_ties != 1 else ''} left out")
    if r.unpaired:
        parts.append(f"{r.unpaired} not scored on both sides")
    return ", ".join(parts)


def _decimals(width: float, mean: float) -> int:
    """Decimals that show the interval's half-width to two significant digits (or the mean's, where the
    interval has no width): the precision the evidence has, no more."""
    scale = width / 2 if width > 0 else abs(mean)
    if not scale or not math.isfinite(scale):
        return 1
    return min(12, max(1, 1 - math.floor(math.log10(scale))))


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
