"""What `baseline deepen` takes and leaves: further launches numbered after the record's, every clean variant in
each; a control run of the pin is a sample only when it passed on its own class's bounds with its drift test, on the
record's runtime, release, inputs and the case's settings, covering every prompt; a release is compared by the
engine's versions only."""

from __future__ import annotations

import dataclasses

import pytest

from kit.baselines.deepen import _not_a_sample, further_variants, release_change
from kit.calibrate.run import variants_for
from kit.core.noise.calibration import load_record
from kit.core.records.records import BoundKind, DriftOff, Status
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from support.archive import case_result, record

pytestmark = pytest.mark.unit

CLEAN = [{"a": 0.010, "b": 0.012, "c": 0.020}, {"a": 0.011, "b": 0.010, "c": 0.024},
         {"a": 0.013, "b": 0.011, "c": 0.021}]
OPTIONS = {"dtype": "bfloat16", "device": "cuda"}


def test_further_launches_are_numbered_after_the_records_each_round_a_launch_of_every_variant(embedded):
    plan = resolve(load_descriptor(embedded.descriptor), ["hf-bf16"], resolve_calibration=False)
    spec = plan.case("hf-bf16").spec
    held = load_record((embedded.descriptor.parent / embedded.doc["cases"]["hf-bf16"]["calibration"][0]).resolve())
    last = max(s.launch for s in held.samples)
    base = [v["name"] for v in variants_for(spec) if int(v.get("launch") or 1) == 1]
    further = further_variants(spec, held, 2)
    assert [(v["name"], v["launch"]) for v in further] == [(n, launch) for launch in (last + 1, last + 2)
                                                             for n in base]
    assert all("deepening the record" in v["why"] for v in further)
    assert further_variants(spec, held, 0) == []


def test_a_passed_run_on_the_records_own_class_and_runtime_is_a_sample():
    judge = record(CLEAN)
    result = case_result({"a": 0.012, "b": 0.011, "c": 0.022}, judge)
    assert result.drift is not None and result.status == "passed"
    assert _not_a_sample(judge, OPTIONS, dataclasses.replace(result, options=OPTIONS)) is None


@pytest.mark.parametrize("change,why", [
    ({"status": Status.FAILED}, "the case failed"),
    ({"bound_source": {"kind": "hand-set"}}, "the case was judged on hand-set bounds, not a calibration record"),
    ({"drift": None, "drift_skipped": "calibration measured on other hardware, NVIDIA A100",
      "drift_off": DriftOff.OTHER_HARDWARE},
     "the case ran no drift test (calibration measured on other hardware, NVIDIA A100): its bounds were not its own "
     "class's"),
    ({"release": {"torch": "2.12"}}, "another release of the engine (torch '2.12')"),
    ({"options": {**OPTIONS, "batch_size": 2}}, "the case was set otherwise (batch_size)"),
    ({"golden_sha256": "e" * 64}, "other inputs (fixture, golden or model) than the record's"),
])
def test_a_run_that_is_no_clean_sample_of_the_record_says_why(change, why):
    judge = dataclasses.replace(record(CLEAN), fingerprint={"runtime": record(CLEAN).fingerprint["runtime"],
                                                            "release": {"torch": "2.11", "device": "cuda"}})
    result = dataclasses.replace(case_result({"a": 0.012, "b": 0.011, "c": 0.022}, record(CLEAN)), options=OPTIONS,
                                 release={"torch": "2.11", "device": "cuda"})
    assert _not_a_sample(judge, OPTIONS, result) is None
    assert _not_a_sample(judge, OPTIONS, dataclasses.replace(result, **change)) == why


def test_a_run_judged_under_a_record_of_another_runtime_or_missing_a_prompt_is_no_sample():
    judge = record(CLEAN)
    other = record(CLEAN, hardware="NVIDIA A100")
    elsewhere = dataclasses.replace(case_result({"a": 0.012, "b": 0.011, "c": 0.022}, other, ran_on="NVIDIA A100"),
                                    options=OPTIONS)
    assert _not_a_sample(judge, OPTIONS, elsewhere) == "judged under a record of another runtime (NVIDIA A100)"
    partial = dataclasses.replace(case_result({"a": 0.012, "b": 0.011}, judge), options=OPTIONS)
    assert _not_a_sample(judge, OPTIONS, partial) == "no error and shift for 1 of the record's prompts, first c"
    assert BoundKind.CALIBRATED is partial.bound_kind


def test_a_release_is_compared_by_the_engines_versions_not_by_settings_or_keys_one_side_lacks():
    recorded = {"torch": "2.11", "transformers": "5.17", "attention": "auto"}
    assert release_change(recorded, {**recorded, "attention": "chunked"}, {"attention": "auto"}) is None
    assert release_change(recorded, {**recorded, "cpu_capability": "AVX512"}, {}) is None
    assert release_change(recorded, {**recorded, "transformers": "5.18"}, {}) == "transformers"


def test_a_record_whose_launches_repeat_bit_for_bit_is_as_deep_as_its_variants_and_never_called_thin(tmp_path):
    from kit.calibrate.run import write_record
    from kit.core.noise.calibration import depth_of, launches_repeat
    from support.archive import sample

    varying = record(CLEAN)  # three variants of one launch each: nothing says whether launches repeat
    repeated = dataclasses.replace(varying, samples=[*varying.samples,
                                                     dataclasses.replace(varying.samples[0], launch=2)])
    other = dataclasses.replace(sample("v0", {"a": 0.02, "b": 0.01, "c": 0.02}), launch=2)
    launched = dataclasses.replace(varying, samples=[*varying.samples, other])
    assert (launches_repeat(varying), launches_repeat(repeated), launches_repeat(launched)) == (False, True, False)
    for rec, thin in ((varying, True), (repeated, False)):
        path = write_record(rec, tmp_path / f"{thin}")
        result = case_result({"a": 0.012, "b": 0.011, "c": 0.022}, rec)
        result = dataclasses.replace(result, bound_source={**result.bound_source, "path": str(path)})
        depth = depth_of(result)
        assert depth is not None and depth.samples == 3 and depth.repeats is (not thin)
        assert (depth.thin("hf-bf16", "d.toml") is not None) is thin
    # A record file no longer there: the depth by its count alone.
    gone = dataclasses.replace(result, bound_source={**result.bound_source, "path": str(tmp_path / "gone.json")})
    assert depth_of(gone).repeats is False
