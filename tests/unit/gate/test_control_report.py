"""`parity-kit report DIR --markdown` and `--attach` on a control directory, as the example CI
workflow calls them: the Markdown names the diagnosis and each release's cases, and the zip holds
both runs' records next to the control's. The directory is written by the same report functions a
control run finishes with, from hand-built case results (no kernels)."""

from __future__ import annotations

import json
import zipfile

from kit.cli import main
from kit.core.records import rundir
from kit.core.verdict.diagnosis import diagnose
from kit.core.records.jsonio import write_json
from kit.core.records.results import read_run, save_case_result
from kit.gate import report
from support.records import failed_case, passed_case

MANIFEST = {"name": "tiny", "fixture_sha256": "ab" * 32, "model_digest": "cd" * 32, "kit_version": "0.3.0",
            "goldens": {"semantic": {"sha256": "ef" * 32}}, "cases": ["hf-bf16", "hf-fp32"], "duration_s": 4.0}
REASON = "max probability error 0.5 > bound 0.075"


def gate_run(run_dir, release: str, results: list):
    """One release's run directory as finish_gate leaves it inside a control (no summary of its own)."""
    manifest = {**MANIFEST, "release": {"name": release, "backends": {"hf": {"kernel": f"pk-{release}",
                                                                             "version": release}}}}
    write_json(run_dir / rundir.MANIFEST, manifest)
    for r in results:
        save_case_result(r, run_dir / rundir.CASES / f"{r.case}.json")
    view = read_run(run_dir)
    doc = report.result_document("tiny", view.verdict, view.counts, 4.0, view.expected, view.results)
    report.write_result(run_dir, doc)
    report.write_evidence(run_dir, report.evidence_markdown(manifest, view.verdict, view.counts, 4.0, view.results))
    return view


def control_dir(root):
    """Today's pin passes both cases; the candidate fails hf-bf16: a regression."""
    views = [gate_run(root / "current", "current", [passed_case("hf-bf16"), passed_case("hf-fp32", err=0.02)]),
             gate_run(root / "candidate", "candidate", [failed_case("hf-bf16", {"p-7": REASON}),
                                                        passed_case("hf-fp32", err=0.02)])]
    diagnosis = diagnose(*views)
    doc = {"kind": "control", "name": "tiny", "current": "current", "candidate": "candidate",
           "runs": {"current": "current", "candidate": "candidate"},
           "command": ["parity-kit", "control", "tiny.toml"]}
    write_json(root / rundir.CONTROL, doc)
    write_json(root / rundir.DIAGNOSIS, diagnosis.to_dict())
    report.write_evidence(root, report.control_evidence(doc, diagnosis, views))
    (root / rundir.SUMMARY_HTML).write_text("<html>both runs</html>")  # built by a kernel in a real control
    return root


def test_markdown_names_the_verdict_and_both_releases_cases(tmp_path, capsys):
    ci = control_dir(tmp_path / "ci")
    assert main(["report", str(ci), "--markdown"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0] == "# Refresh blocked: tiny — regression in the candidate (hf-bf16)"
    assert "| control (today's pin) | `current` | passed: 2 passed in 4 s |" in lines
    assert "| candidate | `candidate` | failed: 1 failed, 1 passed in 4 s |" in lines
    assert "Reproduce: `parity-kit control tiny.toml`" in lines
    # Each case's paired effect, the candidate's error against the pin's (here too few prompts to pair).
    paired = lines.index("The candidate against the pin, prompt by prompt:")
    assert lines[paired + 2:paired + 4] == [
        "- `hf-bf16` (passed in the pin, failed in the candidate): too few prompts to pair (0 prompts paired, "
        "2 not scored on both sides)",
        "- `hf-fp32` (passed in the pin, passed in the candidate): too few prompts to pair (1 prompt paired)"]
    # Each release's own table, in the order today's pin then the candidate.
    current = lines.index("<details open><summary>Cases against <code>current</code></summary>")
    candidate = lines.index("<details open><summary>Cases against <code>candidate</code></summary>")
    assert current < candidate
    # Cells: case, backend, status, max error, bound (from), headroom, drift, failed prompts, worst prompt.
    hand, no_drift = "0.075, hand-set", "not run (no calibration)"
    assert lines[current + 4:current + 6] == [
        f"| `hf-bf16` | hf | ✅ passed | 0.01 | {hand} | 0.13 | {no_drift} | 0/1 | `p-1` |",
        f"| `hf-fp32` | hf | ✅ passed | 0.02 | {hand} | 0.27 | {no_drift} | 0/1 | `p-1` |"]
    assert lines[candidate + 4:candidate + 6] == [
        f"| `hf-bf16` | hf | ❌ failed | 0.5 | {hand} | 6.67 | {no_drift} | 1/1 | `p-7` |",
        f"| `hf-fp32` | hf | ✅ passed | 0.02 | {hand} | 0.27 | {no_drift} | 0/1 | `p-1` |"]
    assert lines[-1] == "</details>"


def test_attach_zips_the_control_and_both_runs(tmp_path, capsys):
    ci = control_dir(tmp_path / "ci")
    artifacts = tmp_path / "artifacts"
    assert main(["report", str(ci), "--attach", str(artifacts)]) == 0
    assert capsys.readouterr().out == f"{artifacts / 'ci.zip'}\n"
    with zipfile.ZipFile(artifacts / "ci.zip") as z:
        assert sorted(z.namelist()) == sorted(
            ["ci/control.json", "ci/diagnosis.json", "ci/evidence.md", "ci/summary.html"]
            + [f"ci/{side}/{name}" for side in ("current", "candidate")
               for name in ("manifest.json", "result.json", "evidence.md")]
            # Each run's case results, which `parity-kit verify` judges a zip from.
            + [f"ci/{side}/cases/{case}.json" for side in ("current", "candidate") for case in ("hf-bf16", "hf-fp32")])
        results = {side: json.loads(z.read(f"ci/{side}/result.json")) for side in ("current", "candidate")}
        assert json.loads(z.read("ci/diagnosis.json"))["verdict"] == "regression"
    assert {side: doc["verdict"] for side, doc in results.items()} == {"current": "passed", "candidate": "failed"}
    assert results["candidate"]["cases"]["hf-bf16"]["failures"] == [f"p-7: {REASON}"]
    assert sorted(results["current"]["cases"]) == ["hf-bf16", "hf-fp32"]
