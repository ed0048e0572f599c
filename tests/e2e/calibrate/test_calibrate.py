"""`parity-kit calibrate` end to end: a record from real clean variants, a gate that takes its bounds from
it, a calibration resumed without losing a sample, and every bad record refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.core.noise.calibration import MIN_SAMPLES, CalibrationRecord, Sample, load_record
from kit.core.noise.rule import bound_rule
from kit.core.baselines.golden import load_golden
from kit.core.records.jsonio import canonical_bytes
from support import parity_kit, write_descriptor

pytestmark = pytest.mark.e2e

# One bucket of the embedded hf-bf16 case: 16 prompts, so that each variant takes seconds.
SMALL = {"backend": "hf", "golden": "semantic", "bound": 0.075, "dtype": "bfloat16", "buckets": [128]}


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory, embedded):
    tmp = tmp_path_factory.mktemp("calibrate")
    desc = write_descriptor(tmp, embedded, cases={"small": SMALL})
    proc = parity_kit("calibrate", desc, "--out", tmp / "cal", "--to", tmp / "records", timeout=900)
    assert proc.returncode == 0, proc.stderr
    record = Path(proc.stdout.strip())
    return tmp, desc, record, proc


def calibrated_case(record: Path, **more) -> dict:
    return {**{k: v for k, v in SMALL.items() if k != "bound"}, "calibration": str(record), **more}


def test_a_record_holds_every_variant_its_bounds_and_where_it_was_measured(calibrated, embedded):
    tmp, desc, path, proc = calibrated
    record = load_record(path)  # refuses a record whose name is not its SHA-256
    assert path.name == f"{record.sha256}.json" and path.parent == tmp / "records"
    names = [v["name"] for v in record.variants]
    assert names == ["as-set", "batched-2-right", "batched-4-left", "batched-8-right", "batched-8-left", "sdpa-math",
                     "as-set"]
    assert [s.variant for s in record.samples] == names and len(record.samples[0].errors) == 16
    # The bound is the rule applied to the samples, nothing else.
    errors = [[s.errors[p] for s in record.samples] for p in record.samples[0].errors]
    largest = max(max(e) for e in errors)
    spread = max(max(e) - min(e) for e in errors)
    assert record.bounds == {"128": bound_rule(largest, spread, record.drift["distinct_samples"])}
    assert record.drift["distinct_samples"] >= MIN_SAMPLES
    assert record.inputs == {"fixture_sha256": embedded.fixture.stem, "golden_sha256": record.inputs["golden_sha256"],
                             "model_digest": embedded.doc["model"]["digest"]}
    runtime = record.fingerprint["runtime"]
    assert runtime["accelerator"]["name"].startswith("cpu (") and "torch" in runtime["packages"]
    assert record.fingerprint["release"]["backend"] == "hf" and record.command[:2] == ["parity-kit", "calibrate"]
    assert record.noise_class == {"device": "cpu", "dtype": "bfloat16"}
    assert '[cases.small] calibration = "' in proc.stderr and "(in place of bound)" in proc.stderr
    assert (tmp / "cal" / "small.ipynb").is_file() and (tmp / "cal" / "calibration.json").is_file()
    # The second launch is another process: nothing of the first launch's engine state carries over.
    assert "as-set (launch 2)" in (tmp / "cal" / "small.launch2.ipynb").read_text()
    assert "as-set (launch 2)" not in (tmp / "cal" / "small.ipynb").read_text()


def test_a_gate_takes_its_bounds_from_the_record_and_says_so(calibrated, embedded, tmp_path):
    _, _, path, _ = calibrated
    record = load_record(path)
    desc = write_descriptor(tmp_path, embedded, cases={"small": calibrated_case(path)})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run", "--no-summary")
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "run" / "result.json").read_text())["cases"]["small"]
    assert result["bucket_bounds"] == record.bounds and result["bound"] is None
    source = result["bound_source"]
    assert (source["kind"], source["record"], source["rule"]) == ("calibrated", record.sha256, "largest-plus-margin/3")
    assert source["measured_on"]["accelerator"] == record.fingerprint["runtime"]["accelerator"]
    assert 0 < result["headroom"] < 1
    assert result["drift"]["passed"] and [s["test"] for s in result["drift"]["statistics"]] == ["error", "shift"]


def test_of_one_record_per_class_of_hardware_the_gate_takes_this_hosts(calibrated, embedded, tmp_path):
    _, _, path, _ = calibrated
    here = load_record(path)
    doc = here.to_dict()
    doc["fingerprint"] = {**doc["fingerprint"], "runtime": {**doc["fingerprint"]["runtime"],
                                                           "accelerator": {"name": "cpu (x86-64-v9)", "driver": ""}}}
    elsewhere = CalibrationRecord.from_dict(doc)
    other = tmp_path / f"{elsewhere.sha256}.json"
    other.write_bytes(elsewhere.canonical())
    for i, order in enumerate(([str(other), str(path)], [str(path), str(other)])):
        desc = write_descriptor(tmp_path / f"order{i}", embedded, cases={"small": calibrated_case(path)})
        desc.write_text(desc.read_text().replace(f'calibration = "{path}"', f"calibration = {json.dumps(order)}"))
        run = desc.parent / "run"
        proc = parity_kit("gate", desc, "--out", run, "--no-summary")
        assert proc.returncode == 0, proc.stderr
        result = json.loads((run / "result.json").read_text())["cases"]["small"]
        assert result["bound_source"]["record"] == here.sha256 and result["drift"]["passed"]


def test_an_interrupted_calibration_resumes_without_measuring_a_finished_sample_again(calibrated, tmp_path):
    tmp, desc, path, _ = calibrated
    lines = (tmp / "cal" / "small.samples.jsonl").read_text().splitlines()
    resumed = tmp_path / "cal"
    resumed.mkdir()
    # The directory's index, written as calibrate starts, says which descriptor and case settings it measured.
    (resumed / "calibration.json").write_bytes((tmp / "cal" / "calibration.json").read_bytes())
    # Three finished samples and a fourth cut short by the kill.
    (resumed / "small.samples.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    proc = parity_kit("calibrate", desc, "--resume", resumed, "--to", tmp_path / "records", timeout=900)
    assert proc.returncode == 0, proc.stderr
    notebook = (resumed / "small.ipynb").read_text()
    for name in ("as-set (launch 1)", "batched-2-right (launch 1)", "batched-4-left (launch 1)"):
        assert f"{name}: reused from small.samples.jsonl" in notebook
    again = load_record(Path(proc.stdout.strip()))
    assert [s.to_dict() for s in again.samples] == [s.to_dict() for s in load_record(path).samples]


def refused(proc) -> str:
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def gate_line(tmp_path, embedded, case: dict, **descriptor) -> str:
    desc = write_descriptor(tmp_path, embedded, cases={"small": case}, **descriptor)
    line = refused(parity_kit("gate", desc, "--out", tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    return line


def test_a_tampered_record_is_refused(calibrated, embedded, tmp_path):
    _, _, path, _ = calibrated
    doc = json.loads(path.read_text())
    doc["buckets"]["128"]["bound"] = 0.5  # a wider bound, by hand
    tampered = tmp_path / path.name
    tampered.write_bytes(canonical_bytes(doc))
    line = gate_line(tmp_path, embedded, calibrated_case(tampered))
    assert line.endswith(f"cases.small.calibration: {tampered}: name is not the record's SHA-256 "
                         f"({CalibrationRecord.from_dict(doc).sha256}): the record was changed after it was made; "
                         "calibrate again instead of editing it")


def test_a_record_made_for_other_inputs_is_refused(calibrated, embedded, tmp_path):
    _, _, path, _ = calibrated
    record = load_record(path)
    other_golden = tmp_path / "golden.json"
    doc = json.loads(embedded.goldens["semantic"].read_text())
    doc["provenance"]["note"] = "remade"
    other_golden.write_bytes(canonical_bytes(doc))
    line = gate_line(tmp_path, embedded, calibrated_case(path),
                     goldens={**embedded.golden_files, "semantic": other_golden})
    assert "cases.small.calibration: record " in line and line.endswith(
        f"does not fit: it was made for golden {record.inputs['golden_sha256'][:12]}, this case uses "
        f"{load_golden(other_golden).sha256[:12]}")


def test_a_bound_both_hand_set_and_calibrated_is_refused(calibrated, embedded, tmp_path):
    _, _, path, _ = calibrated
    line = gate_line(tmp_path, embedded, calibrated_case(path, bound=0.05))
    assert line.endswith("cases.small.calibration: the case also sets bound; a bound is either hand-set or "
                         "calibrated, not both")


def test_a_record_of_too_few_distinct_samples_is_refused(calibrated, embedded, tmp_path):
    _, _, path, _ = calibrated
    record = load_record(path)
    first = record.samples[0]
    twins = [Sample(first.variant, n, 1, first.errors, first.shifts) for n in (1, 2, 3)]
    thin = CalibrationRecord.measured(
        buckets={p: 128 for p in first.errors}, case=record.case, backend=record.backend,
        noise_class=record.noise_class, inputs=record.inputs, options=record.options,
        fingerprint=record.fingerprint, command=record.command, variants=record.variants[:3], samples=twins,
        created_at=record.created_at)
    thin_path = tmp_path / f"{thin.sha256}.json"
    thin_path.write_bytes(thin.canonical())
    line = gate_line(tmp_path, embedded, calibrated_case(thin_path))
    assert line.endswith(f"{thin_path}: 1 distinct sample(s) of 3, the rule needs at least 2: calibrate with "
                         "more variants")


def test_calibrating_an_exact_case_is_refused(embedded, tmp_path):
    desc = write_descriptor(tmp_path, embedded, cases={"checkpoint": embedded.doc["cases"]["checkpoint"]})
    line = refused(parity_kit("calibrate", desc, "--case", "checkpoint", "--out", tmp_path / "cal"))
    assert line.endswith("case checkpoint is judged bit for bit against an exact golden: there is no bound to "
                         "calibrate")
    assert not (tmp_path / "cal").exists()


def test_noise_measured_on_other_hardware_is_no_baseline_unless_accepted(embedded):
    import dataclasses

    from kit.case.runner import run_case
    from kit.core.errors import NoBaselineHere
    from kit.descriptor.load import load_descriptor

    spec = load_descriptor(embedded.descriptor).case_specs(["hf-bf16"])[0]
    cal = spec.calibration
    elsewhere = {**cal["fingerprint"], "runtime": {**cal["fingerprint"]["runtime"],
                                                  "accelerator": {"name": "cpu (x86-64-v9)", "driver": ""}}}
    refused_spec = dataclasses.replace(spec, buckets=[128], calibration={**cal, "fingerprint": elsewhere, "accept": []})
    # The kernel found hardware no record lists: the case has no baseline here (never an error), and says the command.
    with pytest.raises(NoBaselineHere) as e:
        run_case(refused_spec)
    assert str(e.value).startswith(f"no baseline for this hardware: case hf-bf16's calibration {cal['path']} "
                                   "measured noise on cpu (x86-64-v9), this case runs on cpu (")
    assert str(e.value).endswith("make one here with `parity-kit baseline make descriptors/tiny-cpu.toml --case "
                                 'hf-bf16 --reason "..."`')
    accepted = run_case(dataclasses.replace(refused_spec, calibration={**cal, "fingerprint": elsewhere,
                                                                       "accept": ["hardware"]}))
    assert accepted.status == "passed" and accepted.drift is None
    assert accepted.drift_skipped == "calibration measured on other hardware, cpu (x86-64-v9)"
    assert accepted.drift_off == "other-hardware"
    assert accepted.bucket_bounds == cal["bounds"]
    assert any(n.startswith("calibration measured on cpu (x86-64-v9), this case runs on cpu (") and
               n.endswith("its bounds apply; its drift test does not, since the mean error itself moves with the "
                          "hardware") for n in accepted.notes)
    # Measured here and turned off: the drift column says so rather than "no calibration".
    from kit.core.host.runtime import accelerator

    here = {**cal["fingerprint"], "runtime": {**cal["fingerprint"]["runtime"], "accelerator": accelerator("cpu")}}
    off = run_case(dataclasses.replace(spec, buckets=[128], drift=False, calibration={**cal, "fingerprint": here}))
    assert off.drift is None and off.drift_skipped == "turned off: drift = false" and off.drift_off == "turned-off"
    assert off.drift_text == "not run (turned off: drift = false)"
