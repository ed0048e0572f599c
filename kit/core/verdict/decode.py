"""The decode check: a backend's greedy continuation against the golden's, step by step.

The first-token check sees only the engine's prefill. Engines break most often on the decode path
(the KV cache, decode attention kernels, graph capture), so a case with ``decode = N`` also lets the
backend continue each prompt greedily for N steps through its own cache, and compares:

- while the continuations agree, every step is scored like the first token
  (kit.core.verdict.scoring.score_prompt, under the case's bound for the prompt's bucket);
- where the backend chooses another token than the golden, the divergence is accepted only inside a
  near-tie, by the first token's rule (kit.core.rules.rules.near_tie: the golden's winner leads the backend's
  choice by at most WINNER_GAP_FACTOR x the step's max probability error) at a step that passes its
  other tests, and the comparison of that prompt ends there (the continuations no longer share a context);
- a divergence outside a near-tie fails, naming the prompt, the step and both tokens.

A case calibrated for its decode steps judges step n by its record's bound for step n (``step_bounds``,
kit.core.noise.stepnoise): a step's context holds every earlier step's rounding, so its clean error grows with n and
the first token's bound would be too tight for late steps (a hand-set one, wide enough for them, too loose for
early ones).

Pure functions of the records, so that any backend's continuation is judged the same way.

What a reader is shown of a decode check is each step's error against the bound it was judged under
(``StepMargin``): the summary's banner, case table and headroom figure, and the history's decode series, all ask
``worst_step``/``worst_decode_step`` here, so that a step past its bound reads as a failure as plainly as a first
token past its bound, and a step creeping toward its bound is seen as a first token's would be.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from kit.core.errors import BadInput
from kit.core.baselines.golden import Golden, Step
from kit.core.model.modelconfig import ModelLimits
from kit.core.records.records import CaseResult, Continuation, DecodeScore, Observation
from kit.core.verdict.scoring import score_prompt
from kit.core.rules import rules
from kit.core.rules.failure import WINNER_CHANGES, Failure, Kind, texts
from kit.core.rules.rules import bound_for, step_bound
from kit.core.records.records import GoldenMode

__all__ = ["StepMargin", "case_headroom", "check_continuations_fit", "check_decode_golden", "compare_continuation",
           "failed_prompts", "step_bound", "worst_decode_step", "worst_step", "worst_steps"]


def compare_continuation(prompt_id: str, bucket: int, n_tokens: int, golden: Sequence[Step],
                         backend: Continuation, bound: float | None,
                         step_bounds: Mapping[str, float] | None = None) -> DecodeScore:
    """Score ``backend``'s first ``len(golden)`` steps against the golden continuation (see the module): step n
    under ``step_bounds[str(n)]`` where a calibration measured it, else under ``bound`` (the bucket's)."""
    steps = len(golden)
    short = rules.decode_short(prompt_id, bucket, len(backend.steps), steps)
    failures: list[Failure] = [short] if short is not None else []
    errors: list[float] = []
    for n, ((g_token, g_top), (b_token, b_top)) in enumerate(zip(golden, backend.steps), start=1):
        failed_before = len(failures)
        score = score_prompt(prompt_id, bucket, g_top, Observation(prompt_id, b_top, n_tokens + n - 1),
                             step_bound(n, bound, step_bounds))
        err = score.max_probability_error
        errors.append(err)
        # The winner test is the divergence test below, said in the decode's words; every other test
        # (bound, missing tokens, non-finite logprobs) applies to the step as it does to the first token.
        failures += [dataclasses.replace(f, step=n) for f in score.typed_failures
                     if f.kind not in WINNER_CHANGES and f.kind is not Kind.GREEDY_OUTSIDE_TOP]
        if b_token == g_token:
            continue
        judged = rules.divergence(prompt_id, bucket, n, g_top, b_token, err, len(failures) > failed_before)
        failures += [judged.failure] if judged.failure is not None else []
        return DecodeScore(prompt_id, bucket, steps, n, not failures, _worst(errors), diverged_at=n,
                           golden_token=g_token, backend_token=b_token, accepted=judged.accepted, why=judged.why,
                           failures=texts(failures), step_errors=errors, gap=judged.gap, typed_failures=failures)
    return DecodeScore(prompt_id, bucket, steps, len(errors), not failures, _worst(errors), failures=texts(failures),
                       step_errors=errors, typed_failures=failures)


@dataclass(frozen=True)
class StepMargin:
    """One decode step's max probability error against the bound it was judged under. Steps are compared by
    error / bound, each under its own bound: a late step's error may be larger, and so may its bound."""

    prompt: str
    bucket: int
    step: int  # 1-based
    error: float  # NaN: the step could not be scored
    bound: float  # positive

    @property
    def ratio(self) -> float:
        """error / bound (``rules.ratio``: the step's headroom), 1 at the bound; an unscorable step is infinitely past
        it (as ``rules.severity`` says of an unscorable prompt)."""
        return rules.ratio(self.error, self.bound)

    @property
    def margin(self) -> float:
        """bound - error, in probability: negative past the bound (NaN for an unscorable step)."""
        return rules.margin(self.error, self.bound)

    @property
    def over(self) -> bool:
        """Past its bound (or unscorable): the step fails the decode check on its error alone, by the bound rule."""
        return not math.isfinite(self.error) or rules.past(self.error, self.bound)


def worst_step(prompt: str, bucket: int, step_errors: Sequence[float | None], bound: float | None,
               step_bounds: Mapping[str, float] | None) -> StepMargin | None:
    """The step of one prompt's continuation furthest past (or nearest) its own bound (``step_bound``); None when
    no step was compared or none has a bound. A step error of None is one a JSON record wrote for NaN."""
    margins = []
    for n, err in enumerate(step_errors, start=1):
        b = step_bound(n, bound, step_bounds)
        if b:
            margins.append(StepMargin(prompt, bucket, n, math.nan if err is None else float(err), float(b)))
    return max(margins, key=lambda m: m.ratio, default=None)


def worst_steps(result: CaseResult) -> dict[str, StepMargin | None]:
    """Each prompt's worst step (``worst_step``) in a case's decode check, every step under the bound the case
    judged it by; None for a prompt without one, and for every prompt of an exact case (it has no bounds)."""
    step_bounds = (result.bound_source or {}).get("step_bounds")
    return {d.id: worst_step(d.id, d.bucket, d.step_errors, bound_for(d.bucket, result.bound, result.bucket_bounds),
                             step_bounds) if result.golden_kind != GoldenMode.EXACT else None for d in result.decode}


def worst_decode_step(result: CaseResult) -> StepMargin | None:
    """The worst step over every prompt of a case's decode check (``worst_steps``); None without one."""
    return max((m for m in worst_steps(result).values() if m is not None), key=lambda m: m.ratio, default=None)


def failed_prompts(result: CaseResult) -> list[str]:
    """The prompts that failed on the first token or at any step of their continuation, in the case's order: a
    prompt whose decode step fails is a failed prompt, though its first token passed."""
    failed = {p.id for p in result.prompts if not p.passed} | {d.id for d in result.decode if not d.passed}
    order = [p.id for p in result.prompts] + [d.id for d in result.decode]
    return [pid for pid in dict.fromkeys(order) if pid in failed]


def case_headroom(result: CaseResult) -> float | None:
    """The largest error / bound over the first tokens and every decode step, each against its own bound; 1 is at
    the bound, None without bounds."""
    step = worst_decode_step(result)
    ratios = [r for r in (result.headroom, step.ratio if step else None) if r is not None]
    return max(ratios, default=None)


def _worst(errors: Sequence[float]) -> float:
    """The largest step error; NaN when a step could not be scored (as a prompt's error is then)."""
    if any(math.isnan(e) for e in errors):
        return float("nan")
    return max(errors, default=0.0)


def check_decode_golden(golden: Golden, steps: int, case: str, prefix: str = "") -> None:
    """A case with ``decode = steps`` needs a golden whose continuations are at least that long."""
    if golden.continuations is None:
        raise BadInput(f"{prefix}case {case} has decode = {steps}, but golden {golden.path} holds no continuations "
                       f"(make one with `parity-kit golden make --decode {steps}`)")
    if golden.decode_steps < steps:
        raise BadInput(f"{prefix}case {case} has decode = {steps}, but golden {golden.path} continues each prompt "
                       f"only {golden.decode_steps} steps")


def check_continuations_fit(prompts: Iterable[tuple[str, int]], steps: int, limits: ModelLimits | None,
                            model: str, prefix: str = "") -> None:
    """A continuation of ``steps`` tokens must stay inside the model's context: past it an engine wraps or
    truncates its positions, and its divergence would be blamed on its decode path."""
    if limits is None or limits.context is None:
        return
    for prompt_id, n_tokens in prompts:
        if n_tokens + steps > limits.context:
            raise BadInput(f"{prefix}prompt {prompt_id} has {n_tokens} tokens; continued {steps} steps it needs "
                           f"{n_tokens + steps} positions, more than the context of model {model} "
                           f"({limits.context}, {limits.where(limits.context_key)})")
