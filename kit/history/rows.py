"""One run directory read into the typed rows the history is queried by: per run, per case, per case and bucket.

A store holds years of runs written by many kit versions, some stopped half way, some copied by hand. The
history must show what can be read and name what cannot, so nothing here raises on one bad run: a manifest or a
case result that is not what this kit reads becomes one line naming its file, and the rest of the run (or the
rest of the store) is still read. Where a run's ``result.json`` states a verdict its case files do not give,
the case files are trusted (they are written atomically, one per case, by the kernel's executor, while
result.json is written once at the end and can be stale after a resume) and a line says so.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import posixpath
import statistics
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping, Sequence

from kit.core.records import rundir
from kit.core.rules import rules
from kit.core.verdict.decode import StepMargin, worst_step
from kit.core.errors import BadInput
from kit.core.records.records import BoundKind, CaseResult, Status
from kit.core.records.recordcheck import Wrong, listing, mapping, text
from kit.core.records.resultcheck import written_by
from kit.core.records.results import RunDir, gate_verdict
from kit.core.records.store import Store
from kit.core.records.records import GoldenMode

log = logging.getLogger(__name__)

class LineKind(StrEnum):
    """What a line about a run says: it (or a part of it) could not be read, or its recorded verdict was not
    trusted."""
    SKIPPED = "skipped"
    VERDICT = "verdict"


class Check(StrEnum):
    """What a bucket row measures: the first token of its prompts, or the worst step of their continuations (a
    decode case's second series, each step against its own bound: kit.core.verdict.decode.worst_step)."""
    FIRST_TOKEN = "first-token"
    DECODE = "decode"


@dataclass(frozen=True)
class RunRow:
    """One gate run: where it is, what ran, against which release, and its verdict as its case files give it."""

    run: str  # its folder, relative to the store's root
    location: str  # the folder the store found (the control directory for a control's two runs)
    kind: str  # a rundir.RunRole: a gate run or one side of a control
    name: str  # the descriptor's name
    descriptor_sha256: str | None
    release: str | None
    started_at: _dt.datetime | None  # UTC
    verdict: str  # from its case files
    recorded_verdict: str | None  # what result.json says; None when it wrote none
    kit_version: str | None


@dataclass(frozen=True)
class CaseRow:
    """One case of one run: how it went and what it stood on (its golden, its calibration record)."""

    run: str
    case: str
    status: str
    backend: str
    bound_kind: str  # a BoundKind's word: calibrated, hand-set or exact
    max_error: float | None  # None: an unscorable prompt, or no prompts
    mean_error: float | None
    drift_value: float | None  # the drift test's mean error, and the upper end of its interval
    drift_limit: float | None
    drift_p: float | None
    golden_sha256: str | None
    record_sha256: str | None
    release: str | None
    model_digest: str | None
    started_at: _dt.datetime | None
    triage_class: str | None  # a triage the case result carries ({"class", "evidence"}), when it does
    triage_evidence: str | None


@dataclass(frozen=True)
class BucketRow:
    """One bucket of one case of one run: its errors beside its bound, and how much room is left."""

    run: str
    case: str
    bucket: int
    prompts: int
    max_error: float | None
    mean_error: float | None
    bound: float | None  # None: an exact case, judged bit for bit
    margin: float | None  # bound - largest error (rules.margin): negative past the bound
    ratio: float | None  # largest error / bound (rules.ratio, its headroom): 1 is at the bound
    # Check.DECODE: the error and bound are the bucket's worst step's (the step furthest past, or nearest, its own
    # bound), and the mean error is None (the steps have bounds of their own).
    check: Check = Check.FIRST_TOKEN


@dataclass(frozen=True)
class Line:
    """What could not be read, or was not trusted, in one line naming its file."""

    location: str
    kind: LineKind
    text: str

    def to_dict(self) -> dict:
        """A line of what the index read (a run it skipped or could not read), as `history --json` prints it."""
        return {"location": self.location, "kind": self.kind, "text": self.text}


@dataclass
class Read:
    """Everything read from one location of the store."""

    runs: list[RunRow] = field(default_factory=list)
    cases: list[CaseRow] = field(default_factory=list)
    buckets: list[BucketRow] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)


def read_location(store: Store, location: str) -> Read:
    """The gate run at ``location``, or a control directory's two runs; never raises on what it reads."""
    out = Read()
    try:
        if store.exists(posixpath.join(location, rundir.CONTROL)):
            current, candidate = _control(store, location)
            _read_run(store, location, posixpath.join(location, current), rundir.RunRole.CONTROL_CURRENT, out)
            _read_run(store, location, posixpath.join(location, candidate), rundir.RunRole.CONTROL_CANDIDATE, out)
        else:
            _read_run(store, location, location, rundir.RunRole.GATE_RUN, out)
    except BadInput as exc:
        out.lines.append(Line(location, LineKind.SKIPPED, str(exc)))
    return out


def _control(store: Store, location: str) -> tuple[str, str]:
    rel = posixpath.join(location, rundir.CONTROL)
    try:
        return rundir.control_run_names(store.read_json(rel))
    except Wrong as wrong:
        raise BadInput(f"{store.where(rel)}: malformed control record: {wrong.text}") from None


def _read_run(store: Store, location: str, run: str, kind: str, out: Read) -> None:
    reader = RunDir(store, run)
    try:
        manifest = reader.manifest()
    except BadInput as exc:
        raise BadInput(f"{exc}; run left out") from None
    version = manifest.get("kit_version")
    release = (manifest.get("release") or {}).get("name")
    started = _when(manifest.get("started_at"))
    results: dict[str, CaseResult] = {}
    for case in manifest["cases"]:
        rel = reader.rel(reader.case_name(case))
        try:
            doc = reader.case_doc(case)
            if doc is None:
                continue  # stopped before it finished: missing, as the verdict counts it
            row, buckets = case_rows(run, case, doc, release, started)
        except BadInput as exc:
            out.lines.append(Line(location, LineKind.SKIPPED, f"{exc}; case left out"))
            continue
        except Wrong as wrong:
            out.lines.append(Line(location, LineKind.SKIPPED,
                                  f"{store.where(rel)}: {wrong.text}{written_by(version)}; case left out"))
            continue
        # What the verdict needs of a case is its status: a full CaseResult is not built (see case_rows).
        results[case] = CaseResult(case=case, backend=row.backend, status=row.status)
        out.cases.append(row)
        out.buckets += buckets
    verdict = gate_verdict(manifest["cases"], results)
    stated = reader.recorded()
    recorded = stated.verdict if stated is not None else None
    if recorded is not None and recorded != verdict:
        out.lines.append(Line(location, LineKind.VERDICT, f"{reader.where(rundir.RESULT)}: says "
                                                 f"{recorded}, its case files say {verdict}; the case files are "
                                                 "trusted"))
    out.runs.append(RunRow(run, location, kind, manifest["name"], manifest.get("descriptor_sha256"), release,
                           started, verdict, recorded, version))


def case_rows(run: str, case: str, doc: Any, release: str | None,
              run_started: _dt.datetime | None) -> tuple[CaseRow, list[BucketRow]]:
    """The rows of one case result, read from its JSON for what the history shows and checked for that only
    (Wrong at the first value it cannot use): checking every field of a CaseResult, and building one, costs
    ten times the parse, and a store holds thousands."""
    d = mapping(doc, "")
    status = text(d.get("status"), "status")
    if status not in tuple(Status):
        raise Wrong("status", f"expected one of {', '.join(Status)}", status)
    if d.get("case") != case:
        raise Wrong("case", f"expected {case!r}, the case its file is named after", d.get("case"))
    prompts = [mapping(p, f"prompts[{i}]") for i, p in enumerate(listing(d.get("prompts", []), "prompts"))]
    errors = [_error(p.get("max_probability_error"), f"prompts[{i}].max_probability_error")
              for i, p in enumerate(prompts)]
    source, drift = _table(d.get("bound_source")), _table(d.get("drift"))
    record = source.get("record")
    triage = _table(d.get("triage"))  # read tolerantly: a triage is a field a newer kit adds to case results
    row = CaseRow(
        run=run, case=case, status=status, backend=text(d.get("backend"), "backend"),
        bound_kind=BoundKind.of(source, d.get("golden_kind")).value,
        max_error=_largest(errors),
        mean_error=_mean(errors), drift_value=_drift_error(drift).get("value"),
        drift_limit=_drift_error(drift).get("high"), drift_p=_finite(drift.get("p_value")),
        golden_sha256=_baseline_golden(d, case), record_sha256=record if isinstance(record, str) else None,
        release=release, model_digest=_text(d.get("model_digest")),
        started_at=_when(d.get("started_at")) or run_started,
        triage_class=_text(triage.get("class")), triage_evidence=_text(triage.get("evidence")))
    return row, bucket_rows(run, case, d, prompts) + decode_rows(run, case, d)


def _baseline_golden(d: Mapping[str, Any], case: str) -> str | None:
    """The digest of the golden a case stood on; None for a reference its own kernel computed in the run
    (``cases/<case>.reference.json``): made anew every run, so its digest changing is no change of baseline."""
    path = d.get("golden_path")
    if isinstance(path, str) and posixpath.basename(path.replace("\\", "/")) == f"{case}{rundir.CASE_REFERENCE}":
        return None
    return _text(d.get("golden_sha256"))


def bucket_rows(run: str, case: str, d: Mapping[str, Any], prompts: Sequence[Mapping[str, Any]]) -> list[BucketRow]:
    """One case's rows per bucket from its recorded prompts: their largest error, the bound, the margin and the
    ratio; a prompt without a whole-number bucket is refused by its key."""
    by_bucket: dict[int, list[float | None]] = {}
    bounds: dict[int, Any] = {}
    for i, p in enumerate(prompts):
        bucket = p.get("bucket")
        if not isinstance(bucket, int):
            raise Wrong(f"prompts[{i}].bucket", "expected a whole number", bucket)
        by_bucket.setdefault(bucket, []).append(_error(p.get("max_probability_error"),
                                                       f"prompts[{i}].max_probability_error"))
        bounds.setdefault(bucket, p.get("bound"))
    table = _table(d.get("bucket_bounds"))
    rows = []
    for bucket, errors in sorted(by_bucket.items()):
        bound = _finite(rules.bound_for(bucket, bounds[bucket],
                                        table)) if d.get("golden_kind") != GoldenMode.EXACT else None
        if bound is not None and not 0 < bound <= 1:
            raise Wrong(f"bucket {bucket}'s bound", "expected a probability difference above 0 and at most 1", bound)
        largest = _largest(errors)
        rows.append(BucketRow(
            run=run, case=case, bucket=bucket, prompts=len(errors), max_error=largest, mean_error=_mean(errors),
            bound=bound, margin=rules.margin(largest, bound) if bound is not None and largest is not None else None,
            ratio=rules.ratio(largest, bound) if bound and largest is not None else None))
    return rows


def decode_rows(run: str, case: str, d: Mapping[str, Any]) -> list[BucketRow]:
    """Per bucket of a decode case, its worst step against that step's own bound, as a series of its own: a step
    creeping toward its bound is flagged as a first token's error would be. None for an exact case (no bounds)."""
    if d.get("golden_kind") == GoldenMode.EXACT:
        return []
    bound, table = _finite(d.get("bound")), _table(d.get("bucket_bounds"))
    steps = {n: b for n, b in _table(_table(d.get("bound_source")).get("step_bounds")).items() if _finite(b)}
    by_bucket: dict[int, list[StepMargin | None]] = {}
    for i, s in enumerate(listing(d.get("decode") or [], "decode")):
        s = mapping(s, f"decode[{i}]")
        bucket = s.get("bucket")
        if not isinstance(bucket, int):
            raise Wrong(f"decode[{i}].bucket", "expected a whole number", bucket)
        errors = [_step_error(e, f"decode[{i}].step_errors[{n}]")
                  for n, e in enumerate(listing(s.get("step_errors") or [], f"decode[{i}].step_errors"))]
        bucket_bound = _finite(rules.bound_for(bucket, bound, table))
        by_bucket.setdefault(bucket, []).append(worst_step(str(s.get("id")), bucket, errors, bucket_bound, steps))
    rows = []
    for bucket, found in sorted(by_bucket.items()):
        margins = [m for m in found if m is not None]
        if not margins:
            continue
        worst = max(margins, key=lambda m: m.ratio)
        scored = math.isfinite(worst.error)  # an unscorable step has no error, as an unscorable prompt has none
        rows.append(BucketRow(
            run=run, case=case, bucket=bucket, prompts=len(found), max_error=worst.error if scored else None,
            mean_error=None, bound=worst.bound, margin=worst.margin if scored else None,
            ratio=worst.ratio if scored else None, check=Check.DECODE))
    return rows


def _step_error(value: Any, where: str) -> float:
    """A step's error as a result records it: a number, or None for a step that could not be scored (NaN)."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Wrong(where, "expected a number or null", value)
    _error(value, where)  # a finite error is a probability difference
    return float(value)


def _drift_error(drift: Mapping[str, Any]) -> dict[str, float | None]:
    """The drift test's error statistic: the run's mean error and the upper end of its interval."""
    for s in drift.get("statistics") or []:
        if isinstance(s, dict) and s.get("test") == "error":
            return {"value": _finite(s.get("value")), "high": _finite(s.get("high"))}
    return {}


def _when(value: Any) -> _dt.datetime | None:
    """An ISO time as naive UTC (what the index keeps); None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        t = _dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return t.astimezone(_dt.timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _error(value: Any, where: str) -> float | None:
    """A recorded probability error: None where it is no finite number (a prompt that could not be scored), Wrong
    where no probability difference can be it (below 0, above 1). Such a value was not written by a gate; one of
    1e308 would also overflow the sums made of a run's errors, and one bad run of a shared store would stop every
    reader of its history."""
    found = _finite(value)
    if found is not None and not 0 <= found <= 1:
        raise Wrong(where, "expected a probability difference between 0 and 1", value)
    return found


def _table(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _largest(errors: Sequence[float | None]) -> float | None:
    """The largest error; None when there is none, or one prompt could not be scored (its error is no number)."""
    finite = [e for e in errors if e is not None]
    return max(finite) if finite and len(finite) == len(errors) else None


def _mean(values: Sequence[float | None]) -> float | None:
    finite = [v for v in map(_finite, values) if v is not None]
    return statistics.fmean(finite) if finite and len(finite) == len(values) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else (None if value is None else str(value))
