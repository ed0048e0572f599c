"""Triage and the retry of infrastructure failures, with real causes injected through the CLI: a kernel killed
mid-case is retried and its retry's pass stands; a vLLM server that exits at start is retried, errors again and
leaves the run incomplete, never failed. (The numeric class, never retried, is asserted on the injected-fault
run of test_gate_e2e.)"""

from __future__ import annotations

import json
import re

import pytest

from support import parity_kit, trusted, write_descriptor, write_notebook

# Runs the real case in a custom notebook (the ray executor's tests do the same).
RUN_THE_CASE = ("from kit.case.runner import resolve_spec, run_case, save\n"
                "save(run_case(resolve_spec(spec, None, None)), result_path)")


def test_a_kernel_killed_once_is_retried_and_the_retry_passes(tmp_path, embedded):
    marker = tmp_path / "killed-once"
    flaky = write_notebook(
        tmp_path / "flaky.ipynb",
        f"import os, pathlib, signal\nm = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n    m.touch()\n    os.kill(os.getpid(), signal.SIGKILL)",
        RUN_THE_CASE)
    cases = {"flaky": {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(flaky)}}
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", write_descriptor(tmp_path, embedded, cases=cases), "--out", run_dir, "--no-summary",
                      "--junit", tmp_path / "junit.xml")
    assert proc.returncode == 0, proc.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "passed"
    case = result["cases"]["flaky"]
    assert case["status"] == "passed" and case["triage"] is None
    # SIGKILL from outside the kit: a dead kernel, the signal named (the out-of-memory killer sends it, and so may
    # anyone else).
    died = ("the kernel died mid-case (killed by SIGKILL: the out-of-memory killer, or another process); partial "
            f"notebook {run_dir}/cases/flaky.ipynb")
    evidence = f"infrastructure: the kernel died: {died}"
    [attempt] = case["attempts"]
    assert attempt == {"attempt": 1, "status": "error", "error": died,
                       "triage": {"class": "infrastructure", "evidence": evidence},
                       "files": ["cases/retried/flaky.1.json", "cases/retried/flaky.1.ipynb",
                                 "cases/retried/flaky.1.kernel.log"]}
    assert json.loads((run_dir / "cases" / "retried" / "flaky.1.json").read_text())["status"] == "error"
    assert json.loads((run_dir / "manifest.json").read_text())["retried"] == {"flaky": evidence}
    assert f"retry  flaky: {evidence}" in proc.stderr
    assert "gate passed: 1 passed in" in proc.stderr
    assert "(1 retried after an infrastructure failure: flaky)" in proc.stderr
    md = (run_dir / "evidence.md").read_text()
    assert "**Parity gate `test`: passed.**" in md
    assert "Retried after an infrastructure failure: `flaky` (infrastructure: the kernel died:" in md
    assert f'name="attempt1" value="error: {evidence}"' in (tmp_path / "junit.xml").read_text()


@pytest.mark.vllm
def test_a_server_that_never_gets_healthy_is_retried_and_leaves_the_run_incomplete(tmp_path, embedded):
    # No vLLM server answers its health check a second after it was started: every attempt fails to start it.
    # (A server that exits at start is classed the same way in test_vllm_backend, without a retry.)
    cases = {"slow-start": {"backend": "vllm", "golden": "semantic", "bound": 0.125, "mode": "server",
                            "max_model_len": 1024, "buckets": [128], "server_start_timeout_s": 1}}
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", write_descriptor(tmp_path, embedded, cases=cases), "--out", run_dir, "--no-summary")
    assert proc.returncode == 2, proc.stderr  # incomplete, never failed
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "incomplete"
    case = result["cases"]["slow-start"]
    assert case["status"] == "error"
    started = (r"infrastructure: the engine failed to start: cell \d+ raised EngineDidNotStart: vllm serve was not "
               r"healthy within 1 s \(log .*slow-start\.server\.log\)")
    assert case["triage"]["class"] == "infrastructure" and re.match(started, case["triage"]["evidence"]), case
    [attempt] = case["attempts"]
    assert attempt["status"] == "error" and re.match(started, attempt["triage"]["evidence"]), attempt
    assert "cases/retried/slow-start.1.json" in attempt["files"]
    retried = json.loads((run_dir / "manifest.json").read_text())["retried"]
    assert retried == {"slow-start": attempt["triage"]["evidence"]}
    md = (run_dir / "evidence.md").read_text()
    assert "**Parity gate `test`: incomplete.** 1 errored in" in md
    assert "  - triage: infrastructure: the engine failed to start: cell" in md
    assert "triage slow-start (attempt 2): infrastructure: the engine failed to start" in proc.stderr
