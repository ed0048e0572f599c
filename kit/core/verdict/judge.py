"""A case judged from what it observed: the one function the kernel and ``parity-kit verify`` both call.

The kernel observes (prompts scored by its engine, continuations decoded, repeats run), then judges those
observations against the golden under the case's bounds and calibration. Only the observing needs an engine: the
judging is this function, so a run that keeps what its cases observed (kit.core.verdict.caseevidence) can be judged
again anywhere, by anyone, and must come to the same verdict.

Whether the drift test runs depends on the host (a record of other hardware leaves it out): the kernel decides it
and the decision is an input here, kept with the evidence, not re-decided on the machine that verifies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kit.core.noise.calibration import measured_on
from kit.core.verdict.decode import compare_continuation
from kit.core.noise.drift import DriftResult, drift_test
from kit.core.baselines.golden import Step
from kit.core.records.records import Continuation, DecodeScore, Observation, PromptScore, RepeatSpread, Status
from kit.core.verdict.scoring import repeat_spread, score_prompt
from kit.core.records.spec import CaseSpec
from kit.core.records.records import BoundKind, DriftOff, GoldenMode
from kit.core.rules import rules
from kit.core.rules.failure import Failure, texts

# Whether the drift test ran, by the kernel's decision (a reason it was left out otherwise).
DRIFT_RAN = "ran"


@dataclass(frozen=True)
class DriftLeftOut:
    """Why a calibrated case's drift test does not run here: ``kind``, what a reader decides by, and ``why``, its
    words for a person."""

    kind: DriftOff
    why: str


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
        """Whether any rule failed the case: the kernel and `verify` both take the case's status from this."""
        return bool(self.failures)

    def result_fields(self, spec: CaseSpec, golden_kind: str, drift_skipped: DriftLeftOut | None) -> dict[str, Any]:
        """The fields of the case's result (kit.core.records.records.CaseResult) that follow from this judgement of
        ``spec`` against a golden of ``golden_kind``: what the kernel records and `parity-kit verify` derives
        again. Everything else of a result (times, the engine's release and details) is the run's."""
        return dict(status=Status.FAILED if self.failed else Status.PASSED, golden_kind=golden_kind, bound=spec.bound,
                    bucket_bounds=dict(spec.bucket_bounds), bound_source=bound_source(spec,
                                                                                      golden_kind == GoldenMode.EXACT),
                    drift=self.drift.to_dict() if self.drift else None,
                    drift_skipped=drift_skipped.why if drift_skipped else None,
                    drift_off=drift_skipped.kind if drift_skipped else None,
                    prompts=self.scores, repeat_spread=self.spreads, failures=texts(self.failures),
                    typed_failures=self.failures, decode=self.decoded)


def drift_skipped(spec: CaseSpec, other_hardware: bool) -> DriftLeftOut | None:
    """Why a calibrated case's drift test does not run here (None: it runs, or the case has no calibration):
    its record measured other hardware (``other_hardware``, which only the case's host knows), or it is off."""
    if spec.calibration is None:
        return None
    if other_hardware:
        return DriftLeftOut(DriftOff.OTHER_HARDWARE,
                            f"calibration measured on other hardware, {measured_on(spec.calibration)}")
    return None if spec.drift else DriftLeftOut(DriftOff.TURNED_OFF, "turned off: drift = false")


def drift_decision(spec: CaseSpec, skipped: DriftLeftOut | None) -> str | None:
    """What ``judge`` takes as ``drift``: DRIFT_RAN where a calibrated case's drift test runs, else why not."""
    return DRIFT_RAN if spec.calibration is not None and skipped is None else skipped.why if skipped else None


def bound_source(spec: CaseSpec, exact: bool) -> dict:
    """Where the case's bounds came from, for every reader of its result."""
    if exact:
        return {"kind": BoundKind.EXACT.value}
    cal = spec.calibration
    if cal is None:
        return {"kind": BoundKind.HAND_SET.value}
    return {"kind": BoundKind.CALIBRATED.value, "record": cal["sha256"], "path": cal.get("path"),
            "rule": cal["rule"], "noise": cal["noise"], "noise_class": cal["noise_class"],
            "buckets": cal.get("buckets", {}),
            "measured_on": cal["fingerprint"].get("runtime", {}), "release": cal["fingerprint"].get("release", {}),
            **({"step_bounds": cal["step_bounds"]} if cal.get("step_bounds") else {})}


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
