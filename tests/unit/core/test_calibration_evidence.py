"""A calibration record is judged by its evidence: its figures are re-derived from its samples by its rule,
its bytes must be canonical, every value of its type and range, and its samples must cover a case's prompts
in the buckets the case scores them in. Its SHA-256 name alone pins bytes, not bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.core.noise.calibration import (CalibrationRecord, Sample, first_difference, load_record, mismatch, rederived,
                                        same_class)
from kit.core.noise.rule import RULE_NAME
from kit.core.errors import BadInput
from kit.core.records.records import Status
from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes
from support import ROOT

pytestmark = pytest.mark.unit

BUCKETS = {"a": 128, "b": 128, "c": 256}
SAMPLES = [Sample("as-set", 1, 1, {"a": 0.004, "b": 0.008, "c": 0.010}, {"a": -0.002, "b": -0.004, "c": -0.005}),
           Sample("batched", 1, 1, {"a": 0.006, "b": 0.007, "c": 0.011}, {"a": -0.003, "b": -0.003, "c": -0.006}),
           Sample("math", 1, 1, {"a": 0.005, "b": 0.009, "c": 0.009}, {"a": -0.001, "b": -0.004, "c": -0.004})]


def record(**kw) -> CalibrationRecord:
    base = dict(case="hf-bf16", backend="hf", noise_class={"device": "cpu", "dtype": "bfloat16"},
                inputs={"fixture_sha256": "f" * 64, "golden_sha256": "e" * 64, "model_digest": "d" * 64},
                options={"dtype": "bfloat16"}, fingerprint={"runtime": {"hardware": "cpu"}}, command=["parity-kit"],
                variants=[{"name": s.variant} for s in SAMPLES], samples=SAMPLES, created_at="2026-12-01T00:00:00Z")
    return CalibrationRecord.measured(buckets=BUCKETS, **{**base, **kw})


def renamed(doc: dict, folder: Path) -> Path:
    """``doc`` written canonically under its new SHA-256: what an edit that also renames the file gives."""
    data = canonical_bytes(doc)
    return atomic_write_bytes(folder / f"{sha256_bytes(data)}.json", data)


def refusal(path: Path) -> str:
    with pytest.raises(BadInput) as e:
        load_record(path)
    return str(e.value)


def test_every_committed_record_loads_and_rederives_from_its_samples():
    files = sorted((ROOT / "calibrations").glob("*.json"))
    # The H100 80GB records of gpu-h200-64.toml beside the 15 before, and jax-bf16's two deepened H100 records.
    assert len(files) == 19
    rules, decoding = {}, []
    for f in files:
        r = load_record(f)
        # p-values are held as the loader holds them, to the rounding of a float computed again (1e-9 relative):
        # their last digits follow how the t tail is computed (kit.core.noise.special), not the samples
        assert rederived(r).buckets == r.buckets and first_difference(r.drift, rederived(r).drift, "drift") is None
        assert rederived(r).decode == r.decode
        if r.decode:
            decoding.append(r.case)
        rules[f.name[:8]] = r.rule["name"]
    # The hf-bf16 record of the H200 was made before the current rule (docs/gpu-figures.md) and is re-derived by
    # its own, the rule its bounds were reviewed under; every other record by the current one.
    assert rules.pop("5f2f3207") == "largest-plus-margin/2"
    assert set(rules.values()) == {RULE_NAME}
    # The decode cases' records (format 2) hold per-step bounds; every other record is format 1 as it was.
    # (one per CPU class each).
    assert sorted(decoding) == ["hf-bf16-decode", "hf-bf16-decode", "vllm-pp1-decode", "vllm-pp1-decode"]


def test_a_bucket_removed_and_the_file_renamed_is_refused(tmp_path):
    doc = record().to_dict()
    del doc["buckets"]["256"]  # prompt c would have no bound at all
    path = renamed(doc, tmp_path)
    assert refusal(path) == (f"{path}: buckets.256 is absent, rule {RULE_NAME} gives {{'prompts': 1, 'largest': "
                             "0.011, 'spread': 0.002, 'bound': 0.015} from its 3 samples: the record's "
                             "figures are not its samples'; calibrate again instead of editing it")
    # With its prompts gone from the record's table as well, the samples still measured them.
    del doc["prompts"]["c"]
    path = renamed(doc, tmp_path)
    assert refusal(path) == (f"{path}: malformed calibration record: prompts.c: expected the prompts the samples "
                             "measured (this one is measured by the samples but missing here)")


def test_a_wider_bound_in_range_is_refused_as_not_derived(tmp_path):
    doc = record().to_dict()
    doc["buckets"]["128"]["bound"] = 0.5
    path = renamed(doc, tmp_path)
    assert refusal(path).startswith(f"{path}: buckets.128.bound is 0.5, rule {RULE_NAME} gives 0.0")


def test_a_figure_rounded_as_json_keeps_it_is_accepted(tmp_path):
    doc = record().to_dict()
    doc["buckets"]["128"]["spread"] *= 1 + 1e-12  # what another platform's last bit gives
    assert load_record(renamed(doc, tmp_path)).bounds == record().bounds


@pytest.mark.parametrize("key, value, message", [
    (("buckets", "128", "bound"), 0, "buckets.128.bound: expected a number in (0, 1], got 0"),
    (("buckets", "128", "bound"), -0.5, "buckets.128.bound: expected a number in (0, 1], got -0.5"),
    (("buckets", "128", "bound"), 7, "buckets.128.bound: expected a number in (0, 1], got 7"),
    (("buckets", "128", "bound"), "wide", "buckets.128.bound: expected a number in (0, 1], got 'wide'"),
    (("drift", "alpha"), 0, "drift.alpha: expected a number in (0, 1), got 0"),
    (("drift", "alpha"), -1, "drift.alpha: expected a number in (0, 1), got -1"),
    (("drift", "alpha"), "x", "drift.alpha: expected a number in (0, 1), got 'x'"),
    (("drift", "distinct_samples"), -3, "drift.distinct_samples: expected a whole number of at least 1, got -3"),
    (("buckets", "256", "prompts"), -1, "buckets.256.prompts: expected a whole number of at least 1, got -1"),
    (("samples", 1, "launch"), -2, "samples[1].launch: expected a whole number of at least 1, got -2"),
    (("samples", 0, "errors", "a"), True, "samples[0].errors.a: expected a number in [0, 1], got True"),
    (("noise_class", "dtype"), 16, "noise_class.dtype: expected a non-empty string, got 16"),
    (("rule", "name"), "looser/1", "rule.name: expected a rule this kit derives bounds by (largest-plus-margin/3, "
                                   "largest-plus-margin/2), got 'looser/1'"),
])
def test_a_value_of_the_wrong_type_or_range_is_named_by_its_key(tmp_path, key, value, message):
    doc = record().to_dict()
    where = doc
    for part in key[:-1]:
        where = where[part]
    where[key[-1]] = value
    path = renamed(doc, tmp_path)
    assert refusal(path) == f"{path}: malformed calibration record: {message}"


def test_a_record_without_a_drift_alpha_is_one_line(tmp_path):
    doc = record().to_dict()
    del doc["drift"]["alpha"]
    path = renamed(doc, tmp_path)
    assert refusal(path) == f"{path}: malformed calibration record: drift.alpha: missing"


def test_an_unknown_key_is_refused(tmp_path):
    doc = {**record().to_dict(), "bounds_override": {"128": 0.9}}
    path = renamed(doc, tmp_path)
    assert refusal(path).startswith(f"{path}: malformed calibration record: bounds_override: unknown key (expected "
                                    "one of: format, case, ")


def test_bytes_that_are_not_canonical_are_refused_even_under_their_own_digest(tmp_path):
    data = (json.dumps(record().to_dict(), indent=1, sort_keys=True) + "\n").encode()
    path = atomic_write_bytes(tmp_path / f"{sha256_bytes(data)}.json", data)
    assert refusal(path) == (f"{path}: not canonical JSON (sorted keys, no spaces, one trailing newline, as "
                             "the kit writes a record): the record was edited; calibrate again instead of editing it")


def test_a_link_is_named_by_itself_not_by_its_target(tmp_path):
    r = record()
    target = atomic_write_bytes(tmp_path / f"{r.sha256}.json", r.canonical())
    link = tmp_path / f"{'0' * 64}.json"
    link.symlink_to(target)
    assert refusal(link).startswith(f"{link}: name is not the record's SHA-256 ({r.sha256})")
    good = tmp_path / "in" / target.name
    good.parent.mkdir()
    good.symlink_to(target)
    assert load_record(good).path == good


def test_a_case_prompt_in_another_bucket_than_measured_does_not_fit():
    ref = record().reference()
    fits = dict(backend="hf", fixture_sha256="f" * 64, golden_sha256="e" * 64, model_digest="d" * 64,
                noise_class={"device": "cpu", "dtype": "bfloat16"})
    assert mismatch(ref, prompts=dict(BUCKETS), **fits) is None
    assert mismatch(ref, prompts={**BUCKETS, "c": 512}, **fits) == (
        "it measured prompt c in bucket 256, this case scores it in bucket 512 (1 prompt(s) in other buckets)")
    no_bound = {**ref, "bounds": {"128": ref["bounds"]["128"]}}
    assert mismatch(no_bound, prompts=dict(BUCKETS), **fits) == (
        "it has no bound for bucket 256, where this case scores prompts")


def on(name: str) -> dict:
    return {"runtime": {"accelerator": {"name": name, "driver": ""}}}


def test_two_records_of_one_class_of_hardware_are_found():
    v3, v4 = record(fingerprint=on("cpu (x86-64-v3)")), record(fingerprint=on("cpu (x86-64-v4)"))
    again = record(fingerprint=on("cpu (x86-64-v3)"), created_at="2026-12-02T00:00:00Z")
    assert same_class([v3, v4]) is None
    assert same_class([v3, v4, again]) == (v3, again)


def test_a_word_and_its_enum_member_are_the_same_json_value_but_a_bool_is_not_a_number():
    # A result judged again holds Status members; the one read back from its file holds words.
    assert first_difference({"status": "passed"}, {"status": Status.PASSED}, "r") is None
    assert first_difference({"status": "passed"}, {"status": Status.FAILED}, "r") == ("r.status", "passed",
                                                                                      Status.FAILED)
    assert first_difference({"passed": True}, {"passed": 1}, "r") == ("r.passed", True, 1)
