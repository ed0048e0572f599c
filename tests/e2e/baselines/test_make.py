"""`baseline make` end to end: on a host class the descriptor has no baselines for, status shows the gap, make
closes it (an exact golden and a calibration record, each backtested and checked by an evidence gate, then placed
with its lineage) and the gate then passes; a bless that would pass a known fault of the catalogue is refused, and
nothing is placed."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import sys
from pathlib import Path

import pytest

from kit.baselines import make
from kit.calibrate.run import CaseCalibration, write_record
from kit.core.calibration import CalibrationRecord, Sample, load_record
from kit.core.runtime import accelerator
from support import golden_made_on, parity_kit, write_descriptor
from support.targetsite import target_site

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from unit.baselines.test_status import ELSEWHERE_RUNTIME, hf_case, record_elsewhere  # noqa: E402

pytestmark = pytest.mark.e2e


def no_baselines_here(tmp_path: Path, embedded) -> Path:
    """The embedded checkpoint and hf-bf16 cases as a host of an unseen class finds them: the exact golden made
    on another runtime only, the record measured on another class of CPU, no fallback accepted."""
    other = golden_made_on(embedded.goldens["exact"], tmp_path / "goldens" / "exact-elsewhere.json", "a host",
                           ELSEWHERE_RUNTIME)
    record = record_elsewhere(embedded, tmp_path / "calibrations")
    cases = {"checkpoint": {**embedded.doc["cases"]["checkpoint"], "cpu_kernels": "native"},
             "hf-bf16": hf_case(embedded, [str(record)], accept_noise_changes=[])}
    return write_descriptor(tmp_path, embedded, goldens={"semantic": embedded.goldens["semantic"], "exact": [other]},
                            cases=cases, baselines={"lineage": str(tmp_path / "lineage"),
                                                    "calibrations": str(tmp_path / "calibrations"),
                                                    "goldens": str(tmp_path / "goldens")})


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


@pytest.mark.timeout(900)
def test_on_a_host_with_no_baselines_make_closes_the_gap_and_the_gate_then_passes(tmp_path, embedded,
                                                                                   tmp_path_factory):
    desc = no_baselines_here(tmp_path, embedded)
    status = parity_kit("baseline", "status", str(desc), "--json")
    assert status.returncode == 7, status.stderr
    assert {(r["case"], r["kind"]) for r in json.loads(status.stdout) if r["standing"] == "missing"} == {
        ("checkpoint", "exact-golden"), ("hf-bf16", "calibration")}
    before = {f: files(tmp_path / f) for f in ("goldens", "calibrations")}
    (tmp_path / "runs").mkdir()

    proc = parity_kit("baseline", "make", str(desc), "--reason", "a CPU class with no baselines", "--archive",
                      str(tmp_path / "runs"), "--out", str(tmp_path / "work"), timeout=850)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "blessed: evidence in" in proc.stdout
    record = json.loads((tmp_path / "work" / "baseline.json").read_text())
    assert record["blessed"] and record["gate"]["verdict"] == "passed" and record["refusals"] == []
    assert (tmp_path / "work" / "evidence.html").is_file() and (tmp_path / "work" / "evidence.md").is_file()
    # The evidence page renders from the notebook stack as a GPU node installs it, too (support.targetsite).
    (tmp_path / "target").mkdir()
    notebook = Path(shutil.copy(tmp_path / "work" / "evidence.ipynb", tmp_path / "target"))
    rendered = target_site(tmp_path_factory).render(notebook)
    assert rendered.error is None, rendered.error
    page = rendered.html.read_text(encoding="utf-8")
    assert "Baselines blessed" in page and "Evidence gate: <b>passed</b>" in page
    # Never over anything: every earlier file is as it was, and the new ones sit beside them.
    for folder, was in before.items():
        now = files(tmp_path / folder)
        assert {k: now[k] for k in was} == was and len(now) == len(was) + 1
    entries = [json.loads(p.read_text()) for p in (tmp_path / "lineage").glob("*.json")]
    assert sorted((e["kind"], e["reason"], e["supersedes"]) for e in entries) == [
        ("calibration", "a CPU class with no baselines", None), ("exact-golden", "a CPU class with no baselines", None)]
    cal = next(e for e in entries if e["kind"] == "calibration")
    assert cal["runtime"] == accelerator("cpu")["name"] and cal["backtest"]["evidence_gate"] == "passed"

    after = parity_kit("baseline", "status", str(desc), "--json")
    assert after.returncode == 0, after.stderr
    assert {r["standing"] for r in json.loads(after.stdout)} == {"matches"}
    gate = parity_kit("gate", str(desc), "--out", str(tmp_path / "runs" / "gate"))
    assert gate.returncode == 0, gate.stdout[-2000:] + gate.stderr[-2000:]


def loose_record(honest: CalibrationRecord, errors: dict[str, float], shifts: dict[str, float]) -> CalibrationRecord:
    """A record as a calibration run on a broken build would measure it: its clean variants carry the fault's
    errors, so its bounds are wide enough to pass the fault."""
    rng = random.Random(7)
    samples = [Sample(f"variant-{i}", 1, 1, {p: e * (1 + 0.05 * rng.random()) for p, e in errors.items()},
                      dict(shifts)) for i in range(7)]
    buckets = {p: v["bucket"] for p, v in honest.prompts.items()}
    fields = {f.name: getattr(honest, f.name) for f in dataclasses.fields(honest)
              if f.name not in ("samples", "prompts", "buckets", "drift", "path")}
    return CalibrationRecord.measured(buckets=buckets, **{**fields, "samples": samples,
                                                          "created_at": "2026-12-02T12:00:00+00:00"})


@pytest.mark.timeout(900)
def test_a_bless_that_would_pass_a_known_fault_of_the_catalogue_is_refused(tmp_path, embedded, monkeypatch):
    # A gate run of the hf-bf16 case on a copy with a fault of the catalogue: known bad, whatever its verdict said.
    copy = tmp_path / "faulted"
    inject = parity_kit("fault", "inject", "logit_scale", "0.2", "--model", str(embedded.model), "--out", str(copy))
    assert inject.returncode == 0, inject.stderr
    from kit.core.modeldigest import model_digest

    faulted = {"faulted": {"path": str(copy), "digest": model_digest(copy)}}
    broken = {**hf_case(embedded, None), "model": "faulted", "bound": 0.075}  # the hand-set bound of old
    broken.pop("calibration")
    broken.pop("accept_noise_changes", None)
    archive_desc = write_descriptor(tmp_path / "archive", embedded, cases={"hf-bf16": broken},
                                    models={**embedded.models, **faulted})
    ran = parity_kit("gate", str(archive_desc), "--out", str(tmp_path / "runs" / "faulted"))
    assert ran.returncode == 1, ran.stderr  # the fault fails the hand-set bound
    result = json.loads((tmp_path / "runs" / "faulted" / "cases" / "hf-bf16.json").read_text())
    errors = {p["id"]: p["max_probability_error"] for p in result["prompts"]}
    shifts = {p["id"]: p["top_probability_shift"] for p in result["prompts"]}

    # The case as this host has it, blessed again from a calibration that measured the broken build's errors.
    here = accelerator("cpu")["name"]
    honest_path = record_elsewhere(embedded, tmp_path / "calibrations", here)
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": hf_case(embedded, [str(honest_path)])},
                            baselines={"lineage": str(tmp_path / "lineage"),
                                       "calibrations": str(tmp_path / "calibrations")})
    loose = loose_record(load_record(honest_path), errors, shifts)

    def calibrate_broken(plan, spec, run_dir, to, command):
        path = write_record(loose, Path(to))
        return CaseCalibration(spec.name, load_record(path), path)

    monkeypatch.setattr(make, "calibrate_case", calibrate_broken)
    before = files(tmp_path / "calibrations")
    outcome = make.make_baselines(desc, ["hf-bf16"], reason="torch 2.14", again=True,
                                  archives=[tmp_path / "runs"], out=tmp_path / "work")
    assert not outcome.blessed and outcome.written == [] and outcome.gate_verdict is None
    source = f"{tmp_path / 'runs' / 'faulted'}"
    assert any(line.startswith("hf-bf16: backtest: ") and source in line and "known bad (a gate run of a "
               "fault-catalogue copy" in line and "would pass under the new record" in line
               for line in outcome.refusals), outcome.refusals
    # Its clean samples are known good too: the broken build's record would fail them (its drift test), which a
    # person would have to accept; the known-bad pass alone refuses it.
    assert any("known good (a clean calibration sample of record" in line for line in outcome.refusals)
    assert files(tmp_path / "calibrations") == before  # nothing placed
    assert not (tmp_path / "lineage").exists()  # and no lineage written
    assert "refused" in (tmp_path / "work" / "evidence.md").read_text()
