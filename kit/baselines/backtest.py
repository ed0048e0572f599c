"""The backtest of a new calibration record: every archived verdict it would turn, before it is blessed.

New bounds are a new gate. Looser ones can pass what the old ones rightly failed (a fault copy, a regressed
candidate); tighter ones can fail what was clean. Neither shows until a gate meets such a run again, so before
a record replaces another, every observation of its case the archive holds (kit.baselines.archive) is judged
again under it, from the numbers that run recorded, with no engine running:

- the failures no bound decides stay as they were recorded (a missing token, a winner change, a non-finite
  logprob, a refused decode divergence, a repeat that was not exact);
- each prompt's recorded error meets its bucket's new bound, and each decode step's recorded error its step's new
  bound (the record's bound for that step, else the bucket's), by the rule the gate judges them by
  (kit.core.rules.rules.judged_error), in its words; a decode check recorded before results kept each step's
  error cannot be replayed step by step under a record with step bounds, and is skipped as such
  (``SkipKind.NO_STEP_ERRORS``); under one without, its largest error is what every step is judged by;
- the drift test (kit.core.noise.drift) runs against the new record's clean samples only where the run computed on the
  class of hardware the record measured its noise on, as the gate runs it; elsewhere it is left out, and said so.

A verdict that turns is a flip. A known-bad run that would now pass refuses the record (``refusals``); a
known-good one that would now fail needs someone to accept it (``needs_acceptance``); the rest are listed.
Observations made on other inputs (another fixture or golden) are not comparable and are skipped, each with its
reason; a run that could not be read is counted, and refuses unless the caller chose to skip it.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from kit.baselines.archive import Archive, Known, ArchivedObservation, PromptFigures, Unreadable
from kit.core.noise.calibration import CalibrationRecord, measured_on, uncovered
from kit.core.noise.drift import drift_of
from kit.core.errors import BadInput
from kit.core.records.records import DriftOff, Status
from kit.core.rules import rules
from kit.core.rules.failure import Failure

log = logging.getLogger(__name__)

PASSES = "passes"  # a flip's first failure when there is none


class SkipKind(enum.StrEnum):
    """Why the record cannot judge an observation, as a reader asks it (never from the reason's words)."""

    NOT_COMPARABLE = "not comparable"  # nothing judged when it ran, or other case, inputs, backend or prompts
    NO_STEP_ERRORS = "cannot replay per step"  # a decode check recorded before results kept each step's error


@dataclass(frozen=True)
class NotReplayed:
    """An observation the record cannot judge, and why."""

    source: str
    reason: str
    kind: SkipKind = SkipKind.NOT_COMPARABLE

    def to_dict(self) -> dict:
        """A run the backtest passed over and why, as its record lists it."""
        return {"source": self.source, "reason": self.reason, "kind": self.kind.value}


@dataclass(frozen=True)
class Flip:
    """One archived verdict the new record would turn: ``was`` as recorded, ``now`` under the record, ``first`` its
    first failure there (or "passes"), ``drift`` why the drift test was left out (None: it ran)."""

    source: str
    kind: str
    known: str
    why: str
    was: str
    now: str
    first: str
    drift: str | None = None

    def to_dict(self) -> dict:
        """A run whose verdict the new record would change, as the backtest's record lists it: was, now,
        whether the run is known good or bad, and why."""
        return {"source": self.source, "kind": self.kind, "known": self.known, "why": self.why, "was": self.was,
                "now": self.now, "first": self.first, "drift": self.drift}


@dataclass(frozen=True)
class Backtest:
    """A record replayed over an archive: how many observations it judged, what it skipped or could not read,
    every verdict it would turn, and every known-bad run it would pass (turned or not)."""

    record: str  # the new record's SHA-256
    case: str
    replayed: int
    flips: tuple[Flip, ...]
    skipped: tuple[NotReplayed, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()
    skip_unreadable: bool = False
    drift_left_out: int = 0  # replayed observations judged without the drift test (other or unknown hardware)

    @property
    def refusals(self) -> list[Flip]:
        """Known-bad runs the record would pass: each refuses the bless."""
        return [f for f in self.flips if f.known == Known.BAD and f.now == Status.PASSED]

    @property
    def needs_acceptance(self) -> list[Flip]:
        """Known-good observations the record would fail: each must be accepted by a person, or the record is not
        blessed."""
        return [f for f in self.flips if f.known == Known.GOOD and f.now == Status.FAILED]

    @property
    def failure_messages(self) -> list[str]:
        """One line per reason the record cannot be blessed as it is, each naming its source."""
        sha = self.record[:12]
        lines = [f"{f.source}: known bad ({f.why}), {f.was} when it ran, would pass under record {sha}"
                 for f in self.refusals]
        lines += [f"{f.source}: known good ({f.why}), {f.was} when it ran, would fail under record {sha}: {f.first}"
                  for f in self.needs_acceptance]
        if not self.skip_unreadable:
            lines += [f"{u.source}: unreadable, so not backtested: {u.reason}" for u in self.unreadable]
        return lines

    def to_dict(self) -> dict:
        """The backtest as the lineage entry and `baseline make`'s evidence keep it: what was replayed, what
        flipped, what was skipped or unreadable."""
        return {"record": self.record, "case": self.case, "replayed": self.replayed,
                "refusals": len(self.refusals), "needs_acceptance": len(self.needs_acceptance),
                "flips": [f.to_dict() for f in self.flips], "skipped": [s.to_dict() for s in self.skipped],
                "unreadable": [u.to_dict() for u in self.unreadable], "skip_unreadable": self.skip_unreadable,
                "drift_left_out": self.drift_left_out}


def backtest(record: CalibrationRecord, observations: Archive | Iterable[ArchivedObservation],
             skip_unreadable: bool = False, alpha: float | None = None) -> Backtest:
    """Replay every observation (an Archive brings its unreadable runs too) under ``record``; see the module.
    ``alpha``: the drift test's alpha the descriptor gives the case (kit.descriptor.falsefailure), as the gate
    would judge it; None: the record's own."""
    if isinstance(observations, Archive):
        found, unreadable = observations.observations, observations.unreadable
    else:
        found, unreadable = tuple(observations), ()
    flips: list[Flip] = []
    skipped: list[NotReplayed] = []
    replayed = left_out = 0
    reference = record.reference()  # once: it serializes the whole record to name it
    if alpha is not None:
        reference["drift"] = {**reference["drift"], "alpha": alpha}
    for obs in found:
        skip = _unjudgeable(obs, record, reference)
        if skip is not None:
            skipped.append(skip)
            continue
        replayed += 1
        status, failures = _replay(obs, record, reference)
        drift = drift_left_out(obs, record)
        left_out += drift is not None
        # A known-bad run the record passes is listed whatever it got when it ran: a run that passed a bound too
        # loose to see its fault is no evidence for a record that would pass it too.
        if status != obs.status or (obs.known == Known.BAD and status == Status.PASSED):
            flips.append(Flip(obs.source, obs.kind, obs.known, obs.why, obs.status, status,
                              failures[0] if failures else PASSES, drift))
    result = Backtest(record.sha256, record.case, replayed, tuple(flips), tuple(skipped), tuple(unreadable),
                      skip_unreadable, left_out)
    log.info(f"backtest of record {record.sha256[:12]} ({record.case}): {replayed} replayed, {len(flips)} would "
             f"turn ({len(result.refusals)} known bad would pass, {len(result.needs_acceptance)} known good would "
             f"fail), {len(skipped)} not comparable, {len(unreadable)} unreadable")
    return result


def replay(observation: ArchivedObservation, record: CalibrationRecord) -> tuple[str, list[str]]:
    """The status ``observation`` would get under ``record``, and its failures in the order the gate gives them
    (per prompt, then decode checks, then the drift test, then the rest). One it cannot judge is refused."""
    reference = record.reference()
    skip = _unjudgeable(observation, record, reference)
    if skip is not None:
        raise BadInput(f"{observation.source}: cannot be judged by record {record.sha256[:12]}: {skip.reason}")
    return _replay(observation, record, reference)


def _unjudgeable(obs: ArchivedObservation, record: CalibrationRecord, reference: dict) -> NotReplayed | None:
    """Why ``record`` cannot judge ``obs``, typed (None: it can)."""
    reason = _not_comparable(obs, record, reference)
    if reason is not None:
        return NotReplayed(obs.source, reason)
    unstepped = [d.id for d in obs.decode if d.steps is None]
    if unstepped and reference.get("step_bounds"):
        return NotReplayed(obs.source, f"cannot replay per step: the result keeps only the largest decode error of "
                                   f"{', '.join(unstepped[:3])}{', ...' if len(unstepped) > 3 else ''}, and the "
                                   "record bounds each decode step", SkipKind.NO_STEP_ERRORS)
    return None


def _replay(obs: ArchivedObservation, record: CalibrationRecord, reference: dict) -> tuple[str, list[str]]:
    bounds, step_bounds = reference["bounds"], reference.get("step_bounds")
    failures: list[str] = []
    for p in obs.prompts:
        failures += p.failures
        failures += _texts([rules.judged_error(p.id, p.bucket, p.error, rules.bound_for(p.bucket, None, bounds))])
    for d in obs.decode:
        failures += d.failures
        failures += _texts(_decode_judged(d, rules.bound_for(d.bucket, None, bounds), step_bounds))
    if drift_left_out(obs, record) is None:
        failures += _drift_failures(obs, reference)
    failures += obs.other_failures
    return (Status.FAILED if failures else Status.PASSED), failures


def _decode_judged(d: PromptFigures, bucket_bound: float | None,
                   step_bounds: Mapping[str, float] | None) -> list[Failure | None]:
    """A decode check's steps judged as the gate judges them (kit.core.verdict.decode): step n under the record's
    bound for step n, else the bucket's. A check recorded without its steps is judged by its largest error under
    the bucket's bound, which is the same verdict where the record bounds no step (``_unjudgeable`` skips it
    where it does)."""
    if d.steps is None:
        return [rules.judged_error(d.id, d.bucket, d.error, bucket_bound, decode=True)]
    return [rules.judged_error(d.id, d.bucket, e, rules.step_bound(n, bucket_bound, step_bounds), step=n, decode=True)
            for n, e in enumerate(d.steps, start=1)]


def _texts(judged: Iterable[Failure | None]) -> list[str]:
    return [f.text for f in judged if f is not None]


def _drift_failures(obs: ArchivedObservation, reference: dict) -> list[str]:
    """The drift test of the observation's scorable prompts against the record's clean samples."""
    measured = set(reference["prompt_ids"])
    scored = [p for p in obs.prompts
              if p.id in measured and math.isfinite(p.error) and p.shift is not None and math.isfinite(p.shift)]
    if not scored:  # nothing to average: the prompts' own failures say why
        return []
    return drift_of({p.id: p.error for p in scored}, {p.id: float(p.shift or 0.0) for p in scored},
                    reference).failures


def drift_left_out(obs: ArchivedObservation, record: CalibrationRecord) -> str | None:
    """Why the drift test does not judge ``obs`` under ``record`` (None: it does). As in the gate: only on the
    class of hardware the record measured its noise on (a record that names none holds everywhere), never where
    the case turned it off; and a run that does not say where it ran is not taken to be on the same class."""
    if obs.drift_off is DriftOff.TURNED_OFF:
        return f"drift left out: the case's drift test was {obs.drift_skipped}"
    measured = measured_on({"fingerprint": record.fingerprint})
    if measured is None:
        return None
    if obs.hardware is None:
        return f"drift left out: the run does not say which hardware it ran on; the record measured noise on {measured}"
    if obs.hardware != measured:
        return f"drift left out: calibration measured on other hardware, {measured}; this run ran on {obs.hardware}"
    return None


def _not_comparable(obs: ArchivedObservation, record: CalibrationRecord, reference: dict) -> str | None:
    """Why ``record`` (its bounds ``reference``) cannot judge ``obs`` (None: it can): nothing was judged when it
    ran, another case, fixture, golden or backend, or prompts the record has no bound for. The model may differ: a
    fault copy's runs are what a backtest is for."""
    if obs.status not in (Status.PASSED, Status.FAILED):
        return f"status {obs.status} when it ran: nothing was judged, so nothing to replay"
    if obs.case != record.case:
        return f"another case: {obs.case}, the record calibrates {record.case}"
    for what in ("fixture", "golden"):
        have, want = getattr(obs, f"{what}_sha256"), record.inputs.get(f"{what}_sha256")
        if have != want:
            return f"another {what}: the run used {str(have)[:12]}, the record was made for {str(want)[:12]}"
    if obs.backend is not None and obs.backend != record.backend:
        return f"another backend: the run ran {obs.backend}, the record measured {record.backend}"
    if not obs.prompts:
        return "no prompt was scored"
    gap = uncovered(reference, obs.buckets)
    return f"the record does not cover it: {gap}" if gap else None
