"""`baseline make` end to end: on a host class the descriptor has no baselines for, status shows the gap, make
closes it (an exact golden, a calibration record and a power record against it, each checked by an evidence gate of
every case, then placed with its lineage) and the gate then passes; a make interrupted while it measures continues
where it stopped; a case it was not asked to make stands as no baseline in its evidence gate and refuses nothing; a
bless that would pass a known fault of the catalogue is refused, and nothing is placed."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import tomli_w

from kit.baselines import make
from kit.baselines.make import MakeRequest
from kit.calibrate.run import CaseCalibration, write_record
from kit.case.calibrate import finished
from kit.core.noise.calibration import CalibrationRecord, Sample, load_record
from kit.core.host.runtime import accelerator
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from kit.descriptor.standing import Standing
from support import ROOT, golden_made_on, parity_kit, power_against, write_descriptor
from support.targetsite import target_site

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from unit.baselines.test_status import ELSEWHERE_RUNTIME, hf_case, record_elsewhere  # noqa: E402

pytestmark = pytest.mark.e2e


def no_baselines_here(tmp_path: Path, embedded) -> Path:
    """The embedded checkpoint and hf-bf16 cases as a host of an unseen class finds them: the exact golden made
    on another runtime only, the record (and the power record measured against it) of another class of CPU, no
    fallback accepted; and a third case, like hf-bf16, that lacks a record too. hf-bf16 scores its 128 bucket
    alone: 16 prompts, which is all a make needs to show what it does."""
    other = golden_made_on(embedded.goldens["exact"], tmp_path / "goldens" / "exact-elsewhere.json", "a host",
                           ELSEWHERE_RUNTIME)
    record = record_elsewhere(embedded, tmp_path / "calibrations")
    listed_power = (embedded.descriptor.parent / embedded.doc["cases"]["hf-bf16"]["power"][0]).resolve()
    power = power_against(listed_power, record, tmp_path / "calibrations" / "power")
    cases = {"checkpoint": {**embedded.doc["cases"]["checkpoint"], "cpu_kernels": "native"},
             "hf-bf16": hf_case(embedded, [str(record)], accept_noise_changes=[], buckets=[128]),
             "hf-bf16-left": hf_case(embedded, [str(record)], accept_noise_changes=[], buckets=[128])}
    desc = write_descriptor(tmp_path, embedded, goldens={"semantic": embedded.goldens["semantic"], "exact": [other]},
                            cases=cases, baselines={"lineage": str(tmp_path / "lineage"),
                                                    "calibrations": str(tmp_path / "calibrations"),
                                                    "goldens": str(tmp_path / "goldens")})
    doc = tomllib.loads(desc.read_text())  # its power record stands with its record (the goldens are the same)
    doc["cases"]["hf-bf16"]["power"] = [str(power)]
    desc.write_text(tomli_w.dumps(doc))
    return desc


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}


def sample_files(work: Path) -> dict[str, bytes]:
    return {str(p.relative_to(work)): p.read_bytes() for p in sorted(work.glob("*/*.samples.jsonl"))}


def interrupted_once_power_is_measured(argv: list[str], work: Path, within_s: float = 800) -> subprocess.Popen:
    """The make, started as a user starts it and stopped with Ctrl-C once its power measurement has finished a
    faulted sample (its calibration and golden finished before)."""
    proc = subprocess.Popen([sys.executable, "-m", "kit.cli", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.read_text().count("\n") >= 1 for p in (work / "power").glob("*.samples.jsonl")):
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"the make ended before it was interrupted: {proc.communicate()[1][-3000:]}"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    return proc


@pytest.mark.timeout(1800)
def test_on_a_host_with_no_baselines_one_resumed_make_closes_the_gap_and_the_gate_then_passes(tmp_path, embedded,
                                                                                            tmp_path_factory):
    desc = no_baselines_here(tmp_path, embedded)
    status = parity_kit("baseline", "status", str(desc), "--json")
    assert status.returncode == 7, status.stderr
    assert {(r["case"], r["kind"]) for r in json.loads(status.stdout) if r["standing"] == Standing.MISSING} == {
        ("checkpoint", "exact-golden"), ("hf-bf16", "calibration"), ("hf-bf16-left", "calibration")}
    before = {f: files(tmp_path / f) for f in ("goldens", "calibrations", "calibrations/power")}
    (tmp_path / "runs").mkdir()
    work = tmp_path / "work"
    argv = ["baseline", "make", str(desc), "--case", "checkpoint", "--case", "hf-bf16", "--reason",
            "a CPU class with no baselines", "--power-family", "output", "--archive", str(tmp_path / "runs")]

    stopped = interrupted_once_power_is_measured([*argv, "--out", str(work)], work)
    assert stopped.returncode == 130
    assert not (tmp_path / "lineage").exists()  # nothing blessed, nothing placed
    kept = sample_files(work)
    staged = {f: files(work / f) for f in ("goldens", "calibrations")}
    assert any(k.startswith("calibrate/") for k in kept) and any(k.startswith("power/") for k in kept)
    assert all(len(v) == 1 for v in staged.values())  # the golden and the record, staged before the power

    proc = parity_kit(*argv, "--resume", str(work), timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "blessed: evidence in" in proc.stdout
    # Nothing finished was scored again: the staged golden and record are the same files, every samples file
    # kept what it had (appended to, never rewritten), and no variant was scored twice.
    assert {f: files(work / f) for f in ("goldens", "calibrations")} == staged
    now = sample_files(work)
    for name, was in kept.items():
        assert now[name].startswith(was), name
    for name in now:
        keys = [(e["sample"]["variant"], e["sample"]["launch"]) for e in finished(work / name)]
        assert len(keys) == len(set(keys)), name
    record = json.loads((work / "baseline.json").read_text())
    assert record["blessed"] and record["refusals"] == [] and record["calls"] == 2
    assert {(m["kind"], m["reused"]) for m in record["made"]} == {
        ("exact-golden", True), ("calibration", True), ("power", False)}
    # The case it was not asked for stands as no baseline in its evidence gate, and refuses nothing.
    assert record["gate"]["verdict"] == "no-baseline" and list(record["gate"]["not_judged"]) == ["hf-bf16-left"]
    steps = {(t["step"], t["subject"]): t for t in record["steps"]}
    assert steps[("power", "hf-bf16")]["calls"] == 2 and steps[("power", "hf-bf16")]["finished"]
    assert steps[("evidence gate", "")]["calls"] == 1 and record["wall_s"] > 0
    evidence = (work / "evidence.md").read_text()
    assert "### Time (2 calls)" in evidence and "| **total** |" in evidence
    assert "- hf-bf16-left: not judged here, not asked for: no baseline for this hardware" in evidence
    assert (work / "evidence.html").is_file() and (work / "evidence.md").is_file()
    # The evidence page renders from the notebook stack as a GPU node installs it, too (support.targetsite).
    (tmp_path / "target").mkdir()
    notebook = Path(shutil.copy(work / "evidence.ipynb", tmp_path / "target"))
    rendered = target_site(tmp_path_factory).render(notebook)
    assert rendered.error is None, rendered.error
    page = rendered.html.read_text(encoding="utf-8")
    assert "Baselines blessed" in page and "Evidence gate: <b>no-baseline</b>" in page
    # Never over anything: every earlier file is as it was, and the new ones sit beside them.
    for folder, was in before.items():
        now_files = files(tmp_path / folder)
        assert {k: now_files[k] for k in was} == was and len(now_files) == len(was) + 1, folder
    entries = [json.loads(p.read_text()) for p in (tmp_path / "lineage").glob("*.json")]
    assert sorted((e["kind"], e["case"], e["supersedes"]) for e in entries) == [
        ("calibration", "hf-bf16", None), ("exact-golden", "exact", None), ("power", "hf-bf16", None)]
    here = accelerator("cpu")["name"]
    assert {e["runtime"] for e in entries if e["kind"] != "exact-golden"} == {here}
    assert all(e["backtest"]["evidence_gate"] == "no-baseline" for e in entries)

    # The power record reaches the case through its lineage, measured against the new record, with no edit.
    spec = resolve(load_descriptor(desc), ["hf-bf16"]).cases["hf-bf16"].spec
    new_power = next(e for e in entries if e["kind"] == "power")
    assert spec.power["sha256"] == new_power["baseline"] and spec.power["same_class"]
    assert spec.power["record_sha256"] == spec.calibration["sha256"] == next(
        e["baseline"] for e in entries if e["kind"] == "calibration")
    assert set(spec.power["families"]) == {"output"}
    after = parity_kit("baseline", "status", str(desc), "--json")
    assert after.returncode == 7, after.stderr  # the case it was not asked for still has none
    assert {(r["case"], r["standing"]) for r in json.loads(after.stdout)} == {
        ("checkpoint", Standing.MATCH), ("hf-bf16", Standing.MATCH), ("hf-bf16-left", Standing.MATCH),
        ("hf-bf16-left", Standing.MISSING)}
    gate = parity_kit("gate", str(desc), "--case", "checkpoint", "--case", "hf-bf16", "--out",
                      str(tmp_path / "runs" / "gate"))
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
    from kit.core.model.modeldigest import model_digest

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
    outcome = make.make_baselines(MakeRequest(desc, ["hf-bf16"], reason="torch 2.14", again=True,
                                  archives=[tmp_path / "runs"], out=tmp_path / "work"))
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
