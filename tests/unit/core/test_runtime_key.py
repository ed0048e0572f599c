"""The key of the runtime a calibration or power record was measured on holds what decides its numbers, and
nothing one launch or one host draws for itself: the samples of one record come from several engine launches,
and must all name one runtime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.core.host.runtime import launch_specific, numeric_env, numeric_fingerprint, numerics_fingerprint, scrubbed

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def launch(ident: str, shm: str, port: int, host: str, tmp: str) -> dict[str, str]:
    """A vLLM launch's environment as its process held it after its engine started: the settings, and what this
    launch drew for itself (its process group's name, its shared memory's, ports, the master's address, folders)."""
    return {"OMP_NUM_THREADS": "2", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
            "XLA_FLAGS": f"--xla_cpu_multi_thread_eigen=false --xla_dump_to=/tmp/parity-kit-dump-{tmp}",
            "VLLM_DIST_IDENT": f"vllm_dist_{ident}", "VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME": f"vllm_mm_{shm}",
            "VLLM_PORT": str(port), "VLLM_DP_MASTER_IP": host, "VLLM_DP_MASTER_PORT": str(port + 1),
            "NCCL_COMM_ID": f"{host}:{port + 2}", "MASTER_ADDR": host, "MASTER_PORT": str(port + 1),
            "TORCH_DIST_INIT": f"file:///tmp/vllm_dist_{ident}", "VLLM_RPC_BASE_PATH": f"/tmp/parity-kit-vllm-{tmp}"}


LAUNCH = launch("8ea3c1f2d4b54e0f9a6c7d8e9f0a1b2c", "fndB12QZTa-g2XyCkrq_Sw", 41233, "10.0.0.5", "1a2b3c")
NEXT_LAUNCH = launch("85550c4a7e2b4c1d8f3e6a9b0c1d2e3f", "Q2xZ9pLk-T0aWmYv3RsN_g", 52871, "10.0.0.9", "9z8y7x")


def test_two_launches_that_differ_only_in_what_each_drew_have_one_key():
    assert numerics_fingerprint("cpu", LAUNCH) == numerics_fingerprint("cpu", NEXT_LAUNCH)
    env = numerics_fingerprint("cpu", LAUNCH)["env"]
    # What is left: the settings, with the dump folder's place kept and its name gone.
    assert env == {"OMP_NUM_THREADS": "2", "TORCH_DIST_INIT": "file://<temporary path>",
                   "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
                   "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false --xla_dump_to=<temporary path>"}


# What does decide the numbers gives another key. OMP_NUM_THREADS: how many threads split each reduction.
# VLLM_CPU_KVCACHE_SPACE: the KV cache's size, and with it how many sequences vLLM's scheduler admits into one
# step; kernels that are not batch-invariant round a prompt by the batch it shares. VLLM_CPU_OMP_THREADS_BIND:
# the threads each worker computes with. VLLM_BATCH_INVARIANT and VLLM_ATTENTION_BACKEND choose the kernels. A flag
# of XLA_FLAGS beside a temporary path still counts.
@pytest.mark.parametrize("name, value", [
    ("OMP_NUM_THREADS", "1"), ("VLLM_CPU_KVCACHE_SPACE", "4"), ("VLLM_CPU_OMP_THREADS_BIND", "0"),
    ("VLLM_BATCH_INVARIANT", "1"), ("VLLM_ATTENTION_BACKEND", "TORCH_SDPA"),
    ("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true --xla_dump_to=/tmp/parity-kit-dump-1a"),
])
def test_a_setting_that_decides_the_numbers_gives_another_key(name, value):
    assert numerics_fingerprint("cpu", {**LAUNCH, name: value}) != numerics_fingerprint("cpu", LAUNCH)


def test_a_setting_that_names_a_resource_in_words_stays():
    # A *_NAME is left out only for a drawn name; a setting's own words stay, as do instruction-set names.
    assert numeric_env({"NCCL_SHM_NAME": "parity_shared", "ONEDNN_MAX_CPU_ISA": "avx512_core_bf16",
                        "VLLM_TARGET": "/home/user/tmp/x"}) == {
        "NCCL_SHM_NAME": "parity_shared", "ONEDNN_MAX_CPU_ISA": "avx512_core_bf16", "VLLM_TARGET": "/home/user/tmp/x"}


def test_identifiers_and_temporary_paths_are_replaced_wherever_they_stand():
    assert scrubbed("GPU-8ea3c1f2-1234-5678-9abc-def012345678") == "GPU-<identifier>"
    assert scrubbed("/scratch/run/x,/scratch/y", ("/scratch",)) == "<temporary path>,<temporary path>"
    assert scrubbed("/scratchpad/x", ("/scratch",)) == "/scratchpad/x"
    assert launch_specific("VLLM_DIST_IDENT", "29500") and launch_specific("VLLM_HOST_IP", "10.0.0.1")
    assert not launch_specific("VLLM_CPU_KVCACHE_SPACE", "1")


def test_a_stored_fingerprint_is_keyed_as_a_fresh_one():
    # Samples an earlier kit wrote, each with the identifier its launch drew, compare equal as keys.
    stored = [{"runtime": {"packages": {"vllm": "0.32.0"}, "env": env}} for env in (LAUNCH, NEXT_LAUNCH)]
    assert numeric_fingerprint(stored[0]) == numeric_fingerprint(stored[1])
    assert numeric_fingerprint(numeric_fingerprint(stored[0])) == numeric_fingerprint(stored[0])


def committed_records() -> list[Path]:
    return sorted((ROOT / "calibrations").glob("*.json")) + sorted((ROOT / "calibrations" / "power").glob("*.json"))


def test_every_committed_record_keys_as_it_did_before_these_rules():
    # The records made before the rules by shape hold nothing those rules leave out or change: each keys as it did,
    # so a merge, a --reuse or a record made here again compares with them as before. (Their names are the SHA-256
    # of their bytes, which nothing rewrites: kit.core.noise.calibration and kit.core.noise.power refuse a file whose
    # name is not, as their own tests show.)
    files = committed_records()
    assert len(files) >= 40
    for f in files:
        env = json.loads(f.read_text())["fingerprint"]["runtime"]["env"]
        assert not [k for k, v in env.items() if launch_specific(k, v) or scrubbed(v) != v], f.name
