"""The archive a backtest replays: every readable observation of a case under folders of runs, what is known of
each verdict and why, the figures a replay needs, and one line for each run that cannot be read."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from kit.baselines.archive import MISSING, Known, read_archive
from kit.core.records.rundir import RunRole
from kit.baselines.marks import mark_bad, read_mark
from kit.core.model import faultcopy
from kit.core.records import rundir
from kit.core.noise.calibration import CalibrationRecord
from kit.core.errors import BadInput
from kit.core.records.jsonio import canonical_bytes, write_json
from kit.core.model.modeldigest import model_digest
from kit.core.records.paths import display
from kit.core.records.records import CaseResult
from kit.descriptor.load import load_descriptor
from kit.gate import executor
from support import write_descriptor
from support.archive import (CASE, ELSEWHERE, FAULT, FAULTY, HERE, case_result, record, sample, write_control,
                             write_run)

pytestmark = pytest.mark.unit

OLD = [{"a": 0.010, "b": 0.012, "c": 0.014}, {"a": 0.011, "b": 0.011, "c": 0.013},
       {"a": 0.012, "b": 0.013, "c": 0.012}]
FAILING = {"a": 0.05, "b": 0.011, "c": 0.013}  # "a" over its bound of 0.017


def by_source(archive) -> dict:
    return {o.source: o for o in archive.observations}


def result_file(run_dir) -> str:
    return display(run_dir / rundir.CASES / f"{CASE}.json")


def test_each_observation_says_what_it_is_and_what_is_known_of_its_verdict(tmp_path):
    old = record(OLD)
    runs = tmp_path / "runs"
    passed = write_run(runs / "passed", case_result(OLD[1], old))
    failed = write_run(runs / "failed", case_result(FAILING, old))
    marked = write_run(runs / "marked", case_result(OLD[1], old))
    mark_bad(marked, "the node's GPU 3 had ECC errors that week")
    fault = write_run(runs / "fault", case_result(FAILING, old, model=FAULTY), model_faults={FAULTY: FAULT})
    nested = write_run(runs / "bisect-x" / "steps" / "step-1", case_result(OLD[1], old))
    control = write_control(runs / "control-x", case_result(OLD[1], old), case_result(FAILING, old), "regression")
    qualified = write_control(runs / "control-y", case_result(OLD[1], old), case_result(OLD[1], old), "qualified")
    write_run(runs / ".trash" / "old", case_result(OLD[1], old))  # hidden: not looked into
    other = case_result(OLD[1], old)
    other = dataclasses.replace(other, case="another-case")
    write_run(runs / "other", other)  # lists no run of this case

    # Overlapping roots name a run once, and a control's side named as a root is still its control's.
    archive = read_archive([runs / "passed", control / "candidate", runs], CASE)
    seen = {o.source: (o.kind, o.known, o.why, o.status) for o in archive.observations}
    gate, current, candidate = RunRole.GATE_RUN, RunRole.CONTROL_CURRENT, RunRole.CONTROL_CANDIDATE
    good, bad, unknown = Known.GOOD, Known.BAD, Known.UNKNOWN
    assert seen == {
        result_file(passed): (gate, good, "a passed gate run", "passed"),
        result_file(failed): (gate, unknown, "a failed gate run, not known bad", "failed"),
        result_file(marked): (gate, bad, "marked bad: the node's GPU 3 had ECC errors that week", "passed"),
        result_file(fault): (gate, bad, "a gate run of a fault-catalogue copy (fault rope_base at 0.05)", "failed"),
        result_file(nested): (gate, good, "a passed gate run", "passed"),
        result_file(control / "current"): (current, good, "a passed current-pin run of a control", "passed"),
        result_file(control / "candidate"): (
            candidate, bad, f"the candidate of a control that found a regression ({display(control)})", "failed"),
        result_file(qualified / "current"): (current, good, "a passed current-pin run of a control", "passed"),
        result_file(qualified / "candidate"): (candidate, good, "a passed candidate run of a control", "passed"),
    }
    assert archive.unreadable == ()


def test_the_figures_are_the_recorded_ones_without_any_bound_line(tmp_path):
    old = record(OLD)
    result = case_result(FAILING, old, missing=("b",))
    assert result.prompts[0].failures == ["a: max probability error 0.05 > bound 0.017 (bucket 128)"]
    run = write_run(tmp_path / "run", result)
    obs = read_archive([run], CASE).observations[0]
    assert obs.errors == pytest.approx(FAILING) and obs.shifts == pytest.approx({p: -e for p, e in FAILING.items()})
    assert obs.buckets == {"a": 128, "b": 128, "c": 256}
    # The missing token holds under any bound; the bound's own line is the replay's to say again.
    assert obs.kept_failures == ["b: golden token 3 is missing from the backend's top-3"]
    assert obs.prompts[0].failures == () and obs.other_failures == ()
    assert (obs.fixture_sha256, obs.golden_sha256, obs.model_digest) == (old.inputs["fixture_sha256"],
                                                                         old.inputs["golden_sha256"],
                                                                         old.inputs["model_digest"])


def test_the_hardware_a_run_computed_on_is_read_where_the_result_says_it(tmp_path):
    old = record(OLD)
    here = write_run(tmp_path / "here", case_result(OLD[1], old))
    elsewhere = write_run(tmp_path / "elsewhere", case_result(OLD[1], old, ran_on=ELSEWHERE))
    unsaid = case_result(OLD[1], old, ran_on=ELSEWHERE)
    unsaid = dataclasses.replace(unsaid, devices=[])  # a CPU case, or the Ray executor's: no GPU was named to it
    unsaid = write_run(tmp_path / "unsaid", unsaid)
    got = {o.source: o.hardware for o in read_archive([tmp_path], CASE).observations}
    # Its drift test ran: the kernel runs it only on the class its record measured. Else the GPU it was given.
    assert got == {result_file(here): HERE, result_file(elsewhere): ELSEWHERE, result_file(unsaid): None}


def test_the_superseded_records_distinct_samples_are_known_good(tmp_path):
    old = record([*OLD, OLD[0]])  # a deterministic repeat counts once
    archive = read_archive([tmp_path], CASE, superseded=old)
    assert [(o.kind, o.known, o.why, o.status, o.hardware) for o in archive.observations] == [
        (RunRole.CALIBRATION_SAMPLE, Known.GOOD, f"a clean calibration sample of record {old.sha256[:12]}", "passed",
         HERE)] * 3
    assert archive.observations[1].source == f"calibration record {old.sha256[:12]} sample v1 (launch 1, repeat 1)"
    assert archive.observations[2].errors == OLD[2]


def test_a_case_the_run_did_not_finish_is_an_observation_without_figures(tmp_path):
    run = write_run(tmp_path / "run", case_result(OLD[1], record(OLD)))
    (run / rundir.CASES / f"{CASE}.json").unlink()
    (obs,) = read_archive([run], CASE).observations
    assert (obs.status, obs.prompts, obs.source) == (MISSING, (), result_file(run))


def test_a_truncated_case_result_is_unreadable_naming_its_file_and_what_is_wrong(tmp_path):
    good = write_run(tmp_path / "runs" / "good", case_result(OLD[1], record(OLD)))
    cut = write_run(tmp_path / "runs" / "cut", case_result(OLD[1], record(OLD)))
    path = cut / rundir.CASES / f"{CASE}.json"
    path.write_bytes(path.read_bytes()[:200])
    archive = read_archive([tmp_path / "runs"], CASE)
    assert [o.source for o in archive.observations] == [result_file(good)]
    (unreadable,) = archive.unreadable
    assert unreadable.source == display(cut)
    assert unreadable.reason.startswith(f"{display(path)} is not valid JSON: ")


def test_damaged_records_beside_the_result_make_the_run_unreadable_too(tmp_path):
    old = record(OLD)
    marked = write_run(tmp_path / "marked", case_result(OLD[1], old))
    write_json(marked / rundir.BAD_MARK, {"format": "parity-kit-bad/1", "reason": "", "marked_at": "2026-12-01",
                                          "kit_version": "0"})
    control = write_control(tmp_path / "control", case_result(OLD[1], old), case_result(OLD[1], old), "qualified")
    write_json(control / rundir.CONTROL, {"current": "current", "candidate": "candidate", "runs": {"current": "../x"}})
    reasons = {u.source: u.reason for u in read_archive([tmp_path], CASE).unreadable}
    assert reasons == {
        display(control): f"{display(control / rundir.CONTROL)}: malformed control record: runs.candidate: expected "
                          "a non-empty string, got None",
        display(marked): f"{display(marked / rundir.BAD_MARK)}: malformed bad mark: reason: expected a non-empty "
                        "string, got ''",
    }


def test_a_root_that_is_no_folder_is_refused(tmp_path):
    with pytest.raises(BadInput, match="no folder of runs to backtest on"):
        read_archive([tmp_path / "nowhere"], CASE)


def test_a_mark_needs_a_reason_and_is_never_overwritten(tmp_path):
    run = write_run(tmp_path / "run", case_result(OLD[1], record(OLD)))
    for reason in ("", "   "):
        with pytest.raises(BadInput, match="a run is marked bad with a reason"):
            mark_bad(run, reason)
    with pytest.raises(BadInput, match="a bad mark's reason is one line"):
        mark_bad(run, "two\nlines")
    with pytest.raises(BadInput, match=r"not a gate run directory \(no manifest.json\)"):
        mark_bad(tmp_path, "no run here")
    assert read_mark(run) is None and not (run / rundir.BAD_MARK).exists()

    first = mark_bad(run, "release 2.3 miscompiled the attention kernel")
    written = (run / rundir.BAD_MARK).read_bytes()
    assert written == canonical_bytes(json.loads(written))  # canonical JSON, as every record
    with pytest.raises(BadInput) as again:
        mark_bad(run, "something else")
    assert str(again.value) == (f"{display(run / rundir.BAD_MARK)}: the run is already marked bad (reason: release "
                                "2.3 miscompiled the attention kernel); a mark is never overwritten")
    assert (run / rundir.BAD_MARK).read_bytes() == written
    assert read_mark(run) == first and first.reason == "release 2.3 miscompiled the attention kernel"
    assert [p.name for p in run.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_manifest_from_before_fault_records_is_answered_by_its_model_folder(tmp_path):
    old = record(OLD)
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / faultcopy.FILE).write_bytes(canonical_bytes(FAULT))
    run = write_run(tmp_path / "runs" / "old", case_result(FAILING, old, model=FAULTY), model=str(folder),
                    model_digest=FAULTY)
    (obs,) = read_archive([tmp_path / "runs"], CASE).observations
    assert (obs.known, obs.why) == (Known.BAD, "a gate run of a fault-catalogue copy (fault rope_base at 0.05)")
    manifest = json.loads((run / rundir.MANIFEST).read_text())
    write_json(run / rundir.MANIFEST, {**manifest, "model_faults": {}})  # a manifest that records none: not one
    assert read_archive([tmp_path / "runs"], CASE).observations[0].known == Known.UNKNOWN


def test_fault_copies_are_found_by_their_provenance_and_a_damaged_one_is_said(tmp_path):
    clean, copy, damaged = (tmp_path / n for n in ("clean", "copy", "damaged"))
    for folder in (clean, copy, damaged):
        folder.mkdir()
    (copy / faultcopy.FILE).write_bytes(canonical_bytes(FAULT))
    (damaged / faultcopy.FILE).write_text('{"format": "parity-kit-fault/1"}')
    found = faultcopy.model_faults([(clean, "1" * 64), (copy, "2" * 64), (damaged, "3" * 64)])
    assert found == {"2" * 64: FAULT, "3" * 64: {
        "unreadable": f"{display(damaged / faultcopy.FILE)}: malformed fault provenance: fault: missing"}}


def test_the_gate_manifest_records_a_fault_copys_provenance_by_its_digest(tmp_path, embedded):
    copy = tmp_path / "copy"
    shutil.copytree(embedded.model, copy)
    (copy / faultcopy.FILE).write_bytes(canonical_bytes(FAULT))
    digest = model_digest(copy)
    desc = load_descriptor(write_descriptor(tmp_path, embedded, model=copy, model_digest=digest))
    run = executor.prepare_run(desc, tmp_path / "run", only=["checkpoint"])
    try:
        assert executor.manifest(run, ["gate"])["model_faults"] == {digest: FAULT}
    finally:
        run.lock.release()


def test_records_built_here_are_the_kits_own():
    """The synthetic records are what the kit writes: a result round-trips, a record re-derives its bounds."""
    old = record(OLD)
    result = case_result(OLD[1], old)
    assert CaseResult.from_dict(json.loads(json.dumps(result.to_dict()))).to_dict() == result.to_dict()
    assert CalibrationRecord.from_dict(old.to_dict()).bounds == old.bounds == {"128": 0.017, "256": 0.018}
    assert sample("v", {"a": 0.1}).shifts == {"a": -0.1}


def test_a_stray_manifest_at_the_root_hides_no_known_bad_run(tmp_path):
    old = record(OLD)
    runs = tmp_path / "runs"
    write_json(runs / rundir.MANIFEST, {"stray": "a manifest copied here by hand"})
    marked = write_run(runs / "marked", case_result(FAILING, old))
    mark_bad(marked, "a fault")
    archive = read_archive([runs], CASE)
    assert [o.known for o in archive.observations] == [Known.BAD]
    assert [u.source for u in archive.unreadable] == [display(runs)]


def test_a_known_bad_run_behind_a_link_or_deep_is_read_once_and_a_hidden_one_is_said(tmp_path, caplog):
    old = record(OLD)
    runs = tmp_path / "runs"
    deep = write_run(runs.joinpath(*"abcdefg"), case_result(FAILING, old))
    mark_bad(deep, "seven folders down")
    (runs / "alias").symlink_to(runs / "a", target_is_directory=True)
    (runs / "a" / "loop").symlink_to(runs, target_is_directory=True)
    write_run(runs / ".trash" / "old", case_result(FAILING, old))
    with caplog.at_level("WARNING", logger="kit.baselines.archive"):
        archive = read_archive([runs], CASE)
    assert [(o.known, o.why) for o in archive.observations] == [(Known.BAD, "marked bad: seven folders down")]
    hidden = [s for s in archive.skipped if s.source == display(runs / ".trash")]
    assert hidden and "a hidden folder: not looked into" in hidden[0].reason
    assert "a hidden folder: not looked into" in caplog.text


def test_the_mark_bad_command_marks_the_run_and_says_where(tmp_path, capsys):
    from kit.cli import main

    run = write_run(tmp_path / "run", case_result(OLD[1], record(OLD)))
    assert main(["baseline", "mark-bad", str(run), "--reason", "the node's fan failed"]) == 0
    assert capsys.readouterr().out.strip() == f"marked {display(run / rundir.BAD_MARK)}"
    assert read_mark(run).reason == "the node's fan failed"


def test_baseline_verify_backtests_each_record_again_and_names_a_known_bad_run_it_would_pass(tmp_path):
    import os

    from kit.baselines.verify import backtest_problems
    from kit.core.records.jsonio import atomic_write_bytes
    from kit.core.baselines.baselinekind import CALIBRATION
    from kit.core.baselines.lineage import LineageEntry

    old = record(OLD)
    runs = tmp_path / "runs"
    marked = write_run(runs / "marked", case_result({"a": 0.03, "b": 0.011, "c": 0.013}, old))
    mark_bad(marked, "a miscompiled attention kernel")
    write_run(runs / "passed", case_result(OLD[1], old))
    lineage = tmp_path / "lineage"
    entries = []
    for name, r in (("tight", old), ("loose", record([*OLD, {"a": 0.05, "b": 0.012, "c": 0.014}]))):
        path = atomic_write_bytes(tmp_path / "calibrations" / f"{r.sha256}.json", canonical_bytes(r.to_dict()))
        entries.append(LineageEntry("test", CALIBRATION, CASE, r.sha256, os.path.relpath(path, lineage), HERE,
                                    None, name, ("parity-kit",), "2026-12-05", dict(r.bounds), {"replayed": 2,
                                                                                               "flips": 0}))
    assert backtest_problems(entries[:1], lineage, [runs]) == []
    (problem,) = backtest_problems(entries[1:], lineage, [runs])
    assert problem == (f"lineage entry {display(lineage)}: backtest over {display(runs)}: {result_file(marked)}: "
                       "known bad (marked bad: a miscompiled attention kernel), would pass under its record")


def test_a_decode_check_keeps_each_steps_error_and_an_older_one_says_it_kept_none():
    from kit.baselines.archive import from_result
    from kit.core.records.records import DecodeScore

    ran = case_result({"a": 0.01, "b": 0.01, "c": 0.01}, record([{"a": 0.01, "b": 0.01, "c": 0.01}] * 6))
    stepped = DecodeScore("a", 128, 3, 3, True, float("nan"), step_errors=[0.01, None, 0.02])  # None: JSON's NaN
    older = DecodeScore("b", 128, 3, 3, True, 0.02)
    obs = from_result(dataclasses.replace(ran, decode=[stepped, older]), "x", RunRole.GATE_RUN, Known.GOOD,
                      "a passed gate run")
    (a, b) = obs.decode
    assert a.steps[0] == 0.01 and a.steps[2] == 0.02 and a.steps[1] != a.steps[1]  # the NaN kept as NaN
    assert b.steps is None
