"""Run directories written by hand for the history's tests: what a gate run and a control write (a manifest,
result.json, one CaseResult.to_dict() per case), with chosen errors per bucket, releases, baselines and times,
without a kernel."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Mapping

from kit.core.records import rundir
from kit.core.records.jsonio import write_json
from kit.core.records.records import CaseResult, DecodeScore, PromptScore, Status
from kit.core.records.results import gate_verdict

BOUNDS = {"128": 0.02, "256": 0.03}
STEP_BOUNDS = {"1": 0.02, "2": 0.01, "3": 0.006}  # a decode case's record's bounds for its three steps
RECORD, GOLDEN = "r" * 64, "g" * 64
START = _dt.datetime(2026, 11, 1, 12, 0, tzinfo=_dt.timezone.utc)


def prompt(pid: str, bucket: int, err: float, bound: float | None) -> PromptScore:
    return PromptScore(id=pid, bucket=bucket, n_tokens=100, passed=bound is None or err <= bound, bound=bound,
                       max_probability_error=err, top_probability_l1_error=err, kl_shared=0.0,
                       first_rank_agreement=True, golden_top_token=5, golden_top_probability=0.6,
                       backend_top_token=5, backend_top_probability=0.6 - err, winner_gap=0.0,
                       top_probability_shift=-err)


def case_result(case: str, errors: Mapping[int, list[float]], *, record: str | None = RECORD,
                golden: str = GOLDEN, started: _dt.datetime = START, status: str | None = None,
                triage: dict | None = None, decode: Mapping[str, list[float]] | None = None) -> dict:
    """A calibrated semantic case's result (its JSON) with ``errors`` per bucket under BOUNDS; ``decode``: the
    step errors of each prompt's continuation (by prompt id, ``<case>-<bucket>-<i>``), under STEP_BOUNDS."""
    prompts = [prompt(f"{case}-{bucket}-{i}", bucket, e, BOUNDS[str(bucket)])
               for bucket, errs in errors.items() for i, e in enumerate(errs)]
    buckets = {p.id: p.bucket for p in prompts}
    steps = [DecodeScore(pid, buckets[pid], len(errs), len(errs), True, max(errs), step_errors=list(errs))
             for pid, errs in (decode or {}).items()]
    failed = [p for p in prompts if not p.passed]
    source = {"kind": "calibrated", "record": record, "rule": "spread-x3",
              **({"step_bounds": dict(STEP_BOUNDS)} if decode else {})} if record else {"kind": "hand-set"}
    result = CaseResult(
        case=case, backend="hf", status=status or ("failed" if failed else Status.PASSED), golden_kind="semantic",
        bucket_bounds=dict(BOUNDS), bound_source=source, golden_sha256=golden, model_digest="m" * 64,
        started_at=started.isoformat(), prompts=prompts, decode=steps,
        failures=[f"{p.id}: error {p.max_probability_error} > bound {p.bound}" for p in failed],
        drift={"calibration": record, "alpha": 0.001, "prompts": len(prompts), "passed": True, "p_value": 0.5,
               "failures": [], "statistics": [{"test": "error", "value": 0.004, "low": 0.003, "high": 0.0045,
                                               "reference": 0.0039, "samples": 6, "p_value": 0.5}]}
        if record else None)
    doc = result.to_dict()
    if triage is not None:
        doc["triage"] = triage
    return doc


def gate_run(root: Path, folder: str, cases: Mapping[str, dict], *, name: str = "tiny-cpu",
             release: str | None = None, started: _dt.datetime = START, verdict: str | None = None,
             listed: list[str] | None = None) -> Path:
    """A gate run directory under ``root`` with these case results (each a JSON document); ``verdict`` overrides
    what result.json says (else the verdict of the case files)."""
    run = root / folder
    expected = listed if listed is not None else list(cases)
    write_json(run / rundir.MANIFEST, {
        "name": name, "cases": expected, "descriptor_sha256": "d" * 64, "kit_version": "0.1.0",
        "release": {"name": release} if release else None, "started_at": started.isoformat()})
    for case, doc in cases.items():
        write_json(run / rundir.CASES / f"{case}.json", doc)
    statuses = {c: CaseResult.from_dict(d) for c, d in cases.items()}
    write_json(run / rundir.RESULT, {"name": name, "verdict": verdict or gate_verdict(expected, statuses),
                                     "cases": dict(cases)})
    return run


def series(root: Path, errors: list[float], *, case: str = "hf-bf16", releases: list[str | None] | None = None,
           records: list[str] | None = None) -> list[Path]:
    """One gate run per entry of ``errors``, an hour apart, bucket 128 at that largest error (and half of it),
    bucket 256 steady; ``releases`` and ``records`` per run where given."""
    runs = []
    for i, err in enumerate(errors):
        at = START + _dt.timedelta(hours=i)
        doc = case_result(case, {128: [err, err / 2], 256: [0.01, 0.005]}, started=at,
                          record=records[i] if records else RECORD)
        runs.append(gate_run(root, f"tiny-cpu-{at:%Y%m%d-%H%M%S}-{i:04x}", {case: doc},
                             release=releases[i] if releases else None, started=at))
    return runs


def decode_series(root: Path, step_3: list[float], *, case: str = "hf-bf16-decode") -> list[Path]:
    """One gate run of a decode case per entry of ``step_3``, an hour apart: every first token steady, bucket 128's
    first prompt continued three steps, its third at that error (under STEP_BOUNDS' 0.006), the others steady."""
    runs = []
    for i, err in enumerate(step_3):
        at = START + _dt.timedelta(hours=i)
        doc = case_result(case, {128: [0.01, 0.005], 256: [0.01]}, started=at,
                          decode={f"{case}-128-0": [0.004, 0.003, err], f"{case}-128-1": [0.002, 0.002, 0.001]})
        runs.append(gate_run(root, f"tiny-cpu-{at:%Y%m%d-%H%M%S}-{i:04x}", {case: doc}, started=at))
    return runs


def control(root: Path, folder: str, current: Mapping[str, dict], candidate: Mapping[str, dict]) -> Path:
    """A control directory with its two runs, as `parity-kit control` names them."""
    ctrl = root / folder
    gate_run(ctrl, "pin", current, release="pin")
    gate_run(ctrl, "next", candidate, release="next", started=START + _dt.timedelta(minutes=5))
    write_json(ctrl / rundir.CONTROL, {"name": "tiny-cpu", "current": "pin", "candidate": "next",
                                       "runs": {"pin": "pin", "next": "next"}})
    return ctrl
