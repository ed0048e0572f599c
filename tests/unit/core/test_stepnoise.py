"""A decode case's calibration record: per decode step, bounds derived from every sample's per-step errors by the
first token's rule, re-derived on load (a per-step bound is never taken on its word), and the decode check judged
by them; records without a decode section keep their format and bytes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kit.core.noise.calibration import FORMAT, FORMAT_DECODE, CalibrationRecord, Sample, load_record, rederived
from kit.core.verdict.decode import compare_continuation
from kit.core.errors import BadInput
from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes
from kit.core.records.records import Continuation
from kit.core.noise.stepnoise import steps_uncovered

pytestmark = pytest.mark.unit

BUCKETS = {"a": 128, "b": 128}
# The decode path of "batched" is as-set's (hf decodes one prompt at a time): its steps count once. Prompt b's
# as-set continuation left the golden's at step 2 (inside a near-tie), so it has no error at step 3 there.
SAMPLES = [Sample("as-set", 1, 1, {"a": 0.004, "b": 0.008}, {"a": -0.002, "b": -0.004},
                  {"a": [0.004, 0.010, 0.020], "b": [0.008, 0.012]}),
           Sample("batched", 1, 1, {"a": 0.006, "b": 0.007}, {"a": -0.003, "b": -0.003},
                  {"a": [0.004, 0.010, 0.020], "b": [0.008, 0.012]}),
           Sample("math", 1, 1, {"a": 0.005, "b": 0.009}, {"a": -0.001, "b": -0.004},
                  {"a": [0.005, 0.014, 0.018], "b": [0.009, 0.011, 0.015]})]


def record(samples=SAMPLES, steps=3) -> CalibrationRecord:
    return CalibrationRecord.measured(
        buckets=BUCKETS, decode_steps=steps, case="hf-bf16-decode", backend="hf",
        noise_class={"device": "cpu", "dtype": "bfloat16"},
        inputs={"fixture_sha256": "f" * 64, "golden_sha256": "e" * 64, "model_digest": "d" * 64},
        options={"dtype": "bfloat16"}, fingerprint={"runtime": {"hardware": "cpu"}}, command=["parity-kit"],
        variants=[{"name": s.variant} for s in samples], samples=samples, created_at="2026-12-03T00:00:00Z")


def written(doc: dict, folder: Path) -> Path:
    data = canonical_bytes(doc)
    return atomic_write_bytes(folder / f"{sha256_bytes(data)}.json", data)


def refusal(path: Path) -> str:
    with pytest.raises(BadInput) as e:
        load_record(path)
    return str(e.value)


def test_each_step_is_bounded_by_the_rule_from_the_distinct_continuations():
    r = record()
    # Two distinct continuations (batched repeats as-set's): every spread is widened by d2(10)/d2(2) = 2.7287.
    assert r.decode["steps"] == 3 and r.decode["distinct_samples"] == 2
    per_step = r.decode["per_step"]
    assert {n: s["prompts"] for n, s in per_step.items()} == {"1": 2, "2": 2, "3": 2}
    assert [per_step[n]["largest"] for n in "123"] == [0.009, 0.014, 0.020]
    assert [per_step[n]["spread"] for n in "123"] == pytest.approx([0.001, 0.004, 0.002])
    # step 1: 0.009 + 0.001 x 2.7287 = 0.01173 -> 0.012; step 2: 0.014 + 0.0109 -> 0.025;
    # step 3: prompt b reached it in one continuation only (range 0): 0.020 + 0.002 x 2.7287 -> 0.026.
    assert [per_step[n]["bound"] for n in "123"] == [0.012, 0.025, 0.026]
    ref = r.reference()
    assert ref["step_bounds"] == {"1": 0.012, "2": 0.025, "3": 0.026} and ref["decode_steps"] == 3
    # The first token's figures are those of a record without steps (the drift samples too).
    assert r.buckets["128"]["largest"] == 0.009 and r.drift["distinct_samples"] == 3


def test_a_decode_record_is_format_2_and_loads_rederived(tmp_path):
    r = record()
    assert r.to_dict()["format"] == FORMAT_DECODE
    loaded = load_record(written(r.to_dict(), tmp_path))
    assert loaded.decode == r.decode and rederived(loaded).decode == r.decode
    assert loaded.samples[0].steps == {"a": [0.004, 0.010, 0.020], "b": [0.008, 0.012]}


def test_a_record_without_steps_keeps_format_1_and_its_keys():
    plain = [Sample(s.variant, s.launch, s.repeat, s.errors, s.shifts) for s in SAMPLES]
    doc = record(plain, steps=0).to_dict()
    assert doc["format"] == FORMAT and "decode" not in doc and all("steps" not in s for s in doc["samples"])
    assert "step_bounds" not in record(plain, steps=0).reference()


def test_a_tampered_step_bound_is_refused_in_one_line(tmp_path):
    doc = record().to_dict()
    doc["decode"]["per_step"]["2"]["bound"] = 0.5
    path = written(doc, tmp_path)
    assert refusal(path) == (f"{path}: decode.per_step.2.bound is 0.5, rule largest-plus-margin/3 gives 0.025 from "
                             "its 3 samples: the record's figures are not its samples'; calibrate again instead of "
                             "editing it")


def test_a_tampered_step_error_is_refused_by_the_bound_it_no_longer_gives(tmp_path):
    doc = record().to_dict()
    # The step-2 error that set the largest, made small: the record states a bound its samples no longer give
    # (prompt a's range is now 0.009; b's 0.012 the largest: 0.012 + 0.009 x 2.7287 -> 0.037).
    doc["samples"][2]["steps"]["a"][1] = 0.001
    path = written(doc, tmp_path)
    assert refusal(path) == (f"{path}: decode.per_step.2.bound is 0.025, rule largest-plus-margin/3 gives 0.037 from "
                             "its 3 samples: the record's figures are not its samples'; calibrate again instead of "
                             "editing it")


def test_malformed_decode_sections_are_refused_by_key(tmp_path):
    doc = record().to_dict()
    del doc["samples"][1]["steps"]
    assert refusal(written(doc, tmp_path)).endswith(
        "malformed calibration record: samples[1].steps: missing (a record with a decode section keeps every "
        "sample's steps)")
    doc = record().to_dict()
    doc["decode"]["per_step"]["9"] = doc["decode"]["per_step"]["1"]
    assert refusal(written(doc, tmp_path)).endswith(
        "malformed calibration record: decode.per_step.9: expected a decode step from 1 to 3 as its name")
    doc = record().to_dict()
    doc["format"] = FORMAT  # a format-1 record holds no decode section
    assert "malformed calibration record: decode: unknown key" in refusal(written(doc, tmp_path))
    doc = record().to_dict()
    doc["samples"][0]["steps"]["a"] = []
    assert refusal(written(doc, tmp_path)).endswith(
        "malformed calibration record: samples[0].steps.a: expected a list of at least one step's error, got []")


def test_one_distinct_continuation_is_too_few_for_step_bounds(tmp_path):
    same = [Sample(s.variant, 1, 1, s.errors, s.shifts, SAMPLES[0].steps) for s in SAMPLES]
    path = written(record(same).to_dict(), tmp_path)
    assert refusal(path) == (f"{path}: 1 distinct continuation(s) of 3 samples, the rule needs at least 2 for decode "
                             "steps' bounds: calibrate with more variants of the decode path")


def test_a_decode_case_needs_a_record_that_measured_its_steps():
    assert steps_uncovered(record().reference(), 3) is None
    assert steps_uncovered(record().reference(), 0) is None
    assert steps_uncovered(record().reference(), 4) == (
        "it has no bound for decode step 4 (it measured steps 1, 2, 3), this case continues every prompt 4 steps")
    plain = record([Sample(s.variant, s.launch, s.repeat, s.errors, s.shifts) for s in SAMPLES], steps=0)
    assert steps_uncovered(plain.reference(), 8) == (
        "it measured no decode steps, this case continues every prompt 8 steps (a first token's bound is not a "
        "decode step's: calibrate the case again)")


L = math.log


def step(*pairs):
    return pairs[0][0], tuple((t, L(p)) for t, p in pairs)


GOLDEN = (step((5, 0.6), (7, 0.3), (9, 0.1)), step((7, 0.5), (5, 0.4), (9, 0.1)), step((9, 0.9), (5, 0.06), (7, 0.04)))


def test_each_decode_step_is_judged_by_its_own_bound():
    # Errors 0.01 at step 1, 0.02 at step 2, 0.03 at step 3.
    got = Continuation("p", (step((5, 0.61), (7, 0.29), (9, 0.1)), step((7, 0.52), (5, 0.38), (9, 0.1)),
                             step((9, 0.87), (5, 0.09), (7, 0.04))))
    d = compare_continuation("p", 128, 40, GOLDEN, got, 0.075, {"1": 0.012, "2": 0.025, "3": 0.026})
    assert d.failures == ["p: decode step 3: max probability error 0.03 > bound 0.026 (bucket 128)"]
    assert d.step_errors == pytest.approx([0.01, 0.02, 0.03])
    # A step the record has no bound for falls back on the bucket's (a record always covers the case's steps).
    assert compare_continuation("p", 128, 40, GOLDEN, got, 0.015, {"1": 0.012}).failures == [
        "p: decode step 2: max probability error 0.02 > bound 0.015 (bucket 128)",
        "p: decode step 3: max probability error 0.03 > bound 0.015 (bucket 128)"]


DECODE_CASES = ("hf-bf16-decode", "vllm-pp1-decode")


def test_the_embedded_decode_cases_resolve_to_calibrated_step_bounds(embedded):
    from kit.descriptor.load import load_descriptor

    specs = {s.name: s for s in load_descriptor(embedded.descriptor).case_specs(list(DECODE_CASES))}
    for name in DECODE_CASES:
        spec = specs[name]
        cal = spec.calibration
        assert spec.decode == 8 and spec.bound is None and cal is not None, name
        assert cal["decode_steps"] == 8 and sorted(cal["step_bounds"], key=int) == [str(n) for n in range(1, 9)]
        assert "hardware" in cal["accept"]  # an AVX2 host uses the AVX-512 record's bounds, without its drift test
        assert set(spec.bucket_bounds) == {"128"}
        # Every step's measured bound is tighter than the one hand-set bound the decode case had (0.075).
        assert max(cal["step_bounds"].values()) < 0.075, (name, cal["step_bounds"])
