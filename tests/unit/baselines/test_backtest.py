"""The backtest: a new record replayed over the archive, every verdict it would turn listed, a known-bad run it
would pass refusing it and a known-good one it would fail waiting for acceptance; drift only on the hardware the
record measured; observations of other inputs skipped with their reason, unreadable runs counted."""

from __future__ import annotations

import dataclasses
import pytest

from kit.baselines.archive import PromptFigures, read_archive
from kit.baselines.backtest import NotReplayed, SkipKind, backtest, drift_left_out, replay
from kit.core.rules import rules
from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import canonical_bytes
from kit.core.records.paths import display
from support.archive import (CASE, ELSEWHERE, FAULT, FAULTY, GOLDEN, HERE, case_result, record, write_control,
                             write_run)

pytestmark = pytest.mark.unit

# Six clean variants of the case on HERE: bounds 0.016 (bucket 128) and 0.017 (bucket 256).
OLD = [{"a": 0.010, "b": 0.012, "c": 0.014}, {"a": 0.011, "b": 0.011, "c": 0.013},
       {"a": 0.012, "b": 0.013, "c": 0.012}, {"a": 0.011, "b": 0.012, "c": 0.013},
       {"a": 0.0105, "b": 0.0125, "c": 0.0135}, {"a": 0.0115, "b": 0.0115, "c": 0.0125}]
# Samples four times as noisy: bounds near 0.06, which a fault's 0.05 errors fit under.
LOOSE = [{p: e * 4.2 for p, e in s.items()} for s in OLD]
# Samples five times quieter: bounds near 0.003, which the clean 0.011 errors do not fit under.
TIGHT = [{p: e / 5 for p, e in s.items()} for s in OLD]
# Under every bound of OLD, and yet every prompt a little worse: only the drift test sees it.
DRIFTED = {"a": 0.014, "b": 0.014, "c": 0.015}


def result_file(run_dir) -> str:
    return display(run_dir / rundir.CASES / f"{CASE}.json")


def test_a_loose_record_that_would_pass_a_fault_run_is_refused_with_its_line(tmp_path):
    old, loose = record(OLD), record(LOOSE)
    ran = case_result(LOOSE[1], old, model=FAULTY)
    assert ran.status == "failed"  # the bounds it ran under caught the fault
    fault = write_run(tmp_path / "runs" / "fault", ran, model_faults={FAULTY: FAULT})
    archive = read_archive([tmp_path / "runs"], CASE)

    result = backtest(loose, archive)
    (flip,) = result.flips
    assert result.refusals == [flip] and result.needs_acceptance == []
    assert (flip.source, flip.known, flip.was, flip.now, flip.first) == (
        result_file(fault), "bad", "failed", "passed", "passes")
    assert result.failure_messages == [
        f"{result_file(fault)}: known bad (a gate run of a fault-catalogue copy (fault rope_base at 0.05)), failed "
        f"when it ran, would pass under record {loose.sha256[:12]}"]
    assert backtest(old, archive).flips == ()  # the record it ran under fails it still


def test_a_known_bad_run_that_passed_when_it_ran_still_refuses_a_record_that_passes_it(tmp_path):
    loose = record(LOOSE)
    ran = case_result(LOOSE[1], loose, model=FAULTY)
    assert ran.status == "passed"  # a bound too loose to see its fault, when it ran
    fault = write_run(tmp_path / "runs" / "fault", ran, model_faults={FAULTY: FAULT})
    result = backtest(loose, read_archive([tmp_path / "runs"], CASE))
    (flip,) = result.refusals
    assert (flip.source, flip.was, flip.now) == (result_file(fault), "passed", "passed")
    assert result.failure_messages[0].startswith(f"{result_file(fault)}: known bad (a gate run of a fault-catalogue "
                                                 "copy (fault rope_base at 0.05)), passed when it ran, would pass")


def test_a_tight_record_that_fails_a_clean_passed_run_needs_acceptance(tmp_path):
    old, tight = record(OLD), record(TIGHT)
    clean = write_run(tmp_path / "runs" / "clean", case_result(OLD[1], old))
    result = backtest(tight, read_archive([tmp_path / "runs"], CASE))
    first = f"a: max probability error 0.011 > bound {tight.bounds['128']:g} (bucket 128)"
    assert [(f.source, f.known, f.why, f.was, f.now, f.first) for f in result.needs_acceptance] == [
        (result_file(clean), "good", "a passed gate run", "passed", "failed", first)]
    assert result.refusals == []
    assert result.failure_messages == [
        f"{result_file(clean)}: known good (a passed gate run), passed when it ran, would fail under record "
        f"{tight.sha256[:12]}: {first}"]


def test_an_unchanged_record_turns_no_verdict(tmp_path):
    old = record(OLD)
    runs = tmp_path / "runs"
    write_run(runs / "clean", case_result(OLD[1], old))
    write_run(runs / "drifted", case_result(DRIFTED, old))
    write_run(runs / "fault", case_result(LOOSE[1], old, model=FAULTY), model_faults={FAULTY: FAULT})
    write_run(runs / "missing-token", case_result(OLD[1], old, missing=("b",)))
    write_control(runs / "control", case_result(OLD[2], old), case_result(LOOSE[2], old), "regression")
    archive = read_archive([runs], CASE, superseded=old)
    assert [o.status for o in archive.observations].count("failed") == 4

    result = backtest(record(OLD), archive)  # the same samples, measured again: the same record
    assert (result.replayed, result.flips, result.skipped, result.failure_messages) == (6 + 6, (), (), [])
    assert result.to_dict()["refusals"] == result.to_dict()["needs_acceptance"] == 0


def test_failures_no_bound_decides_hold_under_any_record(tmp_path):
    old, loose = record(OLD), record(LOOSE)
    # On other hardware, so that only the prompts judge it (the drift test would find it too exact for LOOSE).
    run = write_run(tmp_path / "run", case_result(OLD[1], old, missing=("b",), ran_on=ELSEWHERE))
    (obs,) = read_archive([run], CASE).observations
    assert replay(obs, loose) == ("failed", ["b: golden token 3 is missing from the backend's top-3"])
    assert backtest(loose, [obs]).flips == ()


def test_a_run_of_another_golden_is_skipped_with_its_reason(tmp_path):
    old = record(OLD)
    other = write_run(tmp_path / "other", case_result(OLD[1], record(OLD, golden="h" * 64), golden="h" * 64))
    result = backtest(old, read_archive([tmp_path], CASE))
    assert result.replayed == 0 and result.flips == ()
    assert result.skipped == (NotReplayed(result_file(other), f"another golden: the run used {'h' * 12}, the record "
                                                              f"was made for {GOLDEN[:12]}"),)
    with pytest.raises(BadInput, match=r"cannot be judged by record \w{12}: another golden"):
        replay(read_archive([tmp_path], CASE).observations[0], old)


def test_what_was_never_judged_is_skipped(tmp_path):
    run = write_run(tmp_path / "run", case_result(OLD[1], record(OLD)))
    (run / rundir.CASES / f"{CASE}.json").unlink()
    result = backtest(record(OLD), read_archive([run], CASE))
    assert result.skipped == (NotReplayed(result_file(run), "status missing when it ran: nothing was judged, so "
                                                            "nothing to replay"),)


def test_drift_judges_only_runs_on_the_hardware_the_record_measured(tmp_path):
    old = record(OLD)
    here = write_run(tmp_path / "here", case_result(DRIFTED, old))
    elsewhere = write_run(tmp_path / "elsewhere", case_result(DRIFTED, old, ran_on=ELSEWHERE))
    unsaid = case_result(DRIFTED, old, ran_on=ELSEWHERE)
    unsaid = dataclasses.replace(unsaid, devices=[])
    unsaid = write_run(tmp_path / "unsaid", unsaid)
    obs = {o.source: o for o in read_archive([tmp_path], CASE).observations}

    status, failures = replay(obs[result_file(here)], old)
    assert status == "failed" and drift_left_out(obs[result_file(here)], old) is None
    assert failures[0].startswith("drift: mean max probability error over 3 prompts grew to 0.01433, 1.19 x the "
                                  "calibrated 0.012")
    assert replay(obs[result_file(elsewhere)], old) == ("passed", [])
    assert drift_left_out(obs[result_file(elsewhere)], old) == (
        f"drift left out: calibration measured on other hardware, {HERE}; this run ran on {ELSEWHERE}")
    assert replay(obs[result_file(unsaid)], old) == ("passed", [])
    assert drift_left_out(obs[result_file(unsaid)], old) == (
        f"drift left out: the run does not say which hardware it ran on; the record measured noise on {HERE}")
    # As the gate judged each when it ran: no verdict turns, and two were judged without the drift test.
    result = backtest(old, obs.values())
    assert (result.flips, result.drift_left_out) == ((), 2)
    # A record that names no hardware holds everywhere, as in the gate.
    assert drift_left_out(obs[result_file(elsewhere)], record(OLD, hardware=None)) is None


def test_an_unreadable_run_refuses_unless_the_caller_skips_it(tmp_path):
    cut = write_run(tmp_path / "cut", case_result(OLD[1], record(OLD)))
    path = cut / rundir.CASES / f"{CASE}.json"
    path.write_bytes(path.read_bytes()[:100])
    archive = read_archive([tmp_path], CASE)
    refused = backtest(record(OLD), archive)
    (line,) = refused.failure_messages
    assert line.startswith(f"{display(cut)}: unreadable, so not backtested: {display(path)} is not valid JSON: ")
    skipped = backtest(record(OLD), archive, skip_unreadable=True)
    assert skipped.failure_messages == [] and len(skipped.unreadable) == 1
    assert skipped.to_dict()["unreadable"] == [{"source": display(cut), "reason": archive.unreadable[0].reason}]


def test_the_backtest_is_a_json_record(tmp_path):
    old, loose = record(OLD), record(LOOSE)
    write_run(tmp_path / "fault", case_result(LOOSE[1], old, model=FAULTY), model_faults={FAULTY: FAULT})
    doc = backtest(loose, read_archive([tmp_path], CASE, superseded=old)).to_dict()
    assert canonical_bytes(doc)  # plain JSON throughout
    assert (doc["record"], doc["case"], doc["replayed"], doc["refusals"]) == (loose.sha256, CASE, 7, 1)
    assert {f["known"] for f in doc["flips"]} == {"bad", "good"}  # the old clean samples are implausibly exact now


def test_the_drift_test_is_replayed_at_the_alpha_the_descriptor_gives_the_case(tmp_path):
    old = record(OLD)
    drifted = write_run(tmp_path / "runs" / "drifted", case_result(DRIFTED, old))
    archive = read_archive([tmp_path / "runs"], CASE)
    assert backtest(old, archive).flips == ()  # at the record's own alpha: failed then, failed now
    # A gate's rate split over very many drift cases leaves each a far smaller alpha, a far wider interval.
    (flip,) = backtest(old, archive, alpha=1e-12).flips
    assert (flip.source, flip.was, flip.now) == (result_file(drifted), "failed", "passed")


def _stepped(rec, bounds):
    """``rec`` with a decode section bounding each step (step n: ``bounds[n - 1]``)."""
    return dataclasses.replace(rec, decode={"steps": len(bounds), "per_step": {
        str(n): {"bound": b} for n, b in enumerate(bounds, start=1)}})


def _decoding(tmp_path, steps):
    """The observation of a clean run, its prompt ``a`` continued with ``steps``' errors (None: kept none)."""
    old = record(OLD)
    write_run(tmp_path / "runs" / "clean", case_result(OLD[1], old))
    (obs,) = read_archive([tmp_path / "runs"], CASE).observations
    a = next(p for p in obs.prompts if p.id == "a")
    largest = max(steps) if steps else 0.02
    return dataclasses.replace(obs, decode=(PromptFigures("a", a.bucket, largest, None, (), steps),)), a.bucket


def test_a_decode_check_is_replayed_step_by_step_under_the_records_step_bounds(tmp_path):
    obs, bucket = _decoding(tmp_path, (0.01, 0.02, 0.015))
    assert obs.status == "passed"
    # Step 2's 0.02 is over the bucket's bound (0.016) but within its own step's: it passes, as the gate passes it.
    assert replay(obs, _stepped(record(OLD), [0.012, 0.025, 0.03])) == ("passed", [])
    # Under a step bound it crosses, the failure names that step and that step's bound, not the bucket's.
    status, failures = replay(obs, _stepped(record(OLD), [0.012, 0.018, 0.03]))
    assert (status, failures) == ("failed", [rules.over_bound("a", bucket, 0.02, 0.018, step=2, decode=True).text])
    # A NaN step is an unscorable answer: it fails on plausibility, as the gate fails it.
    nan_obs = dataclasses.replace(obs, decode=(dataclasses.replace(obs.decode[0], steps=(0.01, float("nan"))),))
    status, failures = replay(nan_obs, _stepped(record(OLD), [0.012, 0.025]))
    assert status == "failed" and len(failures) == 1 and "no finite max probability error" in failures[0]


def test_a_decode_check_recorded_without_its_steps_cannot_be_replayed_per_step(tmp_path):
    obs, _ = _decoding(tmp_path, None)
    stepped = _stepped(record(OLD), [0.012, 0.025, 0.03])
    result = backtest(stepped, [obs])
    (skip,) = result.skipped
    assert (skip.kind, result.replayed, result.flips) == (SkipKind.NO_STEP_ERRORS, 0, ())
    assert skip.to_dict()["kind"] == "cannot replay per step"
    with pytest.raises(BadInput, match="cannot replay per step"):
        replay(obs, stepped)
    # Without step bounds every step is judged by its bucket's bound, and the largest error decides as well.
    status, _ = replay(obs, record(OLD))
    assert status == "failed"  # 0.02 over the bucket's 0.016


@pytest.mark.parametrize("drift_off, drift_skipped", [
    ("turned-off", "the descriptor said no"),  # the typed field decides, whatever the words
    (None, "turned off: drift = false"),  # LEGACY: a result written before drift_off, read by its kit's words
])
def test_a_case_that_turned_its_drift_test_off_is_replayed_without_it(tmp_path, drift_off, drift_skipped):
    old = record(OLD)
    ran = dataclasses.replace(case_result(DRIFTED, old), drift=None, drift_skipped=drift_skipped, drift_off=drift_off,
                              status="passed", failures=[])
    write_run(tmp_path / "runs" / "off", ran)
    (obs,) = read_archive([tmp_path / "runs"], CASE).observations
    assert obs.drift_off == "turned-off" and obs.hardware == HERE
    assert drift_left_out(obs, old) == f"drift left out: the case's drift test was {drift_skipped}"
    assert replay(obs, old) == ("passed", [])  # the drift test, which would fail DRIFTED, is left out


def test_a_typed_other_hardware_reason_is_not_read_as_turned_off(tmp_path):
    old = record(OLD)
    ran = dataclasses.replace(case_result(OLD[1], old), drift=None, drift_skipped="turned off, as it happens",
                              drift_off="other-hardware")
    write_run(tmp_path / "runs" / "elsewhere", ran)
    (obs,) = read_archive([tmp_path / "runs"], CASE).observations
    assert obs.drift_off == "other-hardware"
    assert not (drift_left_out(obs, old) or "").startswith("drift left out: the case's drift test was")
