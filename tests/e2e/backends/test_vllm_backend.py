"""The vllm backend, run for real through the gate: the server mode passes, a bad option and a
server that never gets healthy are recorded with the server's log, no engine process survives, and
a perturbed model fails. (The offline mode and pipeline parallel 2 run in the embedded gate, see
test_gate_e2e.) Engine starts are slow, so one gate run serves several tests."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import socket
import shutil
import stat
import tempfile
from pathlib import Path

import psutil
import pytest

from kit.backends.base import LOG_PREFIX_ENV
from kit.backends.vllm.engine import CPU_PP_NEEDS_COMPILE, EAGER_CPU_ENV, engine_settings
from kit.backends.vllm.server import cli_flags, free_port
from kit.core.errors import BadInput
from kit.core.model.modeldigest import model_digest
from kit.core.records.paths import DESCRIPTORS
from kit.descriptor.load import load_descriptor
from support import copy_model, edit_weight, parity_kit, write_descriptor

SMALL = {"buckets": [128, 256]}  # 32 prompts: the engine start dominates, not the scoring
SERVER = {"backend": "vllm", "golden": "semantic", "bound": 0.125, "mode": "server", "max_model_len": 1024, **SMALL}


def port_no_other_process_is_given() -> int:
    """A free loopback port below the system's ephemeral range. A port the kernel chose (port 0) is handed out again
    to the next process that asks for any port: vLLM asks for five while its head starts, and Ray, the kernels and
    the other tests' engines ask for more, so a chosen port could be taken before the head binds it, and the head
    would exit instead of waiting. Ports below the ephemeral range are given to nobody who does not name them (Ray
    names its workers' ports from 10002 to 19999: above those)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    below = range(20000, low)
    for port in random.sample(below, min(200, len(below))):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return free_port()


def survivors(run_dir) -> list[str]:
    """Processes started for this run (they carry its log prefix in their environment) still alive."""
    left = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if str(run_dir) in p.environ().get(LOG_PREFIX_ENV, "") and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid} {' '.join(p.info['cmdline'] or [])[:120]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return left


@pytest.fixture(scope="module")
def server_run(tmp_path_factory, embedded):
    tmp = tmp_path_factory.mktemp("vllm-server")
    cases = {
        "server-pp1": {**SERVER, "dtype": "float32"},
        # Longer than the model's 1024 positions: vLLM refuses it while starting.
        "bad-option": {**SERVER, "max_model_len": 4096},
        # A head that serves two data-parallel engines, both on other nodes that never join: its
        # server waits for them and is never healthy, however fast the machine. (It ignores SIGTERM
        # while it waits: only the kill of the kernel's process tree ends it.) Its timeout leaves a
        # loaded machine time to start the kernel, import vLLM and launch the server, whose log is asserted (about
        # 10 s on a quiet 2-core machine), and ends near server-pp1's engine (66 s quiet), which the gate waits for.
        "never-healthy": {**SERVER, "timeout_s": 60, "engine_args": {
            "data_parallel_size": 2, "data_parallel_size_local": 0, "data_parallel_address": "127.0.0.1",
            "data_parallel_rpc_port": port_no_other_process_is_given()}},
    }
    run_dir = tmp / "run"
    # Not retried (the retry of such a server has its own test, test_triage_e2e): one engine start each.
    # A temporary folder of the run's own, so that what its engines leave there can be seen; a short path, since
    # a socket's path has at most 107 characters.
    own_tmp = Path(tempfile.mkdtemp(prefix="vllm-tmp-"))
    try:
        proc = parity_kit("gate", write_descriptor(tmp, embedded, cases=cases), "--out", run_dir, "--jobs", "3",
                          "--no-summary", "--infra-retries", "0", env={"TMPDIR": str(own_tmp)})
        result = json.loads((run_dir / "result.json").read_text())
        left = [p.relative_to(own_tmp) for p in own_tmp.rglob("*")
                if p.name.startswith("parity-kit-vllm-") or stat.S_ISSOCK(p.lstat().st_mode)]
        yield run_dir, proc, result["cases"], left
    finally:
        shutil.rmtree(own_tmp, ignore_errors=True)


def test_server_mode_matches_the_float32_golden(server_run):
    run_dir, _, cases, _ = server_run
    case = cases["server-pp1"]
    assert case["status"] == "passed", case.get("error") or case["failures"]
    assert case["counts"] == {"prompts": 32, "passed": 32, "failed": 0}
    assert case["max_probability_error"] < 1e-5  # float32 engine vs float32 golden
    assert case["release"]["mode"] == "server" and case["release"]["vllm"]
    assert case["details"]["engine_start_s"] > 0
    log = (run_dir / "cases" / "server-pp1.server.log").read_text()
    assert log.startswith("$ ") and "--served-model-name" in log


def test_a_server_that_cannot_start_is_an_error_with_its_log_tail(server_run):
    _, _, cases, _ = server_run
    case = cases["bad-option"]
    assert case["status"] == "error"
    assert re.match(r"cell \d+ raised EngineDidNotStart: vllm serve exited with code \d+ before it became healthy "
                    r"\(log .*bad-option\.server\.log\)", case["error"]), case["error"]
    assert "--- bad-option.server.log ---" in case["log_tail"]
    assert "max_model_len" in case["log_tail"], case["log_tail"]
    assert case["triage"]["class"] == "infrastructure" and case["attempts"] == []  # --infra-retries 0
    # The evidence is one line of at most 300 characters: the start of the error.
    assert case["triage"]["evidence"].startswith(f"infrastructure: the engine failed to start: {case['error'][:150]}")


def test_a_server_that_never_gets_healthy_times_out_with_its_log_tail(server_run):
    run_dir, _, cases, _ = server_run
    case = cases["never-healthy"]
    assert case["status"] == "timeout", f"{case['status']}: {case.get('error')}\n{case.get('log_tail')}"
    assert case["error"].startswith("exceeded its timeout of 60 s; its kernel was killed")
    server_tail = case["log_tail"].split("--- never-healthy.server.log ---\n", 1)[1]
    # The tail is the server's own log, whose head is the command that started it.
    log = (run_dir / "cases" / "never-healthy.server.log").read_text()
    assert log.startswith("$ ") and "--data-parallel-size-local 0" in log.splitlines()[0]
    assert server_tail.strip() and server_tail.strip() in log, server_tail


def test_no_engine_process_survives_the_run(server_run):
    run_dir, proc, _, _ = server_run
    assert proc.returncode == 2, proc.stderr  # incomplete: one error, one timeout
    assert survivors(run_dir) == []


def test_an_engine_that_closed_leaves_no_socket_behind(server_run):
    """vLLM names a socket file in the temporary folder for each channel between its processes and removes none;
    each engine gets a folder of its own for them, removed when it closes. The server killed with its kernel
    (never-healthy, past its timeout) is the one that cannot remove its own."""
    _, _, cases, left = server_run
    assert all(p.parts[0].startswith("parity-kit-vllm-never-healthy-") for p in left), left
    made = cases["server-pp1"]["details"]["sockets_dir"]  # where its engine's sockets were: gone with it
    assert Path(made).name.startswith("parity-kit-vllm-server-pp1-") and not Path(made).exists(), made


def test_perturbed_model_fails_with_the_prompts_named(tmp_path, embedded):
    model = copy_model(embedded, tmp_path / "faulty")
    edit_weight(model, "model.layers.1.self_attn.v_proj.weight", lambda w: w * 0.5)
    # A second launch of the offline engine in the same kernel shares this test's run: repeats across launches.
    cases = {"vllm-offline": {**SERVER, "mode": "offline", "dtype": "bfloat16", "repeats": 2, "repeat_launches": 2,
                              "repeat_prompts": ["tool-atlas-00"]}}
    desc = write_descriptor(tmp_path, embedded, model=model, model_digest=model_digest(model), cases=cases)
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == 1, proc.stderr
    case = json.loads((run_dir / "result.json").read_text())["cases"]["vllm-offline"]
    assert case["status"] == "failed"
    assert case["release"]["mode"] == "offline"
    failed = [p["id"] for p in case["prompts"] if not p["passed"]]
    assert len(failed) >= 3
    for pid in failed:
        assert any(m.startswith(f"{pid}: ") for m in case["failures"])
    assert any("> bound 0.125" in m for m in case["failures"])
    [spread] = case["repeat_spread"]
    assert (spread["id"], spread["runs"], spread["launches"]) == ("tool-atlas-00", 4, 2)
    # Same seed, same batch, on CPU: the four runs over two launches are bit-identical.
    assert spread["identical"] is True and spread["difference"] is None
    assert spread["max_probability_spread"] == case["noise_floor"] == 0.0
    assert survivors(run_dir) == []


def test_pipeline_parallel_in_eager_mode_on_cpu_is_refused_with_the_reason(embedded):
    spec = load_descriptor(embedded.descriptor).case_specs(["vllm-pp2"])[0]
    eager = spec.__class__(**{**spec.to_dict(), "options": {**spec.options, "enforce_eager": True}})
    with pytest.raises(ValueError, match=re.escape(CPU_PP_NEEDS_COMPILE)):
        engine_settings(eager, cuda=False)
    settings = engine_settings(spec, cuda=False)
    assert settings.env["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert settings.engine_args["enforce_eager"] is False
    assert settings.engine_args["distributed_executor_backend"] == "mp"


def test_the_offline_engine_runs_in_the_kernel_on_cpu_with_one_worker_and_in_its_own_processes_otherwise(embedded):
    specs = {s.name: s for s in load_descriptor(embedded.descriptor).case_specs(["vllm-pp1", "vllm-pp2"])}
    pp1, pp2 = specs["vllm-pp1"], specs["vllm-pp2"]
    on_cpu = engine_settings(pp1, cuda=False)
    assert on_cpu.env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert on_cpu.engine_args["distributed_executor_backend"] == "uni"
    for elsewhere in (engine_settings(pp1, cuda=True), engine_settings(pp2, cuda=False),
                      engine_settings(dataclasses.replace(pp1, options={**pp1.options, "engine_in_kernel": False}),
                                      cuda=False)):
        assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in elsewhere.env
        assert elsewhere.engine_args.get("distributed_executor_backend") != "uni"
    server = dataclasses.replace(pp1, options={**pp1.options, "mode": "server", "engine_in_kernel": True})
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in engine_settings(server, cuda=False).env, \
        "the server is a process of its own whatever the option says"


def test_engine_arguments_become_server_flags():
    assert cli_flags({"dtype": "bfloat16", "enforce_eager": False, "max_logprobs": 64, "seed": 0,
                      "enable_prefix_caching": True}) == [
        "--dtype", "bfloat16", "--no-enforce-eager", "--max-logprobs", "64", "--seed", "0",
        "--enable-prefix-caching"]


def test_gpu_cluster_example_validates():
    desc = load_descriptor(DESCRIPTORS / "example-gpu-cluster.toml")
    specs = {s.name: s for s in desc.case_specs()}
    pp2 = specs["vllm-pp2-2nodes"]
    assert pp2.options["pipeline_parallel_size"] == 2 and pp2.options["distributed_executor_backend"] == "ray"
    assert specs["vllm-pp1"].exact_repeats and specs["vllm-pp1"].repeat_launches == 2
    settings = engine_settings(pp2, cuda=True)
    assert settings.engine_args["enforce_eager"] is False and "VLLM_CPU_KVCACHE_SPACE" not in settings.env


def test_unknown_vllm_option_is_one_line_with_file_and_line(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"v": {**SERVER, "pipline_parallel_size": 2}})
    with pytest.raises(BadInput) as err:
        load_descriptor(desc)
    line = str(err.value)
    assert "\n" not in line
    assert re.match(rf"{re.escape(str(desc))}:\d+: cases\.v\.pipline_parallel_size: unknown key \(expected one of: ",
                    line), line
    assert "pipeline_parallel_size" in line



@pytest.fixture
def dynamo_config():
    """torch's compiler settings, put back as they were after the test (a module of torch's own: no monkeypatch)."""
    import torch._dynamo.config as config

    before = config.disable
    yield config
    config.disable = before


def compile_switch_of(engine_env_before: dict):
    """An offline backend as its constructor leaves what it knows of torch.compile, with no engine started."""
    from kit.backends.vllm import offline

    engine = offline.VllmOfflineBackend.__new__(offline.VllmOfflineBackend)
    engine._compile_env_before = engine_env_before
    return engine


def test_an_eager_engine_leaves_torch_compile_as_it_found_it(monkeypatch, dynamo_config):
    # A calibration starts the eager engine and then a compiled one in the same kernel: the second must compile.
    from kit.backends.vllm import offline

    monkeypatch.delenv("TORCH_COMPILE_DISABLE", raising=False)
    dynamo_config.disable = False
    engine = compile_switch_of({name: os.environ.get(name) for name in EAGER_CPU_ENV})
    monkeypatch.setattr(os, "environ", {**os.environ, **EAGER_CPU_ENV})  # as the constructor sets it
    offline._switch_compile(os.environ)
    assert dynamo_config.disable
    engine._restore_compile()
    assert "TORCH_COMPILE_DISABLE" not in os.environ and not dynamo_config.disable


def test_a_compile_switch_the_user_set_is_kept(monkeypatch, dynamo_config):
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    dynamo_config.disable = True
    compile_switch_of({name: os.environ.get(name) for name in EAGER_CPU_ENV})._restore_compile()
    assert os.environ["TORCH_COMPILE_DISABLE"] == "1" and dynamo_config.disable
