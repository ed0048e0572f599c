"""Finished run and control directories built from records by hand: what finish_gate and finish_control leave
on disk (manifest, case results, result.json, evidence.md, a summary), without a kernel."""

from __future__ import annotations

from pathlib import Path

from kit.core.records import rundir
from kit.core.verdict.diagnosis import diagnose
from kit.core.records.jsonio import write_json
from kit.core.records.results import read_run, save_case_result
from kit.gate import report
from support.records import failed_case, passed_case

CASES = ["hf-fp32", "hf-bf16"]


def gate_run(run_dir: Path, release: str = "current", failing: bool = False, summary: bool = True) -> Path:
    """A finished gate run of two cases (hf-bf16 failing where asked)."""
    manifest = {"name": "tiny", "fixture_sha256": "ab" * 32, "model_digest": "cd" * 32, "kit_version": "0.3.0",
                "goldens": {"semantic": {"sha256": "ef" * 32}}, "cases": CASES, "duration_s": 3.0,
                "release": {"name": release}, "started_at": "2026-12-01T10:00:00+00:00",
                "command": ["parity-kit", "gate", "tiny.toml"]}
    write_json(run_dir / rundir.MANIFEST, manifest)
    results = [passed_case("hf-fp32"),
               failed_case("hf-bf16", {"p-1": "max probability error 0.5 > bound 0.075"}) if failing
               else passed_case("hf-bf16", err=0.02)]
    for r in results:
        save_case_result(r, run_dir / rundir.CASES / f"{r.case}.json")
    view = read_run(run_dir)
    report.write_result(run_dir, report.result_document("tiny", view.verdict, view.counts, 3.0, view.expected,
                                                        view.results))
    report.write_evidence(run_dir, report.evidence_markdown(manifest, view.verdict, view.counts, 3.0, view.results))
    if summary:
        (run_dir / rundir.SUMMARY_HTML).write_text("<html>the summary</html>")
    (run_dir / rundir.LOCK).write_text("")  # every run keeps its lock file
    return run_dir


def control_dir(root: Path) -> Path:
    """A finished control: today's pin passes, the candidate fails hf-bf16 (a regression)."""
    runs = [gate_run(root / "current", "current", summary=False),
            gate_run(root / "candidate", "candidate", failing=True, summary=False)]
    views = [read_run(r) for r in runs]
    diagnosis = diagnose(*views)
    doc = {"kind": "control", "name": "tiny", "current": "current", "candidate": "candidate",
           "runs": {"current": "current", "candidate": "candidate"}}
    write_json(root / rundir.CONTROL, doc)
    write_json(root / rundir.DIAGNOSIS, diagnosis.to_dict())
    report.write_evidence(root, report.control_evidence(doc, diagnosis, views))
    return root
