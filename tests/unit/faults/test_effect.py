"""A faulted copy is judged as the case's own model run by a faulty engine, and a failure names its test."""

from __future__ import annotations

import dataclasses

from kit.core.model.modeldigest import model_digest
from kit.core.records.records import CaseResult, Status
from kit.core.model.faultcopy import on_model
from kit.faults.cache import faulted_copy
from kit.faults.catalogue import fault
from kit.faults.effect import embedded_cases, failed_by


def test_a_faulted_copy_keeps_the_cases_calibration_under_its_own_digest(embedded, tmp_path):
    cases = embedded_cases()
    spec = cases.cases["hf-bf16"]
    folder = faulted_copy(fault("logit_scale"), 0.05, embedded.model, tmp_path)
    moved = on_model(spec, folder)
    assert moved.model_path == str(folder) and moved.model_digest == model_digest(folder) != spec.model_digest
    changed = [f.name for f in dataclasses.fields(spec) if getattr(spec, f.name) != getattr(moved, f.name)]
    if spec.calibration is None:
        assert changed == ["model_path", "model_digest"]
    else:
        assert changed == ["model_path", "model_digest", "calibration"]
        assert moved.calibration == {**spec.calibration,
                                     "inputs": {**spec.calibration["inputs"], "model_digest": moved.model_digest}}
    # The effect case is the checkpoint case scored against the semantic golden, with no bound; on a CPU in float64
    # rounded to float32, so that an effect is one number on every host.
    assert cases.float32.options["dtype"] == "float64" and cases.float32.golden_kind == "semantic"
    assert cases.float32.bound is None and cases.float32.golden_path == spec.golden_path


def _failed(*lines: str) -> CaseResult:
    return CaseResult(case="hf-bf16", backend="hf", status=Status.FAILED, golden_kind="semantic", golden_path="g",
                      bound=0.075, failures=list(lines))


def test_failed_by_names_each_test_once_in_order():
    result = _failed("a-00: max probability error 0.09 > bound 0.075 (bucket 128)",
                     "a-01: winner changed outside a near-tie: golden top token 5 leads backend greedy token 7 by 0.3",
                     "a-02: max probability error 0.08 > bound 0.075 (bucket 128)",
                     "a-03: golden token 9 is missing from the backend's top-64",
                     "drift: the mean top probability moved up by 0.004; p = 1e-05 from 6 clean samples")
    assert failed_by(result) == ("bound", "winner", "missing", "drift")
    assert failed_by(_failed()) == ()
