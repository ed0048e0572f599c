"""The detectable effect: derived from faulted samples judged as the gate judges, never read off a record."""

from __future__ import annotations

import json

import pytest

from kit.core.noise.calibration import CalibrationRecord, Sample
from kit.core.errors import BadInput
from kit.core.exitcodes import ExitCode
from kit.core.records.jsonio import canonical_bytes, sha256_bytes
from kit.core.noise.power import (FaultedSample, PowerRecord, Trial, caught_by, family_power, headline, load_power,
                                  summarize)
from kit.core.verdict.detectable import judged_by_power
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import GATE_EXIT_CODES, Verdict, gate_verdict
from tests.support.records import passed_case, prompt_score

PROMPTS = [f"p{i:02d}" for i in range(16)]
BUCKETS = {p: 128 if i < 8 else 256 for i, p in enumerate(PROMPTS)}


def _clean(variant: str, scale: float) -> Sample:
    # Per-prompt errors near 0.01, moved a little by each variant: a bound near 0.012 per bucket.
    errors = {p: round(0.008 + 0.002 * scale * ((i * 7) % 5) / 4, 6) for i, p in enumerate(PROMPTS)}
    shifts = {p: round(-0.001 * scale * ((i * 3) % 4) / 3, 6) for i, p in enumerate(PROMPTS)}
    return Sample(variant, 1, 1, errors, shifts)


@pytest.fixture(scope="module")
def record() -> CalibrationRecord:
    samples = [_clean(v, s) for v, s in (("as-set", 1.0), ("batched", 0.6), ("sdpa", 0.8), ("eager", 0.9))]
    return CalibrationRecord.measured(
        buckets=BUCKETS, case="hf-bf16", backend="hf", noise_class={"device": "cpu", "dtype": "bfloat16"},
        inputs={"fixture_sha256": "f" * 64, "golden_sha256": "g" * 64, "model_digest": "m" * 64},
        options={"dtype": "bfloat16"}, fingerprint={"runtime": {"accelerator": {"name": "cpu (x86-64-v4)"}}},
        command=["test"], variants=[], samples=samples, created_at="2026-12-03T00:00:00+00:00")


def _faulted(variant: str, over: float, on: int = 1, failed: tuple[str, ...] = ()) -> FaultedSample:
    """A faulted sample: ``on`` prompts raised to ``over`` (others at clean values)."""
    clean = _clean(variant, 1.0)
    errors = dict(clean.errors)
    for p in PROMPTS[:on]:
        errors[p] = over
    return FaultedSample(variant, 1, errors, dict(clean.shifts), failed)


def _trial(magnitude: float, effect: float, caught: int, of: int = 5, fault: str = "rope_base") -> Trial:
    """``caught`` of ``of`` variants see a prompt far over its bound; the rest are clean."""
    samples = tuple(_faulted(f"v{i}", 0.5 if i < caught else 0.0081, on=1 if i < caught else 0) for i in range(of))
    return Trial("position", fault, magnitude, effect, samples)


def test_a_prompt_over_its_bucket_bound_catches_the_sample(record):
    reference = record.reference()
    assert caught_by(_faulted("a", 0.5), reference)[0] == "bound"
    assert caught_by(_faulted("a", 0.0081, on=0), reference) == ()
    assert caught_by(_faulted("a", 0.0081, on=0, failed=("p00",)), reference) == ("winner/missing",)


def test_a_shift_of_every_prompt_is_caught_by_the_drift_test_alone(record):
    reference = record.reference()
    clean = _clean("a", 1.0)
    # Every prompt's golden top token a little less likely, no error over its bound: only the mean can see it.
    shifted = {p: x - 0.003 for p, x in clean.shifts.items()}
    assert caught_by(FaultedSample("a", 1, dict(clean.errors), shifted), reference) == ("drift",)


def test_the_detectable_magnitude_is_the_smallest_caught_in_80_percent_from_which_all_larger_are(record):
    reference = record.reference()
    trials = [_trial(0.005, 0.004, 1), _trial(0.01, 0.008, 4), _trial(0.02, 0.016, 5), _trial(0.05, 0.04, 5)]
    p = family_power("position", trials, reference, clean_error=0.01)
    assert (p.magnitude, p.effect, p.ratio, p.below) == (0.01, 0.008, 0.8, 0.005)
    assert [t[2] for t in p.tried] == [0.2, 0.8, 1.0, 1.0]


def test_a_magnitude_caught_below_one_that_is_not_is_no_detectable_effect(record):
    # Caught at 0.005 by luck of rounding, missed at 0.01: detection starts at 0.02.
    trials = [_trial(0.005, 0.004, 5), _trial(0.01, 0.008, 2), _trial(0.02, 0.016, 5)]
    p = family_power("position", trials, record.reference(), clean_error=0.01)
    assert (p.magnitude, p.below) == (0.02, 0.01)


def test_a_family_never_caught_has_no_detectable_effect_and_the_case_says_so(record):
    trials = [_trial(0.01, 0.008, 0), _trial(0.02, 0.016, 3), _trial(0.5, 0.3, 5, fault="logit_scale")]
    trials[-1] = Trial("output", "logit_scale", 0.5, 0.3, trials[-1].samples)
    s = summarize(trials, record.reference())
    assert s["detects_from"] is None and s["hardest"] == "position"
    assert s["families"]["output"]["ratio"] == pytest.approx(0.3 / s["clean_error"], rel=1e-3)
    assert headline({**s, "same_class": True}) == ("does not detect every fault family: position not caught at any "
                                                   "magnitude tried; not measured: attention, mlp, normalization")


def test_the_case_detects_from_its_hardest_family(record):
    position = [_trial(0.01, 0.02, 5)]
    output = [Trial("output", "logit_scale", 0.01, 0.011, _trial(0.01, 0.011, 5).samples)]
    s = summarize(position + output, record.reference())
    clean = s["clean_error"]
    assert s["hardest"] == "position"
    assert s["detects_from"] == round(0.02 / clean, 4)
    assert headline({**s, "same_class": False, "measured_on": "cpu (x86-64-v4)"}) == (
        f"detects faults from {0.02 / clean:.2g}x the clean error (measured on cpu (x86-64-v4)); not measured: "
        "attention, mlp, normalization")


def _written(tmp_path, record, trials) -> tuple:
    power = PowerRecord.measured(record.reference(), case="hf-bf16", backend="hf", record_sha256=record.sha256,
                                 measured_on="cpu (x86-64-v4)", fingerprint={}, families={"position": "rope_base"},
                                 trials=trials, command=["parity-kit", "power"], created_at="2026-12-03")
    path = tmp_path / f"{power.sha256}.json"
    path.write_bytes(power.canonical())
    return power, path


def test_a_power_record_loads_against_its_calibration_record(tmp_path, record):
    power, path = _written(tmp_path, record, [_trial(0.01, 0.02, 5), _trial(0.005, 0.01, 1)])
    loaded = load_power(path, record.reference())
    assert loaded.summary == power.summary and loaded.summary["families"]["position"]["magnitude"] == 0.01


def test_a_power_record_stating_a_smaller_detectable_effect_than_its_samples_give_is_refused(tmp_path, record):
    power, _ = _written(tmp_path, record, [_trial(0.01, 0.02, 5), _trial(0.005, 0.01, 1)])
    doc = power.to_dict()
    doc["summary"]["detects_from"] = 0.5  # a claim: "this case sees faults from half its noise"
    path = tmp_path / f"{sha256_bytes(canonical_bytes(doc))}.json"
    path.write_bytes(canonical_bytes(doc))
    with pytest.raises(BadInput) as exc:
        load_power(path, record.reference())
    assert str(exc.value).startswith(f"{path}: summary: its detectable effects are not what its faulted samples give")
    assert "stated 0.5" in str(exc.value) and "\n" not in str(exc.value)


def test_an_edited_power_record_and_one_of_another_record_are_refused(tmp_path, record):
    _, path = _written(tmp_path, record, [_trial(0.01, 0.02, 5)])
    doc = json.loads(path.read_bytes())
    doc["trials"][0]["magnitude"] = 0.001
    path.write_bytes(canonical_bytes(doc))
    with pytest.raises(BadInput, match="name is not the power record.s SHA-256"):
        load_power(path, record.reference())
    _, path = _written(tmp_path, record, [_trial(0.02, 0.03, 5)])
    with pytest.raises(BadInput, match=f"measured against calibration record {record.sha256[:12]}, not 000000000000"):
        load_power(path, {**record.reference(), "sha256": "0" * 64})


DETECTABLE = {"detects_from": 2.3, "hardest": "position", "prompts": 64, "clean_error": 0.01,
              "families": {"position": {"fault": "rope_base", "ratio": 2.3},
                           **{f: {"fault": "x", "ratio": 1.5}
                              for f in ("attention", "mlp", "normalization", "output")}}}


def _passed(n: int = 64) -> CaseResult:
    return CaseResult(case="hf-bf16", backend="hf", status=Status.PASSED, golden_kind="semantic",
                      prompts=[prompt_score(f"p{i}", 0.01) for i in range(n)])


def test_a_passed_case_that_cannot_see_the_limit_asked_is_inconclusive_with_its_reason():
    r = judged_by_power(_passed(), DETECTABLE, 2.0, "cases.hf-bf16.detectable_limit")
    assert r.status == Status.INCONCLUSIVE and r.detectable == DETECTABLE
    assert r.failure_messages == ["hf-bf16: inconclusive: it detects faults only from 2.3x the clean error "
                                  "(position: rope_base), over the limit of 2x (cases.hf-bf16.detectable_limit)"]
    assert judged_by_power(_passed(), DETECTABLE, 3.0, "x").status == Status.PASSED


def test_a_run_with_fewer_prompts_than_the_measurement_is_inconclusive():
    r = judged_by_power(_passed(16), DETECTABLE, 3.0, "x")
    assert r.status == Status.INCONCLUSIVE
    assert r.error == ("it scored 16 prompts and its detectable effect (2.3x) was measured on 64: with fewer "
                       "prompts it may see less")


def test_a_failed_case_stays_failed_and_a_case_without_a_limit_only_states_its_power():
    failed = CaseResult(case="hf-bf16", backend="hf", status=Status.FAILED, prompts=[prompt_score("p", 0.5)])
    assert judged_by_power(failed, DETECTABLE, 1.0, "x").status == Status.FAILED
    r = judged_by_power(_passed(), DETECTABLE, None, "x")
    assert r.status == Status.PASSED and r.detectable == DETECTABLE


def test_inconclusive_is_its_own_gate_verdict_and_exit_code_never_passed_failed_or_incomplete():
    results = {"a": passed_case("a"), "b": judged_by_power(_passed(), DETECTABLE, 2.0, "x")}
    assert gate_verdict(["a", "b"], results) == Verdict.INCONCLUSIVE
    assert GATE_EXIT_CODES[Verdict.INCONCLUSIVE] == ExitCode.INCONCLUSIVE == 8
    failed = CaseResult(case="c", backend="hf", status=Status.FAILED, prompts=[prompt_score("p", 0.5)])
    assert gate_verdict(["a", "b", "c"], {**results, "c": failed}) == "failed"
    assert gate_verdict(["a", "b", "d"], results) == "incomplete"


def test_a_control_with_an_inconclusive_case_never_qualifies_the_candidate(tmp_path):
    from kit.core.verdict.diagnosis import ControlVerdict, diagnose
    from kit.core.records.results import RunView

    def view(name: str, results: dict) -> RunView:
        return RunView(tmp_path / name, {"name": "t", "cases": list(results), "release": {"name": name}}, results,
                       {n: "executor" for n in results})

    candidate = {"a": passed_case("a"), "b": judged_by_power(_passed(), DETECTABLE, 2.0, "cases.b.detectable_limit")}
    d = diagnose(view("current", {"a": passed_case("a"), "b": passed_case("b")}), view("candidate", candidate))
    assert d.verdict == ControlVerdict.INCOMPLETE
    assert "case b is inconclusive: it detects faults only from 2.3x the clean error" in d.reason


def test_a_measurement_of_fewer_families_says_so_and_cannot_meet_a_limit():
    # As on a GPU node, where each family of a 1B model takes most of a ten-minute call: two families measured.
    two = {**DETECTABLE, "families": {f: DETECTABLE["families"][f] for f in ("position", "output")}}
    assert headline(two) == "detects faults from 2.3x the clean error; not measured: attention, mlp, normalization"
    assert headline(DETECTABLE) == "detects faults from 2.3x the clean error"
    r = judged_by_power(_passed(), two, 3.0, "x")
    assert r.status == Status.INCONCLUSIVE
    assert r.error == ("its detectable effect (2.3x) was measured for 2 of 5 fault families: it cannot say what it "
                       "would see of attention, mlp, normalization")
    assert judged_by_power(_passed(), two, None,
                           "x").status == Status.PASSED  # no limit asked: it only states its power


def test_the_default_families_are_the_ones_the_power_command_measures():
    from kit.core.noise.power import FAMILY_NAMES
    from kit.faults.power import FAMILIES

    assert tuple(FAMILIES) == FAMILY_NAMES


def test_a_decode_sample_is_caught_by_a_step_over_its_own_bound_or_a_divergence(record):
    reference = {**record.reference(), "decode_steps": 3, "step_bounds": {"1": 0.012, "2": 0.02, "3": 0.03}}
    clean = _faulted("a", 0.0081, on=0)
    quiet = {p: (0.005, 0.01, 0.02) for p in clean.errors}
    as_decode = lambda steps, failed=(): FaultedSample(  # noqa: E731
        "a", 1, clean.errors, clean.shifts, (), steps, failed)
    assert caught_by(as_decode(quiet), reference) == ()
    # Step 3's error of 0.025 would fail step 1's bound, and passes its own.
    late = {**quiet, "p00": (0.005, 0.01, 0.025)}
    assert caught_by(as_decode(late), reference) == ()
    over = {**quiet, "p00": (0.005, 0.021, 0.02)}
    assert caught_by(as_decode(over), reference) == ("decode",)
    assert caught_by(as_decode(quiet, ("p03",)), reference) == ("decode",)
    # A step the record has no bound for is judged by the prompt's bucket's bound, as the gate judges it.
    longer = {**quiet, "p00": (0.005, 0.01, 0.02, 0.5)}
    assert caught_by(as_decode(longer), reference) == ("decode",)


def test_a_first_token_sample_keeps_the_bytes_it_had_and_a_decode_sample_round_trips():
    plain = _faulted("a", 0.5)
    assert set(plain.to_dict()) == {"variant", "launch", "errors", "shifts", "failed_prompts"}
    assert FaultedSample.from_dict(plain.to_dict()) == plain
    decode = FaultedSample("a", 1, {"p": 0.1}, {"p": 0.0}, (), {"p": (0.1, 0.2)}, ("p",))
    assert FaultedSample.from_dict(json.loads(json.dumps(decode.to_dict()))) == decode
