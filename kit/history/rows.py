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
from typing import Any, Mapping, Sequence

from kit.core import rundir
from kit.core.errors import BadInput
from kit.core.records import CaseResult
from kit.core.recordcheck import Wrong
from kit.core.resultcheck import check_case_result, check_manifest, written_by
from kit.core.results import gate_verdict
from kit.history.store import Store

log = logging.getLogger(__name__)

GATE_RUN, CONTROL_CURRENT, CONTROL_CANDIDATE = "gate run", "control current", "control candidate"
# What a line about a run says: it (or a part of it) could not be read, or its recorded verdict was not trusted.
SKIPPED, VERDICT = "skipped", "verdict"


@dataclass(frozen=True)
class RunRow:
    """One gate run: where it is, what ran, against which release, and its verdict as its case files give it."""

    run: str  # its folder, relative to the store's root
    location: str  # the folder the store found (the control directory for a control's two runs)
    kind: str  # GATE_RUN, CONTROL_CURRENT or CONTROL_CANDIDATE
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
    bound_kind: str  # calibrated, hand-set or exact
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
    headroom: float | None  # bound - largest error
    ratio: float | None  # largest error / bound: 1 is at the bound


@dataclass(frozen=True)
class Line:
    """What could not be read, or was not trusted, in one line naming its file."""

    location: str
    kind: str  # SKIPPED or VERDICT
    text: str

    def to_dict(self) -> dict:
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
            _read_run(store, location, posixpath.join(location, current), CONTROL_CURRENT, out)
            _read_run(store, location, posixpath.join(location, candidate), CONTROL_CANDIDATE, out)
        else:
            _read_run(store, location, location, GATE_RUN, out)
    except BadInput as exc:
        out.lines.append(Line(location, SKIPPED, str(exc)))
    return out


def _control(store: Store, location: str) -> tuple[str, str]:
    rel = posixpath.join(location, rundir.CONTROL)
    try:
        return rundir.control_run_names(store.read_json(rel))
    except Wrong as wrong:
        raise BadInput(f"{store.where(rel)}: malformed control record: {wrong.text}") from None


def _read_run(store: Store, location: str, run: str, kind: str, out: Read) -> None:
    manifest_rel = posixpath.join(run, rundir.MANIFEST)
    manifest = store.read_json(manifest_rel)
    version = manifest.get("kit_version") if isinstance(manifest, dict) else None
    try:
        check_manifest(manifest)
    except Wrong as wrong:
        raise BadInput(f"{store.where(manifest_rel)}: {wrong.text}{written_by(version)}; run left out") from None
    release = (manifest.get("release") or {}).get("name")
    started = _when(manifest.get("started_at"))
    results: dict[str, CaseResult] = {}
    for case in manifest["cases"]:
        rel = posixpath.join(run, rundir.CASES, f"{case}.json")
        if not store.exists(rel):
            continue  # stopped before it finished: missing, as the verdict counts it
        try:
            doc = store.read_json(rel)
            check_case_result(doc, case)
        except BadInput as exc:
            out.lines.append(Line(location, SKIPPED, f"{exc}; case left out"))
            continue
        except Wrong as wrong:
            out.lines.append(Line(location, SKIPPED,
                                  f"{store.where(rel)}: {wrong.text}{written_by(version)}; case left out"))
            continue
        result = CaseResult.from_dict(doc)
        results[case] = result
        out.cases.append(case_row(run, result, doc, release, started))
        out.buckets += bucket_rows(run, result)
    verdict = gate_verdict(manifest["cases"], results)
    recorded = _recorded_verdict(store, run)
    if recorded is not None and recorded != verdict:
        out.lines.append(Line(location, VERDICT, f"{store.where(posixpath.join(run, rundir.RESULT))}: says "
                                                 f"{recorded}, its case files say {verdict}; the case files are "
                                                 "trusted"))
    out.runs.append(RunRow(run, location, kind, manifest["name"], manifest.get("descriptor_sha256"), release,
                           started, verdict, recorded, version))


def _recorded_verdict(store: Store, run: str) -> str | None:
    rel = posixpath.join(run, rundir.RESULT)
    if not store.exists(rel):
        return None
    doc = store.read_json(rel)
    verdict = doc.get("verdict") if isinstance(doc, dict) else None
    return verdict if isinstance(verdict, str) else None


def case_row(run: str, r: CaseResult, doc: Mapping[str, Any], release: str | None,
             run_started: _dt.datetime | None) -> CaseRow:
    errors = [p.max_probability_error for p in r.prompts]
    drift = _drift_error(r.drift)
    source = r.bound_source or {}
    record = source.get("record")
    # Read tolerantly: a triage is a field a newer kit adds to case results.
    found = doc.get("triage")
    triage: Mapping[str, Any] = found if isinstance(found, dict) else {}
    return CaseRow(
        run=run, case=r.case, status=r.status, backend=r.backend, bound_kind=bound_kind(r),
        max_error=_finite(r.max_probability_error), mean_error=_mean(errors),
        drift_value=drift.get("value"), drift_limit=drift.get("high"),
        drift_p=_finite((r.drift or {}).get("p_value")), golden_sha256=r.golden_sha256,
        record_sha256=record if isinstance(record, str) else None, release=release, model_digest=r.model_digest,
        started_at=_when(r.started_at) or run_started,
        triage_class=_text(triage.get("class")), triage_evidence=_text(triage.get("evidence")))


def bound_kind(r: CaseResult) -> str:
    kind = (r.bound_source or {}).get("kind")
    if isinstance(kind, str) and kind:
        return kind
    return "exact" if r.golden_kind == "exact" else "hand-set"


def bucket_rows(run: str, r: CaseResult) -> list[BucketRow]:
    by_bucket: dict[int, list[float | None]] = {}
    bounds: dict[int, float | None] = {}
    for p in r.prompts:
        by_bucket.setdefault(p.bucket, []).append(p.max_probability_error)
        bounds.setdefault(p.bucket, p.bound)
    rows = []
    for bucket, errors in sorted(by_bucket.items()):
        bound = _finite(r.bucket_bounds.get(str(bucket), bounds[bucket])) if r.golden_kind != "exact" else None
        largest = None if any(_finite(e) is None for e in errors) else max(float(e) for e in errors if e is not None)
        rows.append(BucketRow(
            run=run, case=r.case, bucket=bucket, prompts=len(errors), max_error=largest, mean_error=_mean(errors),
            bound=bound, headroom=bound - largest if bound is not None and largest is not None else None,
            ratio=largest / bound if bound and largest is not None else None))
    return rows


def _drift_error(drift: Mapping[str, Any] | None) -> dict[str, float | None]:
    """The drift test's error statistic: the run's mean error and the upper end of its interval."""
    for s in (drift or {}).get("statistics") or []:
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


def _mean(values: Sequence[float | None]) -> float | None:
    finite = [v for v in map(_finite, values) if v is not None]
    return statistics.fmean(finite) if finite and len(finite) == len(values) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else (None if value is None else str(value))
