"""Observation vs golden: the metric panel and the verdict of one fixture case.

All metric definitions live here (docs/architecture.md, Scoring). With golden top-k tokens G,
golden logprobs g and backend logprobs a over the same tokens:

- max_probability_error      max_i |exp(a_i) - exp(g_i)|
- top_probability_l1_error   sum_i |exp(a_i) - exp(g_i)|
- kl_shared                  KL(golden || backend) over the tokens both returned,
                             each side renormalized over that shared support
- first_rank_agreement       golden top token == backend greedy token
- winner_gap                 p_golden(golden top) - p_golden(backend greedy)
- top_probability_shift      p_backend(golden top) - p_golden(golden top), signed (0 for the backend's
                             probability when the token is not in its top-n); kit.core.noise.drift follows it

Repeated observations of one prompt (kit.case.runner runs them) are compared with each other:

- max_logprob_spread         max over tokens of (max - min) logprob across the runs
- max_probability_spread     the same in probability space: the noise floor
- identical                  every run returned the same token ids, in the same order, with
                             bit-identical logprobs (what ``exact_repeats`` requires)

A case passes when it fails none of the verdict's rules (kit.core.rules.rules, where each is written once):
every golden token is in the backend's returned top-n, the backend's greedy token lies in G, winner_gap <=
2 * max_probability_error (a winner change only inside a near-tie), max_probability_error <= bound, and all
logprobs are finite. An ``exact`` golden instead requires the backend's first k (token id, logprob) pairs to
equal the golden's, bit for bit. This module computes the panel and asks the rules; it judges nothing itself.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from kit.core.records.records import Observation, PromptScore, RepeatSpread
from kit.core.rules import rules
from kit.core.rules.failure import Failure, texts
from kit.core.rules.rules import WINNER_GAP_FACTOR, bound_for

__all__ = ["SIDE_BY_SIDE", "WINNER_GAP_FACTOR", "bound_for", "repeat_spread", "score_prompt"]

SIDE_BY_SIDE = 5  # top tokens kept in a score for the reader


def score_prompt(
    prompt_id: str,
    bucket: int,
    golden_top: Sequence[tuple[int, float]],
    observation: Observation,
    bound: float | None,
    exact: bool = False,
) -> PromptScore:
    """One prompt's observation against its golden top list: every metric of the panel, and its failures under
    ``bound`` (or, ``exact``, bit for bit); an implausible answer is unscorable, never scored."""
    backend = list(observation.top_logprobs)
    implausible = rules.non_finite(prompt_id, bucket, backend)
    if implausible is not None:
        return _unscorable(prompt_id, bucket, observation, golden_top, bound, exact, [implausible])

    a = dict(backend)
    g_prob = {t: math.exp(lp) for t, lp in golden_top}
    failures: list[Failure] = rules.missing_tokens(prompt_id, bucket, golden_top, backend)
    missing = [t for t, _ in golden_top if t not in a]

    errors = [abs(math.exp(a[t]) - g_prob[t]) for t, _ in golden_top if t in a]
    max_err = max(errors, default=float("inf"))
    l1 = sum(errors)
    kl = _kl_shared(golden_top, a)

    golden_winner, backend_winner = golden_top[0][0], backend[0][0]
    gap, changed = rules.winner(prompt_id, bucket, golden_top, backend, max_err)
    failures += changed

    exact_match: bool | None = None
    if exact:
        mismatch = rules.exact(prompt_id, bucket, golden_top, backend)
        failures += [mismatch] if mismatch is not None else []
        exact_match = mismatch is None
    else:
        over = rules.over_bound(prompt_id, bucket, max_err, bound)
        failures += [over] if over is not None else []

    return PromptScore(
        id=prompt_id, bucket=bucket, n_tokens=observation.n_tokens, passed=not failures, bound=bound,
        max_probability_error=max_err, top_probability_l1_error=l1, kl_shared=kl,
        first_rank_agreement=golden_winner == backend_winner,
        golden_top_token=golden_winner, golden_top_probability=g_prob[golden_winner],
        backend_top_token=backend_winner, backend_top_probability=math.exp(backend[0][1]),
        winner_gap=gap, missing_tokens=missing, exact_match=exact_match, failures=texts(failures),
        typed_failures=failures,
        top_probability_shift=math.exp(a[golden_winner]) - g_prob[golden_winner] if golden_winner in a
        else -g_prob[golden_winner],
        golden_top=_side(golden_top), backend_top=_side(backend),
    )


def _kl_shared(golden_top: Sequence[tuple[int, float]], a: Mapping[int, float]) -> float:
    shared = [(math.exp(lp), math.exp(a[t])) for t, lp in golden_top if t in a]
    zp, zq = sum(p for p, _ in shared), sum(q for _, q in shared)
    if not shared or zp <= 0 or zq <= 0:
        return float("inf")
    return sum((p / zp) * math.log((p / zp) / (q / zq)) for p, q in shared if p > 0 and q > 0)


def _side(top: Sequence[tuple[int, float]]) -> list[list[float]]:
    return [[int(t), float(lp)] for t, lp in top[:SIDE_BY_SIDE]]


def _unscorable(prompt_id, bucket, observation, golden_top, bound, exact, failures) -> PromptScore:
    nan = float("nan")
    return PromptScore(
        id=prompt_id, bucket=bucket, n_tokens=observation.n_tokens, passed=False, bound=bound,
        max_probability_error=nan, top_probability_l1_error=nan, kl_shared=nan, first_rank_agreement=False,
        golden_top_token=golden_top[0][0], golden_top_probability=math.exp(golden_top[0][1]),
        backend_top_token=observation.top_logprobs[0][0] if observation.top_logprobs else -1,
        backend_top_probability=nan, winner_gap=nan, top_probability_shift=nan, exact_match=False if exact else None,
        failures=texts(failures), typed_failures=list(failures), golden_top=_side(golden_top),
        backend_top=_side(observation.top_logprobs),
    )


def repeat_spread(prompt_id: str, runs: Sequence[Observation], launches: int = 1) -> RepeatSpread:
    """The spread of repeated observations of one prompt; spreads cover the tokens every run returned."""
    tops = [list(o.top_logprobs) for o in runs]
    shared = set.intersection(*(set(t for t, _ in top) for top in tops)) if tops else set()
    lp_spread = p_spread = 0.0
    for token in shared:
        values = [dict(top)[token] for top in tops]
        if not all(map(math.isfinite, values)):
            lp_spread = p_spread = float("nan")
            break
        lp_spread = max(lp_spread, max(values) - min(values))
        probs = [math.exp(v) for v in values]
        p_spread = max(p_spread, max(probs) - min(probs))
    difference = None
    for n, top in enumerate(tops[1:], start=2):
        difference = _run_difference(tops[0], top, n)
        if difference:
            break
    return RepeatSpread(id=prompt_id, runs=len(runs), launches=launches, max_logprob_spread=lp_spread,
                        max_probability_spread=p_spread, identical=difference is None, difference=difference)


def _run_difference(first: Sequence[tuple[int, float]], other: Sequence[tuple[int, float]], n: int) -> str | None:
    if len(first) != len(other):
        return f"run {n} returned {len(other)} logprobs, run 1 returned {len(first)}"
    for rank, ((t1, lp1), (tn, lpn)) in enumerate(zip(first, other), start=1):
        if t1 != tn or lp1 != lpn:
            return (f"run {n} differs from run 1 at rank {rank}: token {tn} logprob {lpn!r} "
                    f"vs token {t1} logprob {lp1!r}")
    return None
