"""A case judged from what it observed: the one function the kernel and ``parity-kit verify`` both call.

The kernel observes (prompts scored by its engine, continuations decoded, repeats run), then judges those
observations against the golden under the case's bounds and calibration. Only the observing needs an engine: the
judging is this function, so a run that keeps what its cases observed (kit.core.caseevidence) can be judged again
anywhere, by anyone, and must come to the same verdict.

Whether the drift test runs depends on the host (a record of other hardware leaves it out): the kernel decides it
and the decision is an input here, kept with the evidence, not re-decided on the machine that verifies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from kit.core.decode import compare_continuation
from kit.core.drift import DriftResult, drift_test
from kit.core.golden import Step
from kit.core.records import Continuation, DecodeScore, Observation, PromptScore, RepeatSpread
from kit.core.scoring import repeat_spread, score_prompt
from kit.core.spec import CaseSpec
from kit.core.verdict import rules
from kit.core.verdict.failure import Failure

# Whether the drift test ran, by the kernel's decision (a reason it was left out otherwise).
DRIFT_RAN = "ran"


@dataclass(frozen=True)
class Scored:
    """A prompt of the case as it was scored: its id, bucket and length."""

    id: str
    bucket: int
    n_tokens: int


@dataclass(frozen=True)
class Judged:
    """The verdict's parts: per prompt, per decoded prompt, the drift test, the repeats, and every failure."""

    scores: list[PromptScore]
    decoded: list[DecodeScore]
    drift: DriftResult | None
    spreads: list[RepeatSpread]
    failures: list[Failure] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.failures)


def judge(spec: CaseSpec, prompts: Sequence[Scored], golden_tops: Mapping[str, Sequence[tuple[int, float]]],
          golden_continuations: Mapping[str, Sequence[Step]], exact: bool, observations: Sequence[Observation],
          continuations: Mapping[str, Continuation], runs: Mapping[str, Sequence[Observation]],
          drift: str | None) -> Judged:
    """Judge the case ``spec`` from its observations (one per prompt, in ``prompts``' order), its continuations
    and its repeats' runs (by prompt id) against the golden's tops and continuations; ``drift`` is DRIFT_RAN when
    the drift test runs on this case here (None or a reason when it does not)."""
    scores = [score_prompt(p.id, p.bucket, golden_tops[p.id], obs,
                           rules.bound_for(p.bucket, spec.bound, spec.bucket_bounds), exact=exact)
              for p, obs in zip(prompts, observations)]
    failures = [f for s in scores for f in s.typed_failures]
    decoded = [compare_continuation(p.id, p.bucket, p.n_tokens, list(golden_continuations[p.id])[: spec.decode],
                                    continuations[p.id], rules.bound_for(p.bucket, spec.bound, spec.bucket_bounds),
                                    (spec.calibration or {}).get("step_bounds"))
               for p in prompts] if spec.decode else []
    failures += [f for d in decoded for f in d.typed_failures]
    tested = drift_test(scores, spec.calibration) if drift == DRIFT_RAN and spec.calibration is not None else None
    if tested is not None:
        failures += tested.typed_failures
    spreads = [repeat_spread(pid, list(obs), spec.repeat_launches) for pid, obs in runs.items()] \
        if spec.repeated else []
    if spec.exact_repeats:
        failures += [f for f in map(rules.repeat, spreads) if f is not None]
    return Judged(scores, decoded, tested, spreads, failures)
