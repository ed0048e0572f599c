"""The history: run directories into rows, the index kept incrementally, the queries, and the command's Markdown
and JSON through the CLI, with every kind of bad input one line."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import pytest

from kit.cli import main
from kit.core.records import rundir
from kit.core.exitcodes import ExitCode
from kit.core.records.jsonio import write_json
from kit.history import index as history_index
from kit.history import queries
from kit.history.command import gather, markdown
from kit.core.records.rundir import RunRole
from kit.history.rows import LineKind, read_location
from kit.core.records.store import open_store
from support.history import BOUNDS, RECORD, START, case_result, control, gate_run, series

pytestmark = pytest.mark.unit


def test_a_gate_run_reads_into_run_case_and_bucket_rows(tmp_path):
    doc = case_result("hf-bf16", {128: [0.012, 0.004], 256: [0.01, 0.02]},
                      triage={"class": "engine", "evidence": "rope"})
    gate_run(tmp_path, "tiny-cpu-1", {"hf-bf16": doc}, release="2.3")
    read = read_location(open_store(str(tmp_path)), "tiny-cpu-1")
    assert read.lines == []
    [run], [case] = read.runs, read.cases
    assert (run.kind, run.name, run.release, run.verdict, run.recorded_verdict) == (
        RunRole.GATE_RUN, "tiny-cpu", "2.3", "passed", "passed")
    assert (case.status, case.bound_kind, case.record_sha256, case.release) == ("passed", "calibrated", RECORD, "2.3")
    assert case.max_error == pytest.approx(0.02) and case.mean_error == pytest.approx(0.0115)
    assert (case.drift_value, case.drift_limit) == (0.004, 0.0045)
    assert (case.triage_class, case.triage_evidence) == ("engine", "rope")
    by_bucket = {b.bucket: b for b in read.buckets}
    assert by_bucket[128].bound == BOUNDS["128"]
    assert by_bucket[128].margin == pytest.approx(0.02 - 0.012)
    assert by_bucket[256].ratio == pytest.approx(0.02 / 0.03)
    assert by_bucket[128].mean_error == pytest.approx(0.008)


def test_a_case_without_triage_reads_none(tmp_path):
    gate_run(tmp_path, "r", {"c": case_result("c", {128: [0.01]})})
    [case] = read_location(open_store(str(tmp_path)), "r").cases
    assert case.triage_class is None and case.triage_evidence is None


def test_a_control_reads_as_its_two_runs(tmp_path):
    control(tmp_path, "control-1", {"c": case_result("c", {128: [0.01]})}, {"c": case_result("c", {128: [0.015]})})
    read = read_location(open_store(str(tmp_path)), "control-1")
    assert {r.kind: r.release for r in read.runs} == {RunRole.CONTROL_CURRENT: "pin", RunRole.CONTROL_CANDIDATE: "next"}
    assert {r.run for r in read.runs} == {"control-1/pin", "control-1/next"}


def test_an_older_run_is_skipped_with_one_line_naming_its_file(tmp_path):
    write_json(tmp_path / "old" / rundir.MANIFEST, {"descriptor": "x.toml", "kit_version": "0.0.1"})
    gate_run(tmp_path, "new", {"c": case_result("c", {128: [0.01]})})
    store = open_store(str(tmp_path))
    old = read_location(store, "old")
    assert old.runs == [] and len(old.lines) == 1
    [line] = old.lines
    assert line.kind == LineKind.SKIPPED and "old/manifest.json" in line.text and "name" in line.text
    assert "0.0.1" in line.text and "\n" not in line.text
    assert len(read_location(store, "new").runs) == 1


def test_an_unreadable_case_file_leaves_out_that_case_only(tmp_path):
    run = gate_run(tmp_path, "r", {"a": case_result("a", {128: [0.01]}), "b": case_result("b", {128: [0.01]})})
    (run / rundir.CASES / "b.json").write_text("{not json")
    read = read_location(open_store(str(tmp_path)), "r")
    assert [c.case for c in read.cases] == ["a"]
    assert any(line.kind == LineKind.SKIPPED and "b.json" in line.text for line in read.lines)


def test_a_verdict_that_disagrees_with_the_case_files_trusts_the_case_files(tmp_path):
    gate_run(tmp_path, "r", {"c": case_result("c", {128: [0.01]})}, verdict="failed")
    read = read_location(open_store(str(tmp_path)), "r")
    [run] = read.runs
    assert (run.verdict, run.recorded_verdict) == ("passed", "failed")
    [line] = read.lines
    assert line.kind == LineKind.VERDICT and "says failed" in line.text and "trusted" in line.text


def test_the_recorded_verdict_is_read_as_a_field_wherever_the_file_puts_it(tmp_path):
    run = gate_run(tmp_path, "r", {"c": case_result("c", {128: [0.01]})}, verdict="failed")
    doc = json.loads((run / rundir.RESULT).read_text())
    # Written by hand, its verdict first and indented: no tail of its bytes says it, its field does.
    (run / rundir.RESULT).write_text(json.dumps({"verdict": doc.pop("verdict"), **doc}, indent=2) + "\n\n")
    [row] = read_location(open_store(str(tmp_path)), "r").runs
    assert row.recorded_verdict == "failed"


def test_the_index_reads_only_what_changed(tmp_path):
    runs = series(tmp_path, [0.010, 0.011, 0.012])
    store = open_store(str(tmp_path))
    first = history_index.update(store)
    assert first.path == tmp_path / ".history" / "index.duckdb"
    assert (first.found, first.read, first.removed) == (3, 3, 0)
    again = history_index.update(store)
    assert (again.found, again.read) == (3, 0)
    doc = json.loads((runs[1] / rundir.CASES / "hf-bf16.json").read_text())
    doc["prompts"][0]["max_probability_error"] = 0.019
    write_json(runs[1] / rundir.CASES / "hf-bf16.json", doc)
    os.utime(runs[1] / rundir.CASES / "hf-bf16.json", (1, 1))  # a rewrite in the same second still shows
    changed = history_index.update(store)
    assert changed.read == 1
    con = history_index.connect(changed.path, read_only=True)
    try:
        frame = queries.series(con, queries.Selection())
    finally:
        con.close()
    assert frame[frame["bucket"] == 128]["max_error"].tolist() == pytest.approx([0.010, 0.019, 0.012])
    shutil.rmtree(runs[2])
    gone = history_index.update(store)
    assert (gone.found, gone.removed) == (2, 1)
    assert history_index.update(store, rebuild=True).read == 2


def _as_written_before_margin(path):
    """The index at ``path`` as a kit of the format before wrote it: bound - error in a column named headroom."""
    con = history_index.connect(path)
    try:
        con.execute("ALTER TABLE buckets RENAME COLUMN margin TO headroom")
        con.execute("UPDATE meta SET value = ? WHERE key = 'format'", [history_index.PREVIOUS])
    finally:
        con.close()


def test_an_index_that_named_the_margin_headroom_is_still_read_without_reading_the_runs_again(tmp_path):
    series(tmp_path, [0.010, 0.011, 0.012])
    store = open_store(str(tmp_path))
    _as_written_before_margin(history_index.update(store).path)
    kept = history_index.update(store)
    assert kept.read == 0  # renamed in place: its rows kept, no run read again
    found = gather(str(tmp_path))
    [row] = [r for r in found.margins if r.bucket == 128]
    assert found.indexed.read == 0 and row.runs == 3
    assert row.margin == pytest.approx(0.02 - 0.012) and row.least_margin == pytest.approx(0.02 - 0.012)


def test_the_history_margin_is_the_rules_margin(tmp_path, monkeypatch):
    from kit.core.rules import rules

    gate_run(tmp_path, "r", {"c": case_result("c", {128: [0.012]})})
    monkeypatch.setattr(rules, "margin", lambda err, bound: bound / 2 - err)  # a rule no copy of it would follow
    [bucket] = read_location(open_store(str(tmp_path)), "r").buckets
    assert bucket.margin == pytest.approx(0.01 - 0.012)


def test_a_remote_store_keeps_its_index_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = history_index.index_path(open_store("memory://bucket/runs"))
    assert path.parent == tmp_path / "cache" / "parity-kit" / "history" and path.suffix == ".duckdb"
    assert history_index.index_path(open_store("memory://bucket/other")) != path


def test_margin_shrinking_and_changes_on_the_time_axis(tmp_path):
    # Bucket 128's error creeps towards its bound of 0.02 run after run; a release and a record change on the way.
    errors = [0.010 + 0.0008 * i for i in range(10)]
    releases = ["2.2"] * 5 + ["2.3"] * 5
    records = [RECORD] * 7 + ["s" * 64] * 3
    series(tmp_path, errors, releases=releases, records=records)
    found = gather(str(tmp_path))
    rows = {(r.case, r.bucket): r for r in found.margins}
    creeping = rows[("hf-bf16", 128)]
    assert creeping.runs == 10 and creeping.shrinking and creeping.slope < 0
    assert creeping.margin == pytest.approx(0.02 - errors[-1])
    assert not rows[("hf-bf16", 256)].shrinking
    kinds = [(c["kind"], c["text"].split()[0]) for c in found.changes]
    assert ("release", "release") in kinds and ("baseline", "calibration") in kinds
    [release] = [c for c in found.changes if c["kind"] == "release"]
    assert release["case"] is None and release["text"] == "release 2.3 (was 2.2)"
    assert release["started_at"] == (START + dt.timedelta(hours=5)).replace(tzinfo=None).isoformat()


def test_selection_by_descriptor_case_and_date(tmp_path):
    series(tmp_path, [0.01, 0.011, 0.012, 0.013])
    gate_run(tmp_path, "other-1", {"c": case_result("c", {128: [0.01]})}, name="other")
    assert gather(str(tmp_path)).runs == 5
    assert gather(str(tmp_path), "other").runs == 1
    assert gather(str(tmp_path), "tiny-cpu", since="2026-11-01T14:00:00+00:00").runs == 2
    assert {r.case for r in gather(str(tmp_path), cases=["c"]).margins} == {"c"}


def test_markdown_and_json_through_the_cli(tmp_path, capsys):
    series(tmp_path, [0.010, 0.012, 0.014])
    write_json(tmp_path / "old" / rundir.MANIFEST, {"kit_version": "0.0.1"})
    assert main(["history", "--runs", str(tmp_path), "--markdown"]) == ExitCode.PASSED
    out = capsys.readouterr().out
    assert "| hf-bf16 | 128 | 3 |" in out and "skipped:" in out and "old/manifest.json" in out
    assert main(["history", "--runs", str(tmp_path), "--json", "--case", "hf-bf16"]) == ExitCode.PASSED
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"] == 3 and {r["bucket"] for r in doc["margins"]} == {128, 256}
    [row] = [r for r in doc["margins"] if r["bucket"] == 128]
    assert row["margin"] == pytest.approx(row["bound"] - row["max_error"]) and "least_margin" in row
    assert "headroom" not in row and "headroom" not in doc  # headroom is error / bound in the kit, not this
    assert [line["kind"] for line in doc["lines"]] == ["skipped"]


def test_markdown_names_the_flag_column(tmp_path):
    series(tmp_path, [0.010, 0.012])
    text = markdown(gather(str(tmp_path)))
    assert "| flag |" in text and "losing margin" in text


@pytest.mark.parametrize("where, said", [
    ("missing", "no such file or folder"),
    ("empty", "holds no run directory"),
])
def test_nothing_to_show_is_one_line_and_exit_3(tmp_path, capsys, where, said):
    (tmp_path / "empty").mkdir()
    assert main(["history", "--runs", str(tmp_path / where), "--json"]) == ExitCode.BAD_INPUT
    [line] = refusals(capsys.readouterr().err)
    assert said in line
    assert not (tmp_path / "empty" / ".history").exists()  # no index made where there is nothing to index


def refusals(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("parity-kit: bad input")]


def test_an_unreachable_url_is_one_line_and_exit_3(capsys):
    assert main(["history", "--runs", "nosuchprotocol://bucket/runs", "--json"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    [line] = refusals(err)
    assert "nosuchprotocol://bucket/runs" in line and "Traceback" not in err


def test_a_selection_matching_nothing_is_one_line_and_exit_3(tmp_path, capsys):
    series(tmp_path, [0.01])
    assert main(["history", "no-such-descriptor", "--runs", str(tmp_path), "--markdown"]) == ExitCode.BAD_INPUT
    assert "no run matches descriptor no-such-descriptor" in capsys.readouterr().err


def test_a_bad_since_is_one_line_and_exit_3(tmp_path, capsys):
    series(tmp_path, [0.01])
    assert main(["history", "--runs", str(tmp_path), "--since", "last week", "--json"]) == ExitCode.BAD_INPUT
    assert "--since last week" in capsys.readouterr().err


JITTER = [0.0002, -0.0001, 0.0, 0.0001, -0.0002, 0.0001, -0.0001, 0.0002, 0.0, -0.0002]


def test_a_step_up_is_flagged_with_its_run_and_release(tmp_path):
    # The 0.068 -> 0.0998 story in small: ten runs near 0.010, then a release that moves the error to 0.016,
    # still under the bound of 0.02 (kit.history.changepoint finds the step; its own tests say how well).
    errors = [0.010 + j for j in JITTER] + [0.016 + j for j in JITTER[:4]]
    runs = series(tmp_path, errors, releases=["2.2"] * 10 + ["2.3"] * 4)
    rows = {(r.case, r.bucket): r for r in gather(str(tmp_path)).margins}
    flagged = rows[("hf-bf16", 128)]
    assert flagged.flag is not None and flagged.flag.startswith("error stepped up from 0.01")
    assert flagged.flag.endswith(f"at release 2.3 / run {runs[10].name}")
    assert flagged.step_run == runs[10].name and not flagged.new_step  # made significant before the last run
    assert rows[("hf-bf16", 256)].flag is None
    assert "error stepped up" in markdown(gather(str(tmp_path)))


def test_the_run_that_completes_a_step_says_so(tmp_path):
    errors = [0.010 + j for j in JITTER] + [0.016 + j for j in JITTER[:3]]
    found = gather(str(series(tmp_path, errors)[0].parent))
    flagged = next(r for r in found.margins if r.bucket == 128)
    # The third run after the step is where a step this clear becomes significant (min_segment 3).
    assert flagged.flag is not None and flagged.new_step and "(new with the last run)" in markdown(found)
    assert found.to_dict()["new_steps"] == [{"case": "hf-bf16", "check": "first-token", "bucket": 128,
                                             "flag": flagged.flag}]


def test_a_step_down_is_no_flag(tmp_path):
    errors = [0.016 + j for j in JITTER] + [0.010 + j for j in JITTER[:4]]
    series(tmp_path, errors)
    assert all(r.flag is None for r in gather(str(tmp_path)).margins)


def test_a_store_behind_a_url_is_read_through_fsspec_and_indexed_in_the_cache(tmp_path, monkeypatch):
    import fsspec

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    series(tmp_path / "local", [0.010, 0.012, 0.014])
    fs = fsspec.filesystem("memory")
    fs.put(str(tmp_path / "local"), "/team/parity-runs", recursive=True)
    try:
        found = gather("memory://team/parity-runs")
        assert found.runs == 3 and found.index.is_relative_to(tmp_path / "cache")
        assert history_index.update(open_store("memory://team/parity-runs")).read == 0
    finally:
        fs.rm("/team", recursive=True)


def test_a_reference_computed_in_the_run_is_no_baseline_change(tmp_path):
    # An exact case whose reference its kernel computes gets a new one every run: not a change of baseline.
    for i in range(2):
        at = START + dt.timedelta(hours=i)
        doc = case_result("native", {128: [0.0, 0.0]}, started=at, record=None, golden=f"{i}" * 64)
        doc["golden_path"] = f"/somewhere/run{i}/cases/native.reference.json"
        gate_run(tmp_path, f"tiny-cpu-{i}", {"native": doc}, started=at)
    assert [c for c in gather(str(tmp_path)).changes if c["case"] == "native"] == []


@pytest.mark.parametrize("edit", [
    lambda doc: [p.update(max_probability_error=1e308) for p in doc["prompts"]],
    lambda doc: doc["prompts"][1].update(max_probability_error=-0.5),
    lambda doc: doc["bucket_bounds"].update({"128": 1e308}),
])
def test_a_run_whose_errors_no_gate_writes_is_one_line_and_the_others_are_shown(tmp_path, capsys, edit):
    series(tmp_path, [0.010, 0.012, 0.011])
    at = START + dt.timedelta(hours=5)
    doc = case_result("hf-bf16", {128: [0.01, 0.01], 256: [0.01]}, started=at)
    edit(doc)
    bad = gate_run(tmp_path, "bad", {"hf-bf16": doc}, started=at)
    assert main(["history", "--runs", str(tmp_path), "--json"]) == ExitCode.PASSED
    shown = json.loads(capsys.readouterr().out)
    assert shown["runs"] == 4 and {r["runs"] for r in shown["margins"] if r["bucket"] == 128} == {3}
    [line] = [line["text"] for line in shown["lines"] if line["kind"] == "skipped"]
    assert str(bad / rundir.CASES / "hf-bf16.json") in line and "case left out" in line and "\n" not in line
    assert "expected a probability difference" in line


def test_a_decode_step_error_no_gate_writes_is_one_line(tmp_path):
    from support.history import decode_series

    runs = decode_series(tmp_path, [0.002, 0.003, 0.002])
    path = runs[1] / rundir.CASES / "hf-bf16-decode.json"
    doc = json.loads(path.read_text())
    doc["decode"][0]["step_errors"][2] = 1e308
    write_json(path, doc)
    history = gather(str(tmp_path))
    assert history.runs == 3
    [line] = [line["text"] for line in history.lines if line["kind"] == "skipped"]
    assert "decode[0].step_errors[2]: expected a probability difference between 0 and 1, got 1e+308" in line


def test_a_folder_holding_no_run_is_one_line_saying_what_was_found(tmp_path, capsys):
    root = tmp_path / "home"
    for n in range(30):  # a folder of other things, some of which the walk passes over
        (root / f"project-{n}" / "src").mkdir(parents=True)
        (root / f"project-{n}" / ".git").mkdir()
        (root / f"project-{n}" / ".cache").mkdir()
        os.symlink(tmp_path, root / f"project-{n}" / "out")
    assert main(["history", "--runs", str(root), "--markdown"]) == ExitCode.BAD_INPUT
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith(f"parity-kit: bad input: {root}: holds no run directory: 61 folder(s) looked into, "
                           "none holding manifest.json or control.json (30 hidden, 30 linked out of the root: "
                           "passed over); expected a folder of runs")
    assert not (root / ".history").exists()
