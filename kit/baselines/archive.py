"""The archive a new baseline is backtested on: every recorded observation of one case that can be read.

A run directory keeps what a case measured (per prompt its error, its shift, its bucket) next to the verdict it
got, so a new calibration record can judge it again with no engine running (kit.baselines.backtest). What makes
that replay worth doing is knowing which verdicts were right; each observation says so, and why:

- known **bad**: a run someone marked bad (``bad.json``, kit.baselines.marks), a run of a fault copy that
  `parity-kit fault inject` wrote (its manifest records the copy's provenance by model digest), the candidate of
  a control whose diagnosis found a regression;
- known **good**: a passed run marked by none of these, and each distinct clean sample of the record being
  superseded (clean by construction: that is what a sample is);
- **unknown**: the rest, replayed and listed all the same.

A run that cannot be read is not skipped in silence: it is collected with one line naming its file and what is
wrong, and the caller decides whether that refuses the backtest. Nothing here judges; it only reads.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from kit.baselines.marks import BadMark, read_mark
from kit.core.model import faultcopy
from kit.core.records import rundir
from kit.core.records.store import FolderKind, NotWalked, local_store, walk
from kit.core.noise.calibration import CalibrationRecord, distinct, measured_on
from kit.core.verdict.diagnosis import ControlVerdict
from kit.core.errors import BadInput
from kit.core.records.paths import display
from kit.core.records.recordcheck import mapping, text
from kit.core.records.rundir import RunRole
from kit.core.records.records import BoundKind, DriftOff, CaseResult, DecodeScore, PromptScore, Status
from kit.core.records.results import RunDir, Verdict
from kit.core.records.resultcheck import read_shaped
from kit.core.verdict import Kind, failures_of

log = logging.getLogger(__name__)


class Known(StrEnum):
    """What is known of an archived run's verdict: whether the backtest may count it for or against a new record."""
    BAD = "bad"
    GOOD = "good"
    UNKNOWN = "unknown"


# The status of a case a run lists but holds no result of (stopped before it finished).
MISSING = "missing"

_RUN_WORDS: dict[str, str] = {RunRole.GATE_RUN: "gate run", RunRole.CONTROL_CANDIDATE: "candidate run of a control",
              RunRole.CONTROL_CURRENT: "current-pin run of a control"}


@dataclass(frozen=True)
class PromptFigures:
    """What one prompt (or one prompt's decode check) recorded that a replay judges again: its largest error
    (NaN when it could not be scored), its shift, its bucket, and its failures that no bound or drift test
    decides (a missing token, a winner change, a non-finite logprob, a refused divergence)."""

    id: str
    bucket: int
    error: float
    shift: float | None
    failures: tuple[str, ...] = ()
    # A decode check's error at each step compared (NaN: unscorable), what a replay judges step by step under a
    # record's step bounds; None for a first token, and for a result written before results kept its steps.
    steps: tuple[float, ...] | None = None


@dataclass(frozen=True)
class ArchivedObservation:
    """One case as one run (or one calibration sample) recorded it, with what is known of its verdict."""

    source: str  # the file it was read from, for messages (a sample: its record and its variant)
    kind: str  # a RunRole's word
    known: Known
    why: str  # how that is known ("marked bad: ...", "a passed gate run", ...)
    case: str
    backend: str | None
    fixture_sha256: str | None
    golden_sha256: str | None
    model_digest: str | None
    status: str  # the status the case got when it ran: passed, failed, error, timeout, no-baseline, missing
    # the class of hardware it ran on, as kit.core.host.runtime.accelerator names it; None: unsaid
    hardware: str | None
    prompts: tuple[PromptFigures, ...] = ()
    decode: tuple[PromptFigures, ...] = ()  # shift None: a decode check follows none
    other_failures: tuple[str, ...] = ()  # the case's failures of no prompt and no drift test (exact repeats)
    drift_skipped: str | None = None  # why the run itself left its drift test out, as it recorded
    # which of the reasons that was: what a replay decides by. A case that turned its test off ran on the class of
    # hardware its record measured, or the kernel would have refused the record.
    drift_off: DriftOff | None = None

    @property
    def errors(self) -> dict[str, float]:
        """Prompt id -> the error it had when it ran: what a new record's bounds are replayed against."""
        return {p.id: p.error for p in self.prompts}

    @property
    def shifts(self) -> dict[str, float]:
        """Prompt id -> its top-probability shift, for the prompts that had one: what the drift test is replayed on."""
        return {p.id: p.shift for p in self.prompts if p.shift is not None}

    @property
    def buckets(self) -> dict[str, int]:
        """Prompt id -> its bucket: which bound of a new record each prompt is replayed under."""
        return {p.id: p.bucket for p in self.prompts}

    @property
    def kept_failures(self) -> list[str]:
        """Every failure that holds whatever the bounds and the drift test: prompts', decode checks', the rest."""
        return [f for p in (*self.prompts, *self.decode) for f in p.failures] + list(self.other_failures)


@dataclass(frozen=True)
class Unreadable:
    """A run (or control) directory the archive could not read: one line naming the file and what is wrong."""

    source: str  # the directory left out
    reason: str

    def to_dict(self) -> dict:
        """The run that could not be read and why, as the backtest's record lists it."""
        return {"source": self.source, "reason": self.reason}


@dataclass(frozen=True)
class Archive:
    """Every observation of ``case`` found under the roots, and every directory that could not be read."""

    case: str
    observations: tuple[ArchivedObservation, ...]
    unreadable: tuple[Unreadable, ...] = ()
    skipped: tuple[Unreadable, ...] = ()  # folders the walk did not look into (hidden, too deep, a link out)


def read_archive(roots: Sequence[str | Path], case: str, superseded: CalibrationRecord | None = None) -> Archive:
    """The observations of ``case`` in the gate runs and controls under ``roots`` (each a folder of runs, or a
    run or control directory itself), then the distinct samples of ``superseded``, the record a new one replaces.
    A root that is no folder is refused; a run that cannot be read is collected in ``unreadable``, and each folder
    the walk did not look into (kit.core.records.store.walk) in ``skipped``, both said in a line each."""
    found: list[ArchivedObservation] = []
    unreadable: list[Unreadable] = []
    skipped: list[Unreadable] = []
    runs: dict[Path, tuple[Path, str, tuple[Known, str] | None]] = {}
    for root in map(Path, roots):
        if not root.is_dir():
            raise BadInput(f"{display(root)}: no folder of runs to backtest on")
        for run_dir, kind, told in _runs(root, unreadable, skipped):
            # Roots that overlap name a run twice; one named as a root itself is still its control's side.
            earlier = runs.get(run_dir.resolve())
            if earlier is None or (earlier[1] == RunRole.GATE_RUN and kind != RunRole.GATE_RUN):
                runs[run_dir.resolve()] = (run_dir, kind, told)
    for run_dir, kind, told in runs.values():
        try:
            observation = read_observation(run_dir, case, kind, told)
        except BadInput as exc:
            unreadable.append(Unreadable(display(run_dir), str(exc)))
            continue
        if observation is not None:
            log.debug(f"{observation.source}: {observation.kind}, {observation.status}, known {observation.known}")
            found.append(observation)
    if superseded is not None:
        found += record_samples(superseded)
    for s in skipped:
        log.warning(f"{s.source}: {s.reason}")
    log.info(f"archive of case {case}: {len(found)} observation(s), {len(unreadable)} unreadable, "
             f"{len(skipped)} folder(s) not looked into")
    return Archive(case, tuple(found), tuple(unreadable), tuple(skipped))


def runs_under(root: Path) -> tuple[list[tuple[Path, str, tuple[Known, str] | None]], list[Unreadable],
                                     list[Unreadable]]:
    """Every run directory under ``root`` as the archive finds them (``(run_dir, kind, what its control says of
    it)``, a control standing for its two runs), with the folders that could not be read and those not looked
    into: for a reader that takes runs of one kind (`baseline deepen`'s control runs of the pin)."""
    unreadable: list[Unreadable] = []
    skipped: list[Unreadable] = []
    found = list(_runs(root, unreadable, skipped))
    return found, unreadable, skipped


def _runs(root: Path, unreadable: list[Unreadable],
          skipped: list[Unreadable]) -> Iterator[tuple[Path, str, tuple[Known, str] | None]]:
    """Each run directory under ``root`` (kit.core.records.store.walk): ``(run_dir, kind, what its control says of
    it)``. A control stands for its two runs; a folder that cannot be listed is unreadable, one not looked into
    skipped."""
    walked = walk(local_store(root))
    for s in walked.skipped:
        (unreadable if s.kind == NotWalked.UNLISTED else skipped).append(Unreadable(display(root / s.location), s.why))
    for found in walked.found:
        folder = root / found.location if found.location else root
        if found.kind == FolderKind.GATE:
            yield folder, RunRole.GATE_RUN, None
            continue
        try:
            yield from control_sources(folder)
        except BadInput as exc:
            unreadable.append(Unreadable(display(folder), str(exc)))


def control_sources(control_dir: Path) -> list[tuple[Path, str, tuple[Known, str] | None]]:
    """A control's current and candidate run directories, from its own record; the candidate is known bad when the
    control's diagnosis found a regression in it."""
    current, candidate = rundir.control_run_dirs(control_dir)
    verdict = None
    if (control_dir / rundir.DIAGNOSIS).is_file():
        verdict = read_shaped(control_dir / rundir.DIAGNOSIS, "diagnosis",
                           lambda d: text(mapping(d, "").get("verdict"), "verdict"))
    told = (Known.BAD, f"the candidate of a control that found a regression ({display(control_dir)})") \
        if verdict == ControlVerdict.REGRESSION else None
    return [(current, RunRole.CONTROL_CURRENT, None), (candidate, RunRole.CONTROL_CANDIDATE, told)]


def read_observation(run_dir: Path, case: str, kind: str = RunRole.GATE_RUN,
                     told: tuple[Known, str] | None = None) -> ArchivedObservation | None:
    """The observation of ``case`` in the gate run ``run_dir`` (None when the run does not list the case); a
    damaged manifest, case result, result.json or bad mark is refused in one line naming the file."""
    run = RunDir.local(run_dir)
    manifest = run.manifest()
    if case not in manifest["cases"]:
        return None
    mark = read_mark(run_dir)
    verdict = run.recorded_verdict()
    result = run.case_result(case, manifest.get("kit_version"))
    known, why = judged(kind, manifest, result, mark, told, verdict)
    where = run.where(run.case_name(case))
    if result is None:
        return ArchivedObservation(where, kind, known, why, case, None, None, None, None, MISSING, None)
    return from_result(result, where, kind, known, why)


def judged(kind: str, manifest: Mapping[str, Any], result: CaseResult | None, mark: BadMark | None,
           told: tuple[Known, str] | None, verdict: str | None) -> tuple[Known, str]:
    """What is known of a run's verdict, and how (see the module): a mark first, then a fault copy, then what its
    control said, then a passed run; anything else is unknown."""
    if mark is not None:
        return Known.BAD, f"marked bad: {mark.reason}"
    fault = fault_of(manifest, result.model_digest if result else None)
    if fault is not None:
        return Known.BAD, f"a gate run of a fault-catalogue copy ({faultcopy.fault_words(fault)})"
    if told is not None:
        return told
    words = _RUN_WORDS[kind]
    if verdict == Verdict.PASSED:
        return Known.GOOD, f"a passed {words}"
    if verdict:
        return Known.UNKNOWN, f"{'an' if verdict[0] in 'aeiou' else 'a'} {verdict} {words}, not known bad"
    return Known.UNKNOWN, f"a {words} that recorded no verdict"


def fault_of(manifest: Mapping[str, Any], digest: str | None) -> dict | None:
    """The fault provenance of the model a case ran on (by its digest), None when it was no fault copy. A manifest
    written before manifests recorded ``model_faults`` is answered by its main model's folder, if that is still
    there and the case ran on it."""
    if digest is None:
        return None
    faults = manifest.get("model_faults")
    if isinstance(faults, dict):
        found = faults.get(digest)
        return found if isinstance(found, dict) else None
    model = manifest.get("model")
    if faults is not None or manifest.get("model_digest") != digest or not isinstance(model, str):
        return None
    try:
        found = faultcopy.read_provenance(model)
    except BadInput as exc:
        found = {"unreadable": str(exc)}
    return found


def from_result(result: CaseResult, source: str, kind: str, known: Known, why: str) -> ArchivedObservation:
    """The figures of a case result a replay needs: per prompt and per decode check, with the failures no bound
    decides (every bound line left out: a replay says its own), and the rest of the case's failures that no
    prompt and no drift test gave."""
    prompts = tuple(PromptFigures(p.id, p.bucket, _number(p.max_probability_error), _shift(p.top_probability_shift),
                                  _kept(p)) for p in result.prompts)
    decode = tuple(PromptFigures(d.id, d.bucket, _number(d.max_probability_error), None, _kept(d),
                                 tuple(map(_number, d.step_errors)) if d.step_errors else None)
                   for d in result.decode)
    drift = result.drift.get("failures") if isinstance(result.drift, dict) else None
    accounted = {f for p in result.prompts for f in p.failures} | {f for d in result.decode for f in d.failures} | set(
        drift if isinstance(drift, list) else [])
    return ArchivedObservation(
        source=source, kind=kind, known=known, why=why, case=result.case, backend=result.backend,
        fixture_sha256=result.fixture_sha256, golden_sha256=result.golden_sha256, model_digest=result.model_digest,
        status=result.status, hardware=ran_on(result), prompts=prompts, decode=decode,
        other_failures=tuple(f for f in result.failures if f not in accounted), drift_skipped=result.drift_skipped,
        drift_off=result.drift_left_out)


def ran_on(result: CaseResult) -> str | None:
    """The class of hardware a case ran on, where its result says: the class its calibration record measured when
    the case ran that record's drift test (the kernel runs it only on the same class, or turned off), else the
    one model of the GPUs the executor gave it (nvidia-smi's name, as accelerator() gives it); None otherwise."""
    source = result.bound_source or {}
    ran_drift = result.drift is not None or result.drift_left_out is DriftOff.TURNED_OFF
    runtime = source.get("measured_on")
    if result.bound_kind is BoundKind.CALIBRATED and ran_drift and isinstance(runtime, dict):
        name = measured_on({"fingerprint": {"runtime": runtime}})
        if isinstance(name, str) and name:
            return name
    names = {d.get("name") for d in result.devices if isinstance(d, dict)}
    if len(names) == 1:
        name = names.pop()
        return name if isinstance(name, str) and name else None
    return None


def record_samples(record: CalibrationRecord) -> list[ArchivedObservation]:
    """Each distinct clean sample of ``record`` as an observation: known good, measured on the record's hardware,
    with the record's inputs and each prompt in the record's bucket."""
    buckets = {pid: int(p["bucket"]) for pid, p in record.prompts.items()}
    where = display(record.path) if record.path else f"calibration record {record.sha256[:12]}"
    hardware = measured_on({"fingerprint": record.fingerprint})
    out = []
    for s in distinct(record.samples):
        prompts = tuple(PromptFigures(pid, buckets[pid], s.errors[pid], s.shifts.get(pid))
                        for pid in sorted(s.errors) if pid in buckets)
        out.append(ArchivedObservation(
            source=f"{where} sample {s.variant} (launch {s.launch}, repeat {s.repeat})",
                                       kind=RunRole.CALIBRATION_SAMPLE,
            known=Known.GOOD, why=f"a clean calibration sample of record {record.sha256[:12]}", case=record.case,
            backend=record.backend, fixture_sha256=record.inputs.get("fixture_sha256"),
            golden_sha256=record.inputs.get("golden_sha256"), model_digest=record.inputs.get("model_digest"),
            status=Status.PASSED, hardware=hardware, prompts=prompts))
    return out


def _kept(score: PromptScore | DecodeScore) -> tuple[str, ...]:
    """The failures of a prompt (or decode check) that its recorded error does not decide: every bound's is left
    out, and every unscorable answer's (a NaN error), since a replay judges the recorded error again by the
    verdict's rule (kit.core.rules.rules.judged_error), which fails both. One the executor found re-judging a
    notebook's verdict stays: it records that the notebook disagreed with its own numbers, which no bound undoes."""
    return tuple(f.text for f in failures_of(score) if f.kind not in _JUDGED_AGAIN or f.rejudged)


# What a replay re-derives from a recorded error, so it is not kept as recorded.
_JUDGED_AGAIN = frozenset({Kind.OVER_BOUND, Kind.NON_FINITE})


def _number(value: float | None) -> float:
    """A recorded error; None is how JSON kept a NaN (an unscorable prompt)."""
    return float(value) if isinstance(value, (int, float)) else math.nan


def _shift(value: float | None) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
