"""`baseline make` refuses bad input in one line before it makes anything (an empty reason, no lineage folder, an
archive it cannot read), makes nothing where nothing is missing, runs its evidence gate over every backend on the
goldens it touched, and a lineage head whose record does not fit its descriptor is refused by the preflight."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from kit.baselines import make
from kit.baselines.make import MakeRequest
from kit.core.noise.calibration import load_record
from kit.core.errors import BadInput
from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes
from kit.core.baselines.lineage import write_entry
from kit.core.host.runtime import accelerator
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from support import parity_kit, write_descriptor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from unit.baselines.test_status import ELSEWHERE_CPU, entry_for, hf_case, record_elsewhere  # noqa: E402

pytestmark = pytest.mark.unit


def missing_record(tmp_path, embedded) -> Path:
    """hf-bf16 with a record of another class of CPU only, and a lineage folder: one gap to close."""
    record = record_elsewhere(embedded, tmp_path / "calibrations")
    return write_descriptor(tmp_path, embedded, cases={"hf-bf16": hf_case(embedded, [str(record)],
                                                                         accept_noise_changes=[])},
                            baselines={"lineage": str(tmp_path / "lineage")})


def test_an_empty_reason_or_no_lineage_folder_is_refused_before_anything(tmp_path, embedded):
    desc = missing_record(tmp_path, embedded)
    with pytest.raises(BadInput, match=re.escape("--reason: empty; a baseline keeps why it was made")):
        make.make_baselines(MakeRequest(desc, reason="  ", out=tmp_path / "work"))
    bare = write_descriptor(tmp_path / "bare", embedded, cases={"hf-bf16": hf_case(embedded, [str(
        record_elsewhere(embedded, tmp_path / "cal2"))], accept_noise_changes=[])})
    with pytest.raises(BadInput, match=r"no \[baselines\] table; `baseline make` writes a lineage entry"):
        make.make_baselines(MakeRequest(bare, reason="new host", out=tmp_path / "work"))
    assert not (tmp_path / "work").exists()
    proc = parity_kit("baseline", "make", str(desc), "--reason", "", "--out", str(tmp_path / "work"))
    assert proc.returncode == 3 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "lineage").exists()


def test_an_archive_run_that_cannot_be_read_is_bad_input_unless_skipped(tmp_path, embedded, monkeypatch):
    desc = missing_record(tmp_path, embedded)
    broken = tmp_path / "runs" / "broken"
    (broken / "cases").mkdir(parents=True)
    (broken / "manifest.json").write_text(json.dumps({"name": "test", "cases": ["hf-bf16"]}))
    (broken / "cases" / "hf-bf16.json").write_text('{"case": "hf-bf16", "status": "pass')  # cut off
    with pytest.raises(BadInput) as refused:
        make.make_baselines(MakeRequest(desc, reason="new host", archives=[tmp_path / "runs"], out=tmp_path / "work"))
    line = str(refused.value)
    assert "\n" not in line and str(broken) in line and "cannot be read for the backtest of hf-bf16" in line
    assert line.endswith("give --skip-unreadable to backtest without it")
    assert not (tmp_path / "work").exists()

    def stop(*args, **kwargs):  # past the archive: what follows needs an engine, which this tier never starts
        raise RuntimeError("calibrating")

    monkeypatch.setattr(make, "calibrate_case", stop)
    with pytest.raises(RuntimeError, match="calibrating"):
        make.make_baselines(MakeRequest(desc, reason="new host", archives=[tmp_path / "runs"], skip_unreadable=True,
                            out=tmp_path / "work"))


def test_nothing_missing_means_nothing_made(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"checkpoint": embedded.doc["cases"]["checkpoint"]},
                            baselines={"lineage": str(tmp_path / "lineage")})
    outcome = make.make_baselines(MakeRequest(desc, reason="nothing to do", out=tmp_path / "work"))
    assert outcome.made == [] and outcome.work_dir is None and not outcome.blessed
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("statuses, refused", [
    ({"hf-bf16": "passed", "checkpoint": "passed", "vllm-pp1": "no-baseline"}, []),  # not asked: no refusal
    ({"hf-bf16": "no-baseline", "checkpoint": "passed", "vllm-pp1": "passed"}, ["hf-bf16"]),  # asked, not made
    ({"hf-bf16": "passed", "checkpoint": "failed", "vllm-pp1": "no-baseline"}, ["checkpoint"]),
    ({"hf-bf16": "passed", "checkpoint": "inconclusive", "vllm-pp1": "passed"}, ["checkpoint"]),
    ({"hf-bf16": "passed", "checkpoint": "borrowed-bounds", "vllm-pp1": "passed"}, ["checkpoint"]),
    ({"hf-bf16": "passed", "vllm-pp1": "passed"}, ["checkpoint"]),  # no result at all: incomplete
])
def test_the_evidence_gate_judges_every_case_and_only_an_unmade_case_not_asked_for_may_lack_a_baseline(
        tmp_path, embedded, monkeypatch, statuses, refused):
    from kit.baselines.steps import StepClock
    from kit.core.records.records import CaseResult

    cases = {n: embedded.doc["cases"][n] for n in ("checkpoint", "hf-bf16", "vllm-pp1")}
    desc = load_descriptor(write_descriptor(tmp_path, embedded, cases=cases,
                                            baselines={"lineage": str(tmp_path / "lineage")}))
    plan = resolve(desc, ["hf-bf16"])  # asked for hf-bf16 alone
    asked: list = []

    class Run:
        run_dir, verdict = tmp_path / "gate", "whatever the gate said"
        results = {n: CaseResult(case=n, backend="hf", status=s, error=f"{n} {s}") for n, s in statuses.items()}

    def gate_once(request, command, jobs):
        asked.append((request.only, request.out, request.resume, sorted(request.source.cases)))
        return Run()

    monkeypatch.setattr(make, "gate_once", gate_once)
    making = make.Making(desc, plan, tmp_path, ["parity-kit", "baseline", "make"], StepClock(tmp_path, 1), None)
    outcome = make._evidence_gate(making, None, make.MakeOutcome(tmp_path, [], []))
    assert asked == [(None, tmp_path / "gate", None, ["checkpoint", "hf-bf16", "vllm-pp1"])]  # every case
    if refused:
        assert outcome.refusals == [f"evidence gate whatever the gate said with the new baselines "
                                    f"({', '.join(refused)}): see {tmp_path / 'gate'}"]
    else:
        assert outcome.refusals == [] and outcome.not_judged == {"vllm-pp1": "vllm-pp1 no-baseline"}
    # Timed as a step of its own, kept for the next call.
    from kit.baselines.steps import read_times
    assert [(t.step, t.finished) for t in read_times(tmp_path)] == [("evidence gate", True)]


def test_a_lineage_head_whose_record_does_not_fit_the_descriptor_is_refused(tmp_path, embedded):
    here = accelerator("cpu")["name"]
    listed = record_elsewhere(embedded, tmp_path / "calibrations", ELSEWHERE_CPU)
    doc = json.loads(record_elsewhere(embedded, tmp_path / "other", here).read_text())
    doc["inputs"]["golden_sha256"] = "0" * 64  # measured against another golden than the case's
    data = canonical_bytes(doc)
    stranger = atomic_write_bytes(tmp_path / "calibrations" / f"{sha256_bytes(data)}.json", data)
    lineage = tmp_path / "lineage"
    write_entry(lineage, entry_for(stranger, lineage))
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": hf_case(embedded, [str(listed)])},
                            baselines={"lineage": str(lineage)})
    assert load_record(stranger).inputs["golden_sha256"] == "0" * 64
    proc = parity_kit("check", str(desc), "--case", "hf-bf16")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert os.path.basename(stranger) in line and "it was made for golden 000000000000" in line


def test_resume_continues_only_an_interrupted_make_of_the_same_descriptor(tmp_path, embedded, monkeypatch):
    desc = missing_record(tmp_path, embedded)
    seen: list[Path] = []

    def interrupted(plan, spec, run_dir, to, command):  # the kill comes while the variants are measured
        seen.append(Path(run_dir))
        raise KeyboardInterrupt

    monkeypatch.setattr(make, "calibrate_case", interrupted)
    with pytest.raises(KeyboardInterrupt):
        make.make_baselines(MakeRequest(desc, reason="new host", out=tmp_path / "work"))
    assert json.loads((tmp_path / "work" / make.MAKING).read_text())["format"] == make.MAKING_FORMAT
    with pytest.raises(KeyboardInterrupt):
        make.make_baselines(MakeRequest(desc, reason="new host", resume=tmp_path / "work"))
    assert seen == [tmp_path / "work" / "calibrate"] * 2  # the same samples file: finished variants are kept

    with pytest.raises(BadInput, match=re.escape(f"--resume {tmp_path / 'runs'}: not a working directory of "
                                                 "`parity-kit baseline make` (no making.json in it)")):
        (tmp_path / "runs").mkdir()
        make.make_baselines(MakeRequest(desc, reason="new host", resume=tmp_path / "runs"))
    desc.write_text(desc.read_text() + "\n# edited since\n")
    with pytest.raises(BadInput, match="start afresh"):
        make.make_baselines(MakeRequest(desc, reason="new host", resume=tmp_path / "work"))


def test_an_installed_packages_own_descriptor_is_not_written_into(embedded, monkeypatch, tmp_path):
    from kit.core.records import paths

    monkeypatch.setattr(paths, "CHECKOUT", None)  # as a wheel install sees it: the data root is the package's
    monkeypatch.setattr(paths, "DATA_ROOT", embedded.descriptor.parent.parent)
    with pytest.raises(BadInput, match="is the installed package's own descriptor; copy it with its data folders"):
        make.make_baselines(MakeRequest(embedded.descriptor, reason="new host", out=tmp_path / "work"))
    assert not (tmp_path / "work").exists()


def test_power_options_that_cannot_be_met_are_refused_before_anything(tmp_path, embedded):
    record = record_elsewhere(embedded, tmp_path / "calibrations")
    limited = write_descriptor(tmp_path, embedded, cases={"hf-bf16": hf_case(
        embedded, [str(record)], accept_noise_changes=[], detectable_limit=3)},
        baselines={"lineage": str(tmp_path / "lineage")})
    # Its limit is judged by a power record against the record this make would make: without power, never blessed.
    with pytest.raises(BadInput, match=re.escape("--no-power: case hf-bf16 is held to a detectable_limit of 3x, "
                                                 "which only a power record measured against its record here judges")):
        make.make_baselines(MakeRequest(limited, reason="new host", no_power=True, out=tmp_path / "work"))
    with pytest.raises(BadInput, match=r"^--power-family nope: no such family or fault"):
        make.make_baselines(MakeRequest(limited, reason="new host", power_families=["nope"], out=tmp_path / "work"))
    with pytest.raises(BadInput, match=r"--no-power with --power-family"):
        make.make_baselines(MakeRequest(limited, reason="new host", power_families=["output"], no_power=True,
                            out=tmp_path / "work"))
    assert not (tmp_path / "work").exists() and not (tmp_path / "lineage").exists()


def test_a_make_without_power_says_so_in_its_evidence():
    outcome = make.MakeOutcome(None, [], [], power=make._power_text(None, []))
    assert "- power: skipped (--no-power): no power record was measured" in make.evidence_markdown(outcome)


@pytest.mark.parametrize("left", ["nothing", "a run", "a directory cut before its manifest"])
def test_a_resumed_make_continues_the_evidence_gate_an_earlier_call_began(tmp_path, embedded, monkeypatch, left):
    from kit.baselines.steps import StepClock
    from kit.core.records import rundir
    from kit.core.records.records import CaseResult

    cases = {"checkpoint": embedded.doc["cases"]["checkpoint"]}
    desc = load_descriptor(write_descriptor(tmp_path, embedded, cases=cases,
                                            baselines={"lineage": str(tmp_path / "lineage")}))
    work = tmp_path / "work"
    if left != "nothing":
        (work / "gate").mkdir(parents=True)
    if left == "a run":
        (work / "gate" / rundir.MANIFEST).write_text("{}")
    calls: list = []

    class Run:
        run_dir, verdict = work / "gate", "passed"
        results = {"checkpoint": CaseResult(case="checkpoint", backend="hf", status="passed")}

    def gate_once(request, command, jobs):
        calls.append((request.out, request.resume))
        return Run()

    monkeypatch.setattr(make, "gate_once", gate_once)
    work.mkdir(exist_ok=True)
    making = make.Making(desc, resolve(desc), work, ["parity-kit"], StepClock(work, 1), None)
    make._evidence_gate(making, None, make.MakeOutcome(work, [], []))
    # Its finished cases whose inputs did not change are kept by the gate's own resume (kit.gate.resume).
    assert calls == {"nothing": [(work / "gate", None)], "a run": [(None, work / "gate")],
                     "a directory cut before its manifest": [(work / "gate-2", None)]}[left]
