"""Run directories and calibration records built by hand, for the backtest's unit tests: what a gate run and a
control would have written (real CaseResult.to_dict() output, scored by kit.core.verdict.scoring, drift-tested by
kit.core.noise.drift against the record that judged it), without a kernel."""

from __future__ import annotations

import math
from pathlib import Path

from kit.core.records import rundir
from kit.core.noise.calibration import CalibrationRecord, Sample, measured_on
from kit.core.noise.drift import drift_test
from kit.core.records.jsonio import write_json
from kit.core.records.records import CaseResult, DriftOff, Observation, Status
from kit.core.verdict.scoring import bound_for, score_prompt

CASE = "hf-bf16"
FIXTURE, GOLDEN, MODEL, FAULTY = "f" * 64, "g" * 64, "m" * 64, "b" * 64
HERE, ELSEWHERE = "NVIDIA H200", "NVIDIA A100"  # classes of hardware, as accelerator() names them
BUCKETS = {"a": 128, "b": 128, "c": 256}
GOLDEN_TOP = ((1, math.log(0.6)), (2, math.log(0.3)), (3, math.log(0.1)))


def sample(variant: str, errors: dict[str, float]) -> Sample:
    """A clean sample whose shift is minus its error on every prompt (as ``observed`` gives it)."""
    return Sample(variant, 1, 1, dict(errors), {p: -e for p, e in errors.items()})


def record(errors: list[dict[str, float]], hardware: str | None = HERE, golden: str = GOLDEN) -> CalibrationRecord:
    """A record measured from one clean sample per entry of ``errors`` on ``hardware``."""
    samples = [sample(f"v{i}", e) for i, e in enumerate(errors)]
    runtime = {"accelerator": {"name": hardware, "driver": ""}} if hardware else {}
    return CalibrationRecord.measured(
        buckets=BUCKETS, case=CASE, backend="hf", noise_class={"device": "cuda", "dtype": "bfloat16"},
        inputs={"fixture_sha256": FIXTURE, "golden_sha256": golden, "model_digest": MODEL},
        options={"dtype": "bfloat16", "device": "cuda"}, fingerprint={"runtime": runtime}, command=["parity-kit"],
        variants=[{"name": s.variant} for s in samples], samples=samples, created_at="2026-12-01T00:00:00Z")


def observed(prompt_id: str, error: float, missing: bool = False) -> Observation:
    """The backend's top-3 with its winner ``error`` below the golden's and the runner-up ``error`` above (its max
    probability error is ``error``, its shift ``-error``); ``missing``: the golden's third token left out."""
    third = (4, math.log(0.05)) if missing else (3, math.log(0.1))
    return Observation(prompt_id, ((1, math.log(0.6 - error)), (2, math.log(0.3 + error)), third), 100)


def case_result(errors: dict[str, float], judge: CalibrationRecord, *, ran_on: str = HERE, golden: str = GOLDEN,
                model: str = MODEL, missing: tuple[str, ...] = ()) -> CaseResult:
    """What the kernel writes for a calibrated case judged by ``judge`` on hardware ``ran_on``: scored under its
    bounds, drift-tested where it measured this class of hardware (else left out and the GPU named)."""
    scores = [score_prompt(p, BUCKETS[p], GOLDEN_TOP, observed(p, e, p in missing),
                           bound_for(BUCKETS[p], None, judge.bounds)) for p, e in errors.items()]
    failures = [f for s in scores for f in s.failures]
    reference = judge.reference()
    same = measured_on(reference) == ran_on
    drift = drift_test(scores, reference) if same else None
    failures += drift.failures if drift else []
    return CaseResult(
        case=CASE, backend="hf", status=Status.FAILED if failures else Status.PASSED, golden_kind="semantic",
        bucket_bounds=dict(judge.bounds), bound_source={
            "kind": "calibrated", "record": judge.sha256, "rule": judge.rule["name"], "noise": judge.noise,
            "measured_on": judge.fingerprint.get("runtime", {})},
        drift=drift.to_dict() if drift else None,
        drift_skipped=None if same else f"calibration measured on other hardware, {measured_on(reference)}",
        drift_off=None if same else DriftOff.OTHER_HARDWARE,
        fixture_sha256=FIXTURE, golden_sha256=golden, model_digest=model, prompts=scores, failures=failures,
        devices=[{"index": 0, "uuid": "GPU-0", "name": ran_on}])


def write_run(run_dir: Path, result: CaseResult, model_faults: dict | None = None, **manifest) -> Path:
    """A gate run directory of one case: its manifest, its case result and its result.json."""
    doc = {"name": "test", "cases": [result.case], "kit_version": "0", "model": "/nowhere/model",
           "model_digest": MODEL, **manifest}
    if model_faults is not None:
        doc["model_faults"] = model_faults
    write_json(run_dir / rundir.MANIFEST, doc)
    write_json(run_dir / rundir.CASES / f"{result.case}.json", result.to_dict())
    write_json(run_dir / rundir.RESULT, {"name": "test", "verdict": result.status,
                                         "cases": {result.case: result.to_dict()}, "missing": []})
    return run_dir


def write_control(control_dir: Path, current: CaseResult, candidate: CaseResult, verdict: str) -> Path:
    """A control directory: both runs, its record and its diagnosis' verdict."""
    write_run(control_dir / "current", current)
    write_run(control_dir / "candidate", candidate)
    write_json(control_dir / rundir.CONTROL, {"kind": "control", "name": "test", "current": "current",
                                              "candidate": "candidate",
                                              "runs": {"current": "current", "candidate": "candidate"}})
    write_json(control_dir / rundir.DIAGNOSIS, {"verdict": verdict, "reason": "", "current": "current",
                                                "candidate": "candidate", "rows": []})
    return control_dir


FAULT = {"format": "parity-kit-fault/1", "fault": "rope_base", "magnitude": 0.05, "unit": "relative change",
         "source_model_digest": MODEL, "source_fault": None}
