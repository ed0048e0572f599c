"""Bounds borrowed from another class of hardware, end to end: a case whose only record was measured on the other
CPU class, and whose clean run crosses that record's bounds by what classes differ, ends borrowed-bounds (exit 9)
with the command that measures this host, in the verdict, console, evidence, JUnit and triage; one that crosses
them by more than any two classes' records differ still fails (exit 1)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from kit.core.verdict.borrowed import CROSS_CLASS_FACTOR
from kit.core.noise.calibration import CalibrationRecord, Sample, measured_on, record_filename
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from support import parity_kit, write_descriptor

CLASSES = ("cpu (x86-64-v3)", "cpu (x86-64-v4)")


def _other_class_record(folder: Path, record: CalibrationRecord, scale: float) -> tuple[Path, str]:
    """``record`` as if measured on the other CPU class, each sample's errors times ``scale`` (its bounds follow by
    the rule): a clean run here then crosses them by about 1/scale. Written under its SHA-256, as records are."""
    here = measured_on({"fingerprint": record.fingerprint})
    other = next(c for c in CLASSES if c != here)
    runtime = {**record.fingerprint["runtime"],
               "accelerator": {**record.fingerprint["runtime"]["accelerator"], "name": other}}
    samples = [dataclasses.replace(s, errors={p: e * scale for p, e in s.errors.items()},
                                   shifts={p: x * scale for p, x in s.shifts.items()}) for s in record.samples]
    made = CalibrationRecord.measured(
        buckets={p: v["bucket"] for p, v in record.prompts.items()}, case=record.case, backend=record.backend,
        noise_class=dict(record.noise_class), inputs=dict(record.inputs), options=dict(record.options),
        fingerprint={**record.fingerprint, "runtime": runtime}, command=["test", f"x{scale:g}"],
        variants=list(record.variants), samples=[Sample.from_dict(s.to_dict()) for s in samples],
        created_at=record.created_at)
    path = folder / record_filename(made)
    path.write_bytes(made.canonical())
    return path, other


def test_a_failure_by_the_hardware_margin_is_borrowed_bounds_and_beyond_it_a_failure(tmp_path, embedded):
    case = resolve(load_descriptor(embedded.descriptor), ["hf-bf16"]).cases["hf-bf16"]
    own = next(r for r in case.records if r.sha256 == case.spec.calibration["sha256"])
    assert measured_on({"fingerprint": own.fingerprint}) in CLASSES  # the embedded default has one for this host
    near, other = _other_class_record(tmp_path, own, 0.5)  # crossed by up to about 2x: within the factor
    far, _ = _other_class_record(tmp_path, own, 0.5 / CROSS_CLASS_FACTOR)  # by up to about 6x: beyond it
    base = {k: v for k, v in embedded.doc["cases"]["hf-bf16"].items() if k not in ("calibration", "power")}
    cases = {"borrowed": {**base, "calibration": str(near)}, "far": {**base, "calibration": str(far)}}
    descriptor = write_descriptor(tmp_path, embedded, cases=cases)

    run_dir = tmp_path / "run"
    proc = parity_kit("gate", descriptor, "--out", run_dir, "--no-summary", "--junit", tmp_path / "junit.xml",
                      "--case", "borrowed")
    assert proc.returncode == 9, proc.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "borrowed-bounds"
    borrowed = result["cases"]["borrowed"]
    assert borrowed["status"] == "borrowed-bounds"
    assert borrowed["failures"] and all("> bound" in line for line in borrowed["failures"])
    assert borrowed["error"].startswith(f"failed only under bounds measured on {other}, this host is ")
    assert (f"not a regression until this host is measured: `parity-kit baseline make {descriptor} --case borrowed "
            '--reason "..."` (about ') in borrowed["error"]
    assert borrowed["triage"]["class"] == "borrowed-bounds"
    assert "gate borrowed-bounds" in proc.stderr
    skipped = {c.get("name"): c.find("skipped") for c in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    assert skipped["borrowed"].get("type") == "borrowed-bounds"
    md = (run_dir / "evidence.md").read_text()
    assert "**Parity gate `test`: borrowed-bounds.**" in md
    assert "- `borrowed` (hf): **failed under borrowed bounds**: failed only under bounds measured on" in md

    run_dir = tmp_path / "run-far"
    proc = parity_kit("gate", descriptor, "--out", run_dir, "--no-summary", "--case", "far")
    assert proc.returncode == 1, proc.stderr
    far_result = json.loads((run_dir / "result.json").read_text())["cases"]["far"]
    assert far_result["status"] == "failed"
    assert far_result["triage"]["class"] == "numeric"
    assert far_result["notes"][-1].endswith(f"the failure is not one that the difference between classes explains "
                                            f"(more than {CROSS_CLASS_FACTOR:g}x a bound, or not a bound's): it stands")
