"""Bounds borrowed from another class of hardware: when a failure may be this host's noise, not a regression.

A calibration record measures the noise of one class of hardware (a CPU instruction-set level, a GPU model).
A case that accepts a hardware change (``accept_noise_changes = ["hardware"]``) is judged on a host of another
class under that record's bounds. Classes round differently (AVX-512's kernels against AVX2's), so a clean run
on the other class can cross a bound that its own class would have measured wider. Calling that a regression
sends people after a bug that is not there; calling it passed would hide a real one. So such a failure has its
own outcome, ``borrowed-bounds``, which names the one command that measures this host.

The rule, from the committed records: of every case calibrated on two classes, one class's bound is at most
CROSS_CLASS_FACTOR times the other's, bucket by bucket and decode step by decode step (docs/calibration.md
lists the ratios; a unit test holds every committed pair under the factor, so a record that widens the gap
cannot land unnoticed). A failed case whose bounds were borrowed becomes ``borrowed-bounds`` when each of its
failures is a bound's (an error over its bucket's or its decode step's bound) and every error stays within
CROSS_CLASS_FACTOR x that bound. Anything else stays failed, since no class's noise explains it: a missing
token, a non-finite logprob, a winner change outside a near-tie, an error beyond the factor, a drift or repeat
failure, a continuation cut short.

Judged from the case result's own numbers (never from its failure lines' wording), so the executor, a replay
and a reader of the run directory reach the same outcome. Stdlib only: the kernel-safe core.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from kit.core.records.records import CaseResult, DecodeScore, PromptScore, Status
from kit.core.rules import rules
from kit.core.rules.rules import bound_for, near_tie, step_bound

# The largest ratio between two classes' bounds of one case among the committed records is 2.7 (vllm-pp1-decode,
# decode step 3: 0.016 on x86-64-v3 against 0.0059 on x86-64-v4); the factor leaves a little room above it.
CROSS_CLASS_FACTOR = 3.0


def judged_under_borrowed_bounds(result: CaseResult, measured: str, here: str, command: str,
                                 expected_s: float | None = None) -> CaseResult:
    """``result`` as the outcome of bounds measured on ``measured`` applied on ``here``: a failed case whose
    every failure the classes' difference could explain becomes ``borrowed-bounds`` with the reason and the
    ``command`` that measures this host (``expected_s``: about how long it takes); anything else is returned as
    it is, with a note when it failed, so that a reader knows the bounds were not this host's."""
    if result.status != Status.FAILED:
        return result
    where = f"bounds measured on {measured}, this host is {here}"
    if not explained(result):
        note = (f"{where}; the failure is not one that the difference between classes explains (more than "
                f"{CROSS_CLASS_FACTOR:g}x a bound, or not a bound's): it stands")
        return dataclasses.replace(result, notes=[*result.notes, note])
    took = f" (about {_minutes(expected_s)})" if expected_s else ""
    reason = (f"failed only under {where}: every failure is an error over its bound by at most "
              f"{CROSS_CLASS_FACTOR:g}x, as far as classes of hardware differ; not a regression until this "
              f"host is measured: `{command}`{took}")
    return dataclasses.replace(result, status=Status.BORROWED, error=reason, remedy=command)


def explained(result: CaseResult) -> bool:
    """Whether every failure of ``result`` is an error over its bound within CROSS_CLASS_FACTOR of it."""
    own = [line for p in result.prompts for line in p.failures] + [line for d in result.decode for line in d.failures]
    if not result.failures or len(result.failures) != len(own) or set(result.failures) != set(own):
        return False  # a failure of the case as a whole (drift, repeats, coverage): no bound explains it
    step_bounds = (result.bound_source or {}).get("step_bounds") or {}
    return (all(_prompt_explained(p) for p in result.prompts if not p.passed)
            and all(_decode_explained(d, step_bounds, bound_for(d.bucket, result.bound, result.bucket_bounds))
                    for d in result.decode if not d.passed))


def _prompt_explained(p: PromptScore) -> bool:
    """A first-token failure that is the bound's alone: one failure, an error over the bound by at most the
    factor, every golden token returned and no winner change outside a near-tie."""
    err, bound = p.max_probability_error, p.bound
    if not (_finite(err) and bound and _finite(bound)) or p.missing_tokens or len(p.failures) != 1:
        return False
    if near_tie(p.winner_gap, err) is False:
        return False
    return _within_factor(err, bound)


def _decode_explained(d: DecodeScore, step_bounds: Mapping[str, float], bucket_bound: float | None) -> bool:
    """A decode failure made of steps over their bounds by at most the factor, and at most one divergence that
    a near-tie explains (it failed only because its step was over the bound); every asked step accounted for."""
    if d.diverged_at is None and d.compared < d.steps:
        return False  # the backend continued fewer steps than asked
    over = 0
    for n, err in enumerate(d.step_errors, start=1):
        bound = step_bound(n, bucket_bound, step_bounds)
        if not (_finite(err) and bound and _finite(bound)) or rules.past(err, CROSS_CLASS_FACTOR * bound):
            return False
        over += rules.past(err, bound)
    diverged = d.diverged_at is not None and not d.accepted
    if diverged and near_tie(d.gap, d.step_errors[-1]) is not True:
        return False  # outside a near-tie (or not recorded): the step's bound does not explain it
    return len(d.failures) == over + diverged


def _within_factor(err: float, bound: float) -> bool:
    """Past ``bound`` by the bound rule (kit.core.rules.rules.past), and not past CROSS_CLASS_FACTOR x it."""
    return rules.past(err, bound) and not rules.past(err, CROSS_CLASS_FACTOR * bound)


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"
