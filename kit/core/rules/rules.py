"""The rules of the verdict, each once: every test that fails a prompt, a decode step or a case.

Each was written where it was first needed, and copied where it was needed again: the near-tie rule lived in
scoring, the decode check, the executor's re-judging, the paired comparison and the borrowed-bounds rule, and
each copy treated a NaN a little differently. Here each rule is one function of numbers, returning typed
failures (kit.core.rules.failure) or the one decision the others ask for (``near_tie``, ``bound_for``,
``step_bound``); the modules that score (kit.core.verdict.scoring, kit.core.verdict.decode), re-judge
(kit.core.verdict.coverage), replay (kit.baselines.backtest) and compare (kit.core.verdict.paired,
kit.core.verdict.borrowed) call them.

The rules (docs/architecture.md, Scoring):

- bound: a prompt's max probability error above its bucket's bound (``bound_for``), a decode step's above its
  step's (``step_bound``), fails it;
- near-tie: a winner change is accepted when the golden's winner leads the backend's choice by at most
  WINNER_GAP_FACTOR x the max probability error (``near_tie``);
- plausibility: a non-finite logprob, or none, leaves nothing to score;
- coverage of the golden's tokens: each must be in the backend's top-n, and the backend's greedy token in the
  golden's top-k;
- exact: an exact golden's first k (token, logprob) pairs must be reproduced bit for bit;
- decode: a continuation as long as asked, and a divergence only inside a near-tie at a step that passes;
- repeats that must be bit-exact are;
- drift: the case's mean error and top-probability shift within what its clean calibration samples span
  (the test itself is kit.core.noise.drift's; its failure is made here).

And every figure a reader derives from a bound, each one function: ``ratio`` (error / bound: a prompt's or a
step's headroom, and a case's, the largest over its prompts), ``severity`` (what orders prompts, with or without
a bound) and ``margin`` (bound - error, in probability). In the kit, **headroom** is error / bound: 1 at the bound,
over 1 past it; bound - error is a **margin**.

This is the lowest layer of kit.core (docs/architecture.md, Layout): the records hold their figures by calling
these, so the rules read a record only through the fields they name (``ScoredPrompt``, ``Repeats``). Stdlib only:
the kernel-safe core.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

from kit.core.rules.failure import WINNER_GAP_FACTOR, Failure, Kind, divergence_why

Top = Sequence[tuple[int, float]]

__all__ = ["WINNER_GAP_FACTOR", "Divergence", "Repeats", "ScoredPrompt", "bound_for", "decode_short", "divergence",
           "drift", "exact", "judged_error", "margin", "missing_tokens", "near_tie", "non_finite", "over_bound", "past",
           "past_limit", "ratio", "recorded", "repeat", "severity", "step_bound", "winner"]


class ScoredPrompt(Protocol):
    """What ``recorded`` reads of a prompt's score (kit.core.records.records.PromptScore, which sits above)."""

    @property
    def id(self) -> str:
        """The prompt's id."""

    @property
    def bucket(self) -> int:
        """Its bucket."""

    @property
    def max_probability_error(self) -> float:
        """Its largest probability error (NaN: unscorable)."""

    @property
    def missing_tokens(self) -> list[int]:
        """The golden's tokens its top-n left out."""

    @property
    def exact_match(self) -> bool | None:
        """Whether it reproduced an exact golden (None: not compared)."""

    @property
    def winner_gap(self) -> float:
        """The golden's lead of its winner over the backend's greedy token."""


class Repeats(Protocol):
    """What ``repeat`` reads of a prompt's repeats (kit.core.records.records.RepeatSpread, which sits above)."""

    @property
    def id(self) -> str:
        """The prompt's id."""

    @property
    def runs(self) -> int:
        """How many times it was observed."""

    @property
    def launches(self) -> int:
        """In how many launches."""

    @property
    def max_logprob_spread(self) -> float:
        """The largest logprob spread."""

    @property
    def max_probability_spread(self) -> float:
        """The largest probability spread."""

    @property
    def identical(self) -> bool:
        """Whether every repeat was bit-exact."""

    @property
    def difference(self) -> str | None:
        """The first difference, in words (None: identical)."""


def bound_for(bucket: int, bound: float | None, bucket_bounds: Mapping[str, float]) -> float | None:
    """A per-bucket bound overrides the case bound."""
    return bucket_bounds.get(str(bucket), bound)


def step_bound(step: int, bound: float | None, step_bounds: Mapping[str, float] | None) -> float | None:
    """The bound step ``step`` (1-based) is judged under: its calibration record's for that step where one was
    measured, else ``bound`` (the prompt's bucket's). The one place this is decided, for the check and its readers."""
    return (step_bounds or {}).get(str(step), bound)


def near_tie(gap: object, max_err: object) -> bool | None:
    """Whether a winner change with the golden's lead ``gap`` sits inside a near-tie of a prompt (or step) whose
    max probability error is ``max_err``: gap <= WINNER_GAP_FACTOR x max_err. None when either is not a finite
    number (an unscorable prompt, a lead the record did not keep): the rule cannot say, so such a change is neither
    accepted as a tie nor failed as one (its prompt fails, or passes, on its other tests)."""
    if not (_finite(gap) and _finite(max_err)):
        return None
    return gap <= WINNER_GAP_FACTOR * max_err  # type: ignore[operator]


def past(max_err: float, bound: float) -> bool:
    """The bound rule itself: whether an error ``max_err`` fails its ``bound`` (strictly above it). False for an
    unscorable NaN, which fails on plausibility instead (``non_finite``). Every reader that asks whether an error
    is past its bound (the gate, power's trials, the backtest, borrowed bounds, the history, the summary) asks
    here, so a change to the rule reaches all of them."""
    return max_err > bound


def past_limit(detects_from: float, limit: float) -> bool:
    """Power's rule: whether a case that detects faults only from ``detects_from`` x its clean error sees less than
    its descriptor asks (``limit`` x, strictly above it), so that its pass cannot be claimed
    (kit.core.verdict.detectable)."""
    return detects_from > limit


def margin(max_err: float, bound: float) -> float:
    """How far an error is inside its bound, in probability: bound - error, negative past it (NaN for an unscorable
    error). What a reader shows as a margin (the summary's case table, the history's margin table)."""
    return bound - max_err


def ratio(max_err: float, bound: float) -> float:
    """An error in units of its bound (1 at the bound, over 1 past it): its headroom; an unscorable NaN is
    infinitely past it, as the gate fails it. How readers compare errors judged under different bounds (decode
    steps, buckets), and the headroom a case result, evidence.md and the summary show."""
    return max_err / bound if not math.isnan(max_err) else math.inf


def severity(max_err: float | None, bound: float | None) -> float:
    """How close to (or past) its bound an error is, to put the worst first: its ``ratio`` under a bound, the error
    itself without one; an unscorable error (None, NaN) is the worst of all."""
    if max_err is None or math.isnan(max_err):
        return math.inf
    return ratio(max_err, bound) if bound else max_err


def over_bound(prompt: str, bucket: int, max_err: float, bound: float | None, *, step: int | None = None,
               decode: bool = False) -> Failure | None:
    """An error above its bound; None within it, without a bound, or for an unscorable NaN."""
    if bound is None or not past(max_err, bound):
        return None
    return Failure(Kind.OVER_BOUND, prompt, bucket, step, max_err, bound, decode=decode)


def judged_error(prompt: str, bucket: int, max_err: float, bound: float | None, *, step: int | None = None,
                 decode: bool = False) -> Failure | None:
    """A recorded error (a prompt's first token, or decode step ``step``) judged as the gate judges the prompt or
    step that gave it: a NaN is an unscorable answer, which the gate fails on plausibility (``non_finite``: the
    failure is that rule's kind); any other error by the bound rule (``over_bound``). What judges a prompt or step
    from its figures alone, with no engine's answer at hand: power's faulted samples and the backtest's replay."""
    if isinstance(max_err, float) and math.isnan(max_err):
        return Failure(Kind.NON_FINITE, prompt, bucket, step, max_err, decode=decode, note=f"{max_err}")
    return over_bound(prompt, bucket, max_err, bound, step=step, decode=decode)


def non_finite(prompt: str, bucket: int, backend: Top) -> Failure | None:
    """A backend's top-n with a NaN or infinite logprob, or with none at all: nothing to score."""
    bad = [(t, lp) for t, lp in backend if not math.isfinite(lp)]
    if not bad and backend:
        return None
    token, lp = bad[0] if bad else (-1, float("nan"))
    return Failure(Kind.NON_FINITE, prompt, bucket, value=lp, backend_token=token, note=f"{lp}")


def missing_tokens(prompt: str, bucket: int, golden_top: Top, backend: Top) -> list[Failure]:
    """Each golden token the backend's top-n leaves out."""
    returned = {t for t, _ in backend}
    return [Failure(Kind.MISSING_TOKEN, prompt, bucket, golden_token=t, count=len(backend))
            for t, _ in golden_top if t not in returned]


def winner(prompt: str, bucket: int, golden_top: Top, backend: Top, max_err: float) -> tuple[float, list[Failure]]:
    """The golden's lead of its winner over the backend's greedy token (its whole probability when the greedy token
    is not among the golden's), and the failures of that winner change: a greedy token outside the golden's top-k,
    a change outside a near-tie."""
    g_prob = {t: math.exp(lp) for t, lp in golden_top}
    golden_winner, backend_winner = golden_top[0][0], backend[0][0]
    failures = []
    if backend_winner in g_prob:
        gap = g_prob[golden_winner] - g_prob[backend_winner]
    else:
        gap = g_prob[golden_winner]
        failures.append(Failure(Kind.GREEDY_OUTSIDE_TOP, prompt, bucket, backend_token=backend_winner,
                                count=len(golden_top)))
    if near_tie(gap, max_err) is False:
        failures.append(Failure(Kind.WINNER_CHANGE, prompt, bucket, value=max_err, golden_token=golden_winner,
                                backend_token=backend_winner, gap=gap))
    return gap, failures


def exact(prompt: str, bucket: int, golden_top: Top, backend: Top) -> Failure | None:
    """The first difference from an exact golden, or None when bit-identical."""
    if len(backend) < len(golden_top):
        return Failure(Kind.NOT_EXACT, prompt, bucket, count=len(backend), expected=len(golden_top))
    for rank, ((gt, glp), (bt, blp)) in enumerate(zip(golden_top, backend), start=1):
        if gt != bt or glp != blp:
            return Failure(Kind.NOT_EXACT, prompt, bucket, rank=rank, golden_token=gt, backend_token=bt,
                           golden_logprob=glp, backend_logprob=blp)
    return None


def decode_short(prompt: str, bucket: int, continued: int, asked: int) -> Failure | None:
    """A continuation shorter than the case asks."""
    if continued >= asked:
        return None
    return Failure(Kind.DECODE_SHORT, prompt, bucket, decode=True, count=continued, expected=asked)


@dataclass(frozen=True)
class Divergence:
    """Where a backend's continuation chose another token than the golden's, and how that was judged."""

    gap: float | None  # the golden's lead of its token over the backend's; None: outside the golden's top-k
    accepted: bool  # inside a near-tie at a step that passes its other tests
    why: str  # in words, as a decode score keeps it
    failure: Failure | None  # None when accepted


def divergence(prompt: str, bucket: int, step: int, golden_top: Top, backend_token: int, max_err: float,
               step_failed: bool) -> Divergence:
    """The decode check's winner test: a divergence is accepted only inside a near-tie (``near_tie``) at a step
    that fails none of its other tests; a token outside the golden's top-k is never one."""
    g_prob = {t: math.exp(lp) for t, lp in golden_top}
    golden_token = golden_top[0][0]
    gap = g_prob[golden_token] - g_prob[backend_token] if backend_token in g_prob else None
    inside = gap is not None and near_tie(gap, max_err) is True
    why = divergence_why(golden_token, backend_token, gap, max_err, len(golden_top), inside, step_failed)
    if inside and not step_failed:
        return Divergence(gap, True, why, None)
    kind = (Kind.DECODE_OUTSIDE_TOP if gap is None else Kind.NEAR_TIE_DIVERGENCE if inside
            else Kind.DECODE_DIVERGENCE)
    return Divergence(gap, False, why, Failure(kind, prompt, bucket, step, max_err, golden_token=golden_token,
                                               backend_token=backend_token, gap=gap, count=len(golden_top)))


def recorded(p: ScoredPrompt, bound: float | None, is_exact: bool) -> Failure | None:
    """Why a prompt's recorded metrics fail it under ``bound`` (the first of the first token's rules that does),
    or None when they pass it: the executor's re-judging of a result whose notebook said passed."""
    err = p.max_probability_error
    found = functools.partial(Failure, prompt=p.id, bucket=p.bucket, rejudged=True)
    if not _finite(err):
        return found(Kind.NON_FINITE, note=f"{err}")
    if p.missing_tokens:
        return found(Kind.MISSING_TOKEN, golden_token=p.missing_tokens[0])
    if is_exact and p.exact_match is not True:
        return found(Kind.NOT_EXACT, note=f"{p.exact_match}")
    if not is_exact and bound is not None and past(err, bound):
        return found(Kind.OVER_BOUND, value=err, bound=bound)
    if near_tie(p.winner_gap, err) is False:
        return found(Kind.WINNER_CHANGE, value=err, gap=p.winner_gap)
    return None


def repeat(r: Repeats) -> Failure | None:
    """Repeats of a prompt that were asked to be bit-exact and are not."""
    if r.identical:
        return None
    return Failure(Kind.REPEAT, r.id, value=r.max_logprob_spread, probability_spread=r.max_probability_spread,
                   count=r.runs, expected=r.launches, note=r.difference)


def drift(value: float, bound: float, words: str) -> Failure:
    """The drift test's failure: the case's mean ``value`` outside its clean interval, at ``bound`` (the end it
    crossed); ``words``: kit.core.noise.drift's account of the statistic, its evidence and its samples."""
    return Failure(Kind.DRIFT, value=value, bound=bound, note=words)


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
