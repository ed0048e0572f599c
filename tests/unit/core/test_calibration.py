"""The calibration rule, the record's name and contents, and what it refuses to calibrate."""

from __future__ import annotations

import math

import pytest

from kit.core.noise.calibration import CalibrationRecord, Sample, load_record, mismatch
from kit.core.noise.rule import bound_rule, d2, round_up, spread_factor
from kit.core.errors import BadInput
from kit.core.records.jsonio import atomic_write_bytes as write_bytes

pytestmark = pytest.mark.unit

BUCKETS = {"a": 128, "b": 128, "c": 256}


def sample(variant: str, errors: dict[str, float], shifts: dict[str, float] | None = None, launch: int = 1) -> Sample:
    return Sample(variant, launch, 1, errors, shifts or {p: -e / 2 for p, e in errors.items()})


def record(samples: list[Sample], **kw) -> CalibrationRecord:
    base = dict(case="hf-bf16", backend="hf", noise_class={"device": "cpu", "dtype": "bfloat16"},
                inputs={"fixture_sha256": "f" * 64, "golden_sha256": "g" * 64, "model_digest": "m" * 64},
                options={"dtype": "bfloat16"}, fingerprint={"runtime": {"hardware": "cpu"}}, command=["parity-kit"],
                variants=[{"name": s.variant} for s in samples], samples=samples, created_at="2026-12-01T00:00:00Z")
    return CalibrationRecord.measured(buckets=BUCKETS, **{**base, **kw})


def saved(r: CalibrationRecord, folder, name: str | None = None):
    """The record's canonical bytes under ``name`` (default: its SHA-256, as calibrate names it)."""
    path = folder / (name or f"{r.sha256}.json")
    write_bytes(path, r.canonical())
    return path


SAMPLES = [sample("as-set", {"a": 0.004, "b": 0.008, "c": 0.010}),
           sample("batched", {"a": 0.006, "b": 0.007, "c": 0.011}),
           sample("math", {"a": 0.005, "b": 0.009, "c": 0.009}),
           sample("as-set", {"a": 0.004, "b": 0.008, "c": 0.010}, launch=2)]  # a deterministic repeat


def test_round_up_keeps_two_significant_digits_and_only_rounds_up():
    assert round_up(0.01234) == 0.013
    assert round_up(0.013) == 0.013
    assert round_up(0.0980001) == 0.099
    assert round_up(0.125) == 0.13


def test_spread_counts_as_if_ten_samples_were_taken():
    assert spread_factor(10) == spread_factor(40) == 1.0
    assert spread_factor(3) == pytest.approx(d2(10) / (3 / math.sqrt(math.pi)), rel=1e-14)  # d2(3) = 3 / sqrt(pi)
    assert spread_factor(2) > spread_factor(5) > spread_factor(9) > 1.0


def test_bound_rule_is_largest_plus_the_larger_margin():
    # Spread term: 0.010 + 0.002 x d2(10)/d2(3) = 0.01364 -> 0.014.
    assert bound_rule(0.010, 0.002, 3) == 0.014
    # No spread (bit-identical samples): a tenth of the largest error.
    assert bound_rule(0.010, 0.0, 3) == 0.011
    # Never above 1: a probability error cannot exceed it.
    assert bound_rule(0.9, 0.3, 3) == 1.0


def test_a_record_derives_bounds_per_bucket_from_distinct_samples():
    r = record(SAMPLES)
    assert r.drift["distinct_samples"] == 3  # the repeat of as-set is bit-identical: one measurement
    assert r.buckets["128"]["largest"] == 0.009
    assert r.buckets["128"]["spread"] == pytest.approx(0.002)  # a: 0.004..0.006, b: 0.007..0.009
    assert r.bounds == {"128": bound_rule(0.009, 0.002, 3), "256": bound_rule(0.011, 0.002, 3)}
    assert r.prompts["c"] == {"bucket": 256, "largest": 0.011, "smallest": 0.009,
                              "shift_low": -0.0055, "shift_high": -0.0045}
    assert len(r.reference()["drift"]["samples"]) == 3


def test_a_record_is_named_by_its_sha256_and_a_changed_one_is_refused(tmp_path):
    r = record(SAMPLES)
    loaded = load_record(saved(r, tmp_path))
    assert loaded.bounds == r.bounds and loaded.sha256 == r.sha256
    tampered = saved(r, tmp_path, f"{r.sha256[:-1]}0.json")
    with pytest.raises(BadInput) as e:
        load_record(tampered)
    assert str(e.value) == (f"{tampered}: name is not the record's SHA-256 ({r.sha256}): the record was changed "
                            "after it was made; calibrate again instead of editing it")


def test_too_few_distinct_samples_are_refused(tmp_path):
    r = record([SAMPLES[0], SAMPLES[3]])  # two samples, bit-identical: no spread at all
    path = saved(r, tmp_path)
    with pytest.raises(BadInput) as e:
        load_record(path)
    assert str(e.value) == (f"{path}: 1 distinct sample(s) of 2, the rule needs at least 2: "
                            "calibrate with more variants")


def fits(r: CalibrationRecord, **kw) -> str | None:
    base = dict(backend="hf", fixture_sha256="f" * 64, golden_sha256="g" * 64, model_digest="m" * 64,
                noise_class={"device": "cpu", "dtype": "bfloat16"}, prompts=dict(BUCKETS))
    return mismatch(r.reference(), **{**base, **kw})


def test_a_record_fits_only_the_inputs_it_measured():
    r = record(SAMPLES)
    assert fits(r) is None
    assert fits(r, golden_sha256="h" * 64) == f"it was made for golden {'g' * 12}, this case uses {'h' * 12}"
    assert fits(r, fixture_sha256="e" * 64) == f"it was made for fixture {'f' * 12}, this case uses {'e' * 12}"
    assert fits(r, model_digest="n" * 64) == f"it was made for model {'m' * 12}, this case uses {'n' * 12}"
    assert fits(r, backend="vllm") == "it measured backend hf, this case runs vllm"
    assert fits(r, prompts={"a": 128, "z": 128}) == "it has no samples of 1 prompt(s) this case scores, first z"


def test_another_noise_class_is_refused_unless_accepted():
    r = record(SAMPLES)
    other = {"device": "cpu", "dtype": "float16"}
    assert fits(r, noise_class=other) == ("it measured noise on dtype 'bfloat16', this case runs on 'float16' "
                                          "(set accept_noise_changes = [\"dtype\"] to use it anyway)")
    assert fits(r, noise_class=other, accept=["dtype"]) is None


def test_each_variant_is_tested_for_drift_against_the_others():
    base = {"a": 0.004, "b": 0.008, "c": 0.010}
    near = [sample(f"v{i}", {p: e * (1 + 0.01 * i) for p, e in base.items()}) for i in range(4)]
    assert [x["passed"] for x in record(near).drift["leave_one_out"]] == [True] * 4
    # A variant twice as noisy as the rest: a healthy release like it would fail the gate.
    loud = near + [sample("loud", {p: 2 * e for p, e in base.items()})]
    verdicts = {x["variant"]: x["passed"] for x in record(loud).drift["leave_one_out"]}
    assert verdicts == {"v0": True, "v1": True, "v2": True, "v3": True, "loud": False}


def on(hardware: str) -> dict:
    return {"runtime": {"hardware": hardware, "accelerator": {"name": hardware, "driver": ""}}}


def test_of_records_per_class_of_hardware_a_host_takes_its_own_else_the_first(monkeypatch):
    from kit.core.noise import calibration
    from kit.core.host import runtime

    v3, v4 = record(SAMPLES, fingerprint=on("cpu (x86-64-v3)")), record(SAMPLES, fingerprint=on("cpu (x86-64-v4)"))
    monkeypatch.setattr(runtime, "host_isa_level", lambda: "x86-64-v4")
    assert calibration.record_for_host([v3, v4], {"dtype": "bfloat16"}) == (v4, "hardware")
    assert calibration.record_for_host([v4, v3], {"dtype": "bfloat16"}) == (v4, "hardware")
    monkeypatch.setattr(runtime, "host_isa_level", lambda: "x86-64-v2")
    assert calibration.record_for_host([v3, v4], {"dtype": "bfloat16"}) == (v3, None)  # refused unless accepted


def test_a_stated_fallback_order_takes_the_finest_rule_that_holds(monkeypatch):
    from kit.core.noise import calibration
    from kit.core.host import runtime

    def gpu(name: str, driver: str) -> dict:
        return {"runtime": {"hardware": name, "accelerator": {"name": name, "driver": driver}}}

    old = record(SAMPLES, fingerprint=gpu("NVIDIA H200", "550.1"), noise_class={"device": "cuda", "dtype": "bfloat16"})
    new = record(SAMPLES, fingerprint=gpu("NVIDIA H200", "570.2"), noise_class={"device": "cuda", "dtype": "bfloat16"})
    other = record(SAMPLES, fingerprint=gpu("NVIDIA H100", "570.2"),
                   noise_class={"device": "cuda", "dtype": "bfloat16"})
    monkeypatch.setattr(runtime, "accelerator", lambda device="cpu": {"name": "NVIDIA H200", "driver": "570.2"})
    cuda = {"dtype": "bfloat16", "device": "cuda"}
    assert calibration.record_for_host([old, new], cuda, ["driver", "hardware"]) == (new, "driver")
    assert calibration.record_for_host([old, other], cuda, ["driver", "hardware"]) == (old, "hardware")
    assert calibration.record_for_host([other], cuda, ["driver", "hardware"]) == (other, None)
    assert calibration.record_for_host([other], cuda, ["driver", "hardware", "device"]) == (other, "device")
