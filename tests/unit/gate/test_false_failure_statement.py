"""A gate run states its false-failure rate in one line: the manifest records it from the plan, result.json and
evidence.md carry it (kit.descriptor.falsefailure), whatever the verdict."""

from __future__ import annotations

import json

from kit.gate import run as gate
from kit.gate.executor import RunRequest
from support import cases_pass_without_kernels, write_descriptor


def test_a_gate_run_states_its_rate_in_manifest_result_and_evidence(tmp_path, embedded, monkeypatch):
    cases_pass_without_kernels(monkeypatch)
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]},
                            defaults={**embedded.doc.get("defaults", {}), "false_failure_rate": 0.01})
    run = gate.run_gate(gate.GateRequest(RunRequest(desc, tmp_path / "run"), ["parity-kit", "gate"], jobs=1,
                                         summary=False))
    line = ("false-failure rate: at most 1 % for the gate (drift tests: 1 % for each of 1 case, Bonferroni); "
            "per-prompt bounds: measured, 0 failures in 6 leave-one-out variants")
    manifest = json.loads((run.run_dir / "manifest.json").read_text())
    assert manifest["false_failure_rate"]["statement"] == line
    assert manifest["false_failure_rate"]["per_case"] == 0.01 and manifest["false_failure_rate"]["cases"] == ["hf-bf16"]
    result = json.loads((run.run_dir / "result.json").read_text())
    assert result["false_failure_rate"] == manifest["false_failure_rate"]
    assert "False-failure rate: at most 1 % for the gate" in (run.run_dir / "evidence.md").read_text()
