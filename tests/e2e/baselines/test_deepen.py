"""`baseline deepen` end to end: a thin record of hf-bf16 grows by the current-pin run of a real control found in a
history (verified, passed, same class, runtime, release and inputs), is backtested, checked by an evidence gate of the
case and placed with its lineage, and the gate then stands on it; the control's candidate run, a plain gate run and a
failed control run are never taken; a history with nothing to add is refused and nothing is placed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.calibrate.run import write_record
from kit.core.baselines.lineage import load_entry
from kit.core.host.runtime import accelerator
from kit.core.noise.calibration import CalibrationRecord, load_record
from kit.core.records.jsonio import sha256_file
from support import BROKEN_SILU, add_kernel, parity_kit, releases, write_descriptor

pytestmark = pytest.mark.e2e


def thin_record(embedded, folder: Path) -> Path:
    """The embedded hf-bf16 record of this host's class (or, on a class it has none of, its first relabelled to
    this one) without its samples of the case as set: the clean launch a control's pin run is, it has never seen."""
    here = embedded.descriptor.parent
    listed = [load_record((here / f).resolve()) for f in embedded.doc["cases"]["hf-bf16"]["calibration"]]
    name = accelerator("cpu")["name"]
    record = next((r for r in listed if r.fingerprint["runtime"]["accelerator"]["name"] == name), listed[0])
    runtime = {**record.fingerprint["runtime"], "accelerator": {"name": name, "driver": ""}}
    kept = [s for s in record.samples if s.variant != "as-set"]
    thin = CalibrationRecord.measured(
        buckets={pid: int(p["bucket"]) for pid, p in record.prompts.items()}, case=record.case,
        backend=record.backend, noise_class=record.noise_class, inputs=record.inputs, options=record.options,
        fingerprint={**record.fingerprint, "runtime": runtime}, command=record.command,
        variants=[v for v in record.variants if v["name"] != "as-set"], samples=kept, created_at=record.created_at,
        rule=record.rule)
    folder.mkdir(parents=True, exist_ok=True)
    return write_record(thin, folder)


def descriptor_on(tmp: Path, embedded, record: Path, candidate_kernel: str | None = None) -> Path:
    case = {k: v for k, v in embedded.doc["cases"]["hf-bf16"].items() if k not in ("calibration", "power")}
    kinds = {"lineage": str(tmp / "lineage"), "calibrations": str(tmp / "calibrations"),
             "goldens": str(tmp / "goldens")}
    return write_descriptor(tmp, embedded, cases={"hf-bf16": {**case, "calibration": [str(record)]}},
                            releases=releases(**({"candidate": candidate_kernel} if candidate_kernel else {})),
                            baselines=kinds)


@pytest.fixture(scope="module")
def history(tmp_path_factory, embedded):
    """A thin record, its descriptor, and a history holding a passed control of the pin and a plain gate run."""
    tmp = tmp_path_factory.mktemp("deepen")
    record = thin_record(embedded, tmp / "calibrations")
    desc = descriptor_on(tmp, embedded, record)
    hist = tmp / "history"
    control = parity_kit("control", desc, "--out", hist / "control", "--case", "hf-bf16", "--no-summary")
    assert control.returncode == 0, control.stderr[-3000:]
    gate = parity_kit("gate", desc, "--out", hist / "gate", "--no-summary")
    assert gate.returncode == 0, gate.stderr[-3000:]
    return tmp, record, desc, hist


def test_a_passed_control_of_the_pin_deepens_a_thin_record_named_by_its_root(history):
    tmp, record, desc, hist = history
    before = load_record(record)
    proc = parity_kit("baseline", "deepen", desc, "--case", "hf-bf16", "--launches", "0", "--history", hist,
                      "--archive", hist, "--reason", "the pin's clean control runs", "--out", tmp / "work")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "deepen hf-bf16: 1 passed control run(s) of the pin taken as samples" in proc.stderr
    placed = [Path(line.split("wrote ", 1)[1]) for line in proc.stdout.splitlines() if "wrote " in line]
    new = next(load_record(p) for p in placed if p.parent.name == "calibrations")
    # The record's own samples kept, one more: the control's current run, named by its root digest.
    assert new.samples[:len(before.samples)] == before.samples
    [added] = new.samples[len(before.samples):]
    root = json.loads((hist / "control" / "current" / "manifest.json").read_text())["root_sha256"]
    assert added.variant == f"control-run {root[:12]}" and added.launch == 1
    assert new.variants[-1]["why"] == f"a passed control run of the pin: run {root}"
    assert new.drift["distinct_samples"] == before.drift["distinct_samples"] + 1
    # The candidate's run of the same control, and the plain gate run, were looked at and not taken.
    assert len(new.samples) == len(before.samples) + 1
    # Placed through the lineage: the deeper record's entry supersedes the thin one's (given a first entry).
    entries = {e.baseline: e for e in map(load_entry, (tmp / "lineage").glob("*.json"))}
    head = entries[sha256_file(next(p for p in placed if p.parent.name == "calibrations"))]
    assert head.supersedes is not None and entries[sha256_file(record)].sha256 == head.supersedes
    assert head.command[:3] == ("parity-kit", "baseline", "deepen")
    # The gate now stands on the deeper record.
    status = parity_kit("baseline", "status", desc, "--case", "hf-bf16", "--json")
    [row] = [r for r in json.loads(status.stdout) if r["kind"] == "calibration"]
    assert row["sha256"] == new.sha256, status.stdout


def test_a_failed_control_and_a_candidate_are_never_samples_and_nothing_to_add_is_refused(tmp_path, embedded):
    record = thin_record(embedded, tmp_path / "calibrations")
    env = add_kernel(tmp_path / "jupyter", "broken-pin", BROKEN_SILU)
    # Today's pin broken: the control's current run fails, its candidate passes. Neither may deepen the record.
    desc = descriptor_on(tmp_path, embedded, record)
    pinned = '[releases.current.backends.hf]\nkernel = "{}"'
    doc = desc.read_text().replace(pinned.format("parity-kit"), pinned.format("broken-pin"))
    assert doc != desc.read_text()
    desc.write_text(doc)
    hist = tmp_path / "history"
    control = parity_kit("control", desc, "--out", hist / "control", "--case", "hf-bf16", "--no-summary", env=env)
    assert control.returncode == 4, control.stderr[-3000:]  # a baseline blocker: the pin fails
    proc = parity_kit("-v", "baseline", "deepen", desc, "--launches", "0", "--history", hist, "--archive", hist,
                      "--reason", "the pin's clean control runs", "--out", tmp_path / "work", env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "deepen hf-bf16: 0 passed control run(s) of the pin taken as samples" in proc.stderr
    assert f"{hist / 'control' / 'current'} not taken: verified failed, not passed" in proc.stderr
    assert ("refused: hf-bf16: nothing to deepen it with: no further launch was asked for and the history holds no "
            "passed control run of the pin that is a sample of this record (run with -v to see why each was left)"
            ) in proc.stdout
    assert not (tmp_path / "lineage").exists() or not list((tmp_path / "lineage").glob("*.json"))


def test_a_case_with_no_record_of_this_class_is_refused_in_one_line(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, baselines={"lineage": str(tmp_path / "lineage")})
    proc = parity_kit("baseline", "deepen", desc, "--case", "checkpoint", "--reason", "more samples")
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines()[-1] == (
        "parity-kit: bad input: case checkpoint: no calibration record of this host's class to deepen; `parity-kit "
        f"baseline make {desc} --case checkpoint --reason ...` makes one")
