"""`parity-kit report` on run records that are damaged or that an older kit wrote: one line naming the file and
what is wrong in it (exit 3), never a traceback, and nothing in the run folder changes. The runs are written by
the report functions a gate run finishes with, from hand-built case results (no kernels)."""

from __future__ import annotations

import json

import pytest

from kit import __version__
from kit.cli import main
from kit.core.records import rundir
from kit.core.records.jsonio import write_json
from kit.core.records.results import read_run, save_case_result
from kit.gate import report
from support.records import failed_case, passed_case

MANIFEST = {"name": "tiny", "fixture_sha256": "ab" * 32, "model_digest": "cd" * 32, "kit_version": __version__,
            "goldens": {"semantic": {"sha256": "ef" * 32}}, "cases": ["hf-bf16", "hf-fp32"], "duration_s": 4.0}


def gate_run(run_dir, release: str | None = None):
    manifest = {**MANIFEST, "release": {"name": release}} if release else MANIFEST
    write_json(run_dir / rundir.MANIFEST, manifest)
    for r in (failed_case("hf-bf16", {"p-7": "max probability error 0.5 > bound 0.075"}), passed_case("hf-fp32")):
        save_case_result(r, run_dir / rundir.CASES / f"{r.case}.json")
    view = read_run(run_dir)
    report.write_evidence(run_dir, report.evidence_markdown(manifest, view.verdict, view.counts, 4.0, view.results))
    return run_dir


def edit(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def cut(path):
    path.write_bytes(path.read_bytes()[:90])  # a full disk's truncated write


def json_error(path) -> str | None:
    """What the JSON parser says of a damaged file (where it stopped), as the refusal quotes it."""
    try:
        json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        return str(exc)
    return None


def snapshot(folder) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(capsys, folder) -> str:
    """The one line `report --markdown` refuses ``folder`` with; the folder is as it was."""
    before = snapshot(folder)
    assert main(["report", str(folder), "--markdown"]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert snapshot(folder) == before
    return err.removeprefix("parity-kit: bad input: ").rstrip("\n")


CASE = "cases/hf-bf16.json"
DAMAGES = {
    "truncated result": (CASE, cut, "{f} is not valid JSON: {e}"),
    "truncated manifest": ("manifest.json", cut, "{f} is not valid JSON: {e}"),
    "result without its status": (CASE, lambda d: d.pop("status"), "{f}: status: missing"),
    "prompt without a key": (CASE, lambda d: d["prompts"][0].pop("winner_gap"), "{f}: prompts[0].winner_gap: missing"),
    "error of the wrong type": (CASE, lambda d: d["prompts"][0].update(max_probability_error="0.5"),
                                "{f}: prompts[0].max_probability_error: expected a number, got '0.5'"),
    "bound written as null": (CASE, lambda d: d.update(bucket_bounds={"256": None}),
                              "{f}: bucket_bounds.256: expected a number, got None"),
    "unknown status": (CASE, lambda d: d.update(status="green"),
                       "{f}: status: expected one of passed, failed, error, timeout, no-baseline, inconclusive, "
                       "borrowed-bounds, got 'green'"),
    "another case's result": (CASE, lambda d: d.update(case="hf-fp32"),
                              "{f}: case: expected 'hf-bf16', the case its file is named after, got 'hf-fp32'"),
    "manifest without cases": ("manifest.json", lambda d: d.pop("cases"), "{f}: cases: missing"),
    "release of the wrong type": ("manifest.json", lambda d: d.update(release="next"),
                                  "{f}: release: expected an object, got 'next'"),
}


@pytest.mark.parametrize("name", DAMAGES)
def test_a_damaged_gate_run_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    run = gate_run(tmp_path / "run")
    where, change, message = DAMAGES[name]
    path = run / where
    cut(path) if change is cut else edit(path, change)
    assert refused(capsys, run) == message.format(f=f"run/{where}", e=json_error(path))


def test_an_older_kits_record_says_which_kit_wrote_it(tmp_path, capsys, monkeypatch):
    """A result from before a key was written (winner_gap, say) reads as that, not as a damaged file."""
    monkeypatch.chdir(tmp_path)
    run = gate_run(tmp_path / "run")
    edit(run / rundir.MANIFEST, lambda d: d.update(kit_version="0.0.1"))
    edit(run / CASE, lambda d: [p.pop("winner_gap") for p in d["prompts"]])
    assert refused(capsys, run) == (f"run/{CASE}: prompts[0].winner_gap: missing (written by kit 0.0.1; "
                                    f"this is kit {__version__})")


def test_evidence_that_is_not_utf8_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = gate_run(tmp_path / "run")
    (run / rundir.EVIDENCE).write_bytes(b"**Parity gate \xff")
    assert refused(capsys, run) == "run/evidence.md is not UTF-8 (byte 14)"


@pytest.mark.parametrize("doc, message", [
    ("{", "ci/control.json is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 "
          "(char 1)"),
    ('{"current": "current", "candidate": "candidate", "runs": {"current": "current"}}',
     "ci/control.json: malformed control record: runs.candidate: expected a non-empty string, got None"),
    ('{"current": "current", "candidate": "candidate", "runs": {"current": "current", "candidate": "gone"}}',
     "ci/gone/manifest.json: no such file"),
])
def test_a_damaged_control_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch, doc, message):
    monkeypatch.chdir(tmp_path)
    for side in ("current", "candidate"):
        gate_run(tmp_path / "ci" / side, side)
    (tmp_path / "ci" / rundir.CONTROL).write_text(doc)
    assert refused(capsys, tmp_path / "ci") == message


def test_a_whole_run_still_reports(tmp_path, capsys):
    run = gate_run(tmp_path / "run")
    assert main(["report", str(run), "--markdown"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "| `hf-bf16` | hf | ❌ failed | 0.5 |" in out
