"""The gate, run for real through the CLI: it passes on the tiny model and it can fail."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import nbformat
import pytest
import scrapbook as sb
import torch

from kit.core.baselines.golden import load_golden
from kit.core.model.modeldigest import model_digest
from support import (SLEEPER, copy_model, edit_weight, hf_cases, parity_kit, survivors, trusted, write_descriptor,
                     write_notebook)
from support.shared import STALE_MODEL, embedded_gate_run, stale_semantic_golden


def result_of(run_dir):
    return json.loads((run_dir / "result.json").read_text())


# The embedded gate runs every case of the descriptor, Levanter's and vLLM's among them: each test of that run
# carries both engines' markers. It is the session's one run of it, which other modules read too.
@pytest.fixture(scope="module")
def passing_run(tmp_path_factory):
    return embedded_gate_run(tmp_path_factory)


@pytest.mark.levanter
@pytest.mark.vllm
def test_embedded_gate_passes_end_to_end(passing_run, embedded):
    run_dir, proc = passing_run
    assert proc.returncode == 0, proc.stderr
    result = result_of(run_dir)
    assert result["verdict"] == "passed"
    assert set(result["cases"]) == set(embedded.doc["cases"])
    for name, case in result["cases"].items():
        assert case["status"] == "passed", (name, case["failures"])
        # The decode cases score their bucket 128 only, each step under its calibrated bound.
        assert case["counts"]["prompts"] == (16 if name in ("hf-bf16-decode", "vllm-pp1-decode") else 64)
        assert (run_dir / "cases" / f"{name}.ipynb").is_file()
    assert sb.read_notebook(str(run_dir / "cases" / "hf-bf16.ipynb")).scraps["verdict"].data == "passed"
    assert result["cases"]["checkpoint"]["max_probability_error"] == 0.0
    # bfloat16 against the float32 golden: under the case's bounds (it passed), never bit for bit.
    assert 0 < result["cases"]["hf-bf16"]["max_probability_error"]
    assert result["cases"]["levanter-native"]["max_probability_error"] == 0.0
    assert 0 < result["cases"]["levanter"]["max_probability_error"] < 1e-5  # float32 JAX vs float32 torch
    # The summary is built from the case notebooks' scraps and rendered.
    summary = sb.read_notebook(str(run_dir / "summary.ipynb"))
    assert summary.scraps["gate_verdict"].data == "passed"
    html = (run_dir / "summary.html").read_text()
    assert "PASSED" in html and "hf-bf16" in html and "<img" in html
    evidence = (run_dir / "evidence.md").read_text()
    n = len(embedded.doc["cases"])
    assert re.search(rf"\*\*Parity gate `tiny-cpu`: passed\.\*\* {n} passed in \d+ s\.", evidence)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert f"Fixture `{manifest['fixture_sha256'][:16]}` · model `{manifest['model_digest'][:16]}` · " in evidence
    assert "gate passed" in proc.stderr


@pytest.mark.levanter
@pytest.mark.vllm
def test_embedded_vllm_cases_ran_as_configured(passing_run):
    """vllm-pp1: the offline engine, with two prompts repeated; vllm-pp2: the server over two stages."""
    run_dir, _ = passing_run
    cases = result_of(run_dir)["cases"]
    pp1, pp2 = cases["vllm-pp1"], cases["vllm-pp2"]
    assert pp1["details"]["mode"] == "offline" and pp1["details"]["engine_args"]["pipeline_parallel_size"] == 1
    assert [(r["id"], r["runs"]) for r in pp1["repeat_spread"]] == [("chat-sharegpt-00", 3), ("tool-atlas-12", 3)]
    # One launch, one seed, the same batch each time: the repeats are bit-identical.
    assert all(r["identical"] and r["max_probability_spread"] == 0.0 for r in pp1["repeat_spread"])
    assert pp1["noise_floor"] == 0.0
    assert pp2["details"]["mode"] == "server" and pp2["details"]["engine_args"]["pipeline_parallel_size"] == 2
    assert "--pipeline-parallel-size 2" in pp2["details"]["command"]
    # Both pipeline stages started: each stage's worker prefixes its lines with its PP rank.
    server_log = (run_dir / "cases" / "vllm-pp2.server.log").read_text()
    assert "world_size=2" in server_log
    assert sorted(re.findall(r"^\(Worker_PP(\d) pid=\d+\) .*Warming up done\.$", server_log, re.M)) == ["0", "1"]
    # On CPU with one worker the offline engine runs in the case's kernel: no engine-core process of its own.
    assert pp1["details"]["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    engine_log = (run_dir / "cases" / "vllm-pp1.engine.log").read_text()
    assert "(EngineCore pid=" not in engine_log
    # The engine's own output goes to its log, not into the case notebook (the audit artifact).
    assert "Initializing a V1 LLM engine" in engine_log
    notebook = nbformat.read(str(run_dir / "cases" / "vllm-pp1.ipynb"), as_version=4)
    assert not any("Initializing a V1 LLM engine" in o.get("text", "") for c in notebook.cells
                   for o in c.get("outputs", []))
    for case in (pp1, pp2):  # bfloat16 engine against the float32 golden: close (under its bounds), not bit-exact
        assert case["status"] == "passed" and 0 < case["max_probability_error"]


@pytest.mark.levanter
@pytest.mark.vllm
def test_a_rerun_never_writes_over_an_earlier_run(passing_run):
    run_dir, _ = passing_run
    before = (run_dir / "result.json").read_bytes()
    proc = parity_kit("gate", "--out", run_dir)
    assert proc.returncode == 3
    assert f"run directory {run_dir} exists and is not empty" in proc.stderr
    assert (run_dir / "result.json").read_bytes() == before


def halve_v_proj(model):
    edit_weight(model, "model.layers.1.self_attn.v_proj.weight", lambda w: w * 0.5)


def wrong_rope_base(model):
    cfg = json.loads((model / "config.json").read_text())
    cfg["rope_parameters"]["rope_theta"] = 20000.0  # the model was trained with 10000
    (model / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("fault", [halve_v_proj, wrong_rope_base], ids=["perturbed-weight", "wrong-rope"])
def test_injected_fault_fails_with_the_prompts_named(tmp_path, embedded, fault):
    model = copy_model(embedded, tmp_path / "faulty")
    fault(model)
    # The levanter cases have their own fault test (test_levanter.py).
    desc = write_descriptor(tmp_path, embedded, model=model, model_digest=model_digest(model), cases=hf_cases(embedded))
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == 1, proc.stderr
    result = result_of(run_dir)
    assert result["verdict"] == "failed"
    bf16 = result["cases"]["hf-bf16"]
    assert bf16["status"] == "failed"
    failed = [p["id"] for p in bf16["prompts"] if not p["passed"]]
    assert len(failed) >= 5, "the fixture is chosen so that these faults fail many prompts"
    for pid in failed:
        assert any(m.startswith(f"{pid}: ") for m in bf16["failures"])
    assert any("> bound 0.075" in m for m in bf16["failures"])
    # The exact golden (checkpoint control) catches every prompt.
    assert result["cases"]["checkpoint"]["counts"]["failed"] == 64
    assert "golden" in bf16["notes"][0] and "this case scores model" in bf16["notes"][0]
    evidence = (run_dir / "evidence.md").read_text()
    assert "**Parity gate `test`: failed.** 2 failed in" in evidence
    assert f"`hf-bf16` (hf): **failed** on {len(failed)} of 64 prompts" in evidence
    # Triage: a numeric failure, never retried (a regression must not be run again until it passes).
    assert bf16["triage"]["class"] == "numeric" and bf16["attempts"] == []
    assert re.fullmatch(r"numeric: (over the bound|winner changes|missing tokens) \(\d+\)(, .*)?; first: "
                        + re.escape(bf16["failures"][0]), bf16["triage"]["evidence"]), bf16["triage"]
    assert result["cases"]["checkpoint"]["triage"]["evidence"].startswith("numeric: exact mismatch (64)")
    assert json.loads((run_dir / "manifest.json").read_text())["retried"] == {}
    assert not (run_dir / "cases" / "retried").exists()
    assert "  - triage: numeric: " in evidence


def test_stale_golden_fails(tmp_path, tmp_path_factory, embedded):
    # A golden made from an older build of the model: same fixture, other numbers. `golden make` ran once for the
    # session (support.shared), and the control and golden-regen modules read the same one.
    goldens, made = stale_semantic_golden(tmp_path_factory, embedded)
    assert made.returncode == 0, made.stderr
    old = goldens.parent / STALE_MODEL
    stale = next(goldens.glob("*-semantic.json"))
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": stale},
                            cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == 1, proc.stderr
    case = result_of(run_dir)["cases"]["hf-bf16"]
    assert case["status"] == "failed"
    assert case["notes"] == [f"golden {stale.name} was made from model {model_digest(old)[:12]}, "
                             f"this case scores model {embedded.doc['model']['digest'][:12]}"]
    assert load_golden(stale).provenance["command"].startswith("parity-kit golden make")


def test_non_finite_logprobs_fail_naming_the_prompts(tmp_path, embedded):
    model = copy_model(embedded, tmp_path / "nan-model")
    edit_weight(model, "lm_head.weight", lambda w: w.index_fill_(0, torch.tensor([7]), float("nan")))
    desc = write_descriptor(tmp_path, embedded, model=model, model_digest=model_digest(model),
                            cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == 1, proc.stderr
    case = result_of(run_dir)["cases"]["hf-bf16"]
    assert case["counts"]["failed"] == 64
    first = case["prompts"][0]
    assert case["failures"][0] == (f"{first['id']}: non-finite logprob nan for token {first['backend_top'][0][0]} "
                                   "from the backend")


def test_timeout_and_killed_kernel_are_recorded_and_the_rest_finishes(tmp_path, embedded):
    pidfile = tmp_path / "sleeper.pids"
    sleepy = write_notebook(tmp_path / "sleepy.ipynb", "print('scoring...')", SLEEPER.format(pidfile=str(pidfile)))
    killer = write_notebook(tmp_path / "killer.ipynb", "print('scoring...')",
                            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    cases = {
        "hf-bf16": embedded.doc["cases"]["hf-bf16"],
        "sleeps": {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(sleepy), "timeout_s": 15},
        "dies": {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(killer)},
    }
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    run_dir = tmp_path / "run"
    # Not retried here (--infra-retries 0: the retry has tests of its own, test_triage_e2e), only classed.
    proc = parity_kit("gate", desc, "--out", run_dir, "--jobs", "3", "--infra-retries", "0")
    assert proc.returncode == 2, proc.stderr
    result = result_of(run_dir)
    assert result["verdict"] == "incomplete"
    assert result["cases"]["hf-bf16"]["status"] == "passed"

    sleeps = result["cases"]["sleeps"]
    assert sleeps["status"] == "timeout"
    assert sleeps["error"] == ("exceeded its timeout of 15 s; its kernel was killed; "
                               f"partial notebook {run_dir}/cases/sleeps.ipynb")
    partial = nbformat.read(str(run_dir / "cases" / "sleeps.ipynb"), as_version=4)
    assert any("scoring..." in o.get("text", "") for c in partial.cells for o in c.get("outputs", []))
    assert survivors(map(int, pidfile.read_text().split())) == [], \
        "the timeout must stop the kernel's whole session before the gate returns"

    dies = result["cases"]["dies"]
    assert dies["status"] == "error"
    assert dies["error"].startswith("the kernel died mid-case (killed by SIGKILL: the out-of-memory killer, or another "
                                    "process); partial notebook ")
    assert sleeps["triage"] == {"class": "infrastructure", "evidence": f"infrastructure: timeout: {sleeps['error']}"}
    assert dies["triage"] == {"class": "infrastructure",
                              "evidence": f"infrastructure: the kernel died: {dies['error']}"}
    assert sleeps["attempts"] == dies["attempts"] == []
    partial = nbformat.read(str(run_dir / "cases" / "dies.ipynb"), as_version=4)
    assert any("scoring..." in o.get("text", "") for c in partial.cells for o in c.get("outputs", []))

    evidence = (run_dir / "evidence.md").read_text()
    assert "1 errored, 1 timed out, 1 passed in" in evidence
    assert "`sleeps` (hf): **timeout**: exceeded its timeout of 15 s" in evidence
    html = (run_dir / "summary.html").read_text()
    assert "INCOMPLETE" in html
    assert "sleeps: timeout: exceeded its timeout of 15 s" in html
    assert "dies: error: the kernel died mid-case" in html


def test_interrupted_gate_leaves_no_kernel_behind(tmp_path, embedded):
    pidfile = tmp_path / "sleeper.pids"
    sleepy = write_notebook(tmp_path / "sleepy.ipynb", SLEEPER.format(pidfile=str(pidfile)))
    cases = {"sleeps": {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(sleepy), "timeout_s": 300}}
    run_dir = tmp_path / "run"
    gate = subprocess.Popen([sys.executable, "-m", "kit.cli", "gate", write_descriptor(tmp_path, embedded, cases=cases),
                             "--out", run_dir], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pidfile.exists(), "the sleeping case never started"
    pids = list(map(int, pidfile.read_text().split()))
    gate.send_signal(signal.SIGINT)
    _, stderr = gate.communicate(timeout=60)
    assert gate.returncode == 130, stderr
    assert "parity-kit: interrupted" in stderr
    assert survivors(pids) == []
    assert (run_dir / "cases" / "sleeps.ipynb").is_file()
    recorded = json.loads((run_dir / "cases" / "sleeps.json").read_text())
    assert recorded["status"] == "error"
    assert recorded["error"] == f"interrupted; its kernel was killed; partial notebook {run_dir}/cases/sleeps.ipynb"


@pytest.mark.levanter
@pytest.mark.vllm
def test_stdout_carries_only_the_run_directory(passing_run):
    run_dir, proc = passing_run
    assert proc.stdout.strip() == str(run_dir.resolve())
