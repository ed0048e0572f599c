"""A vllm case kernel forked from a warm process that imported vLLM's engine reads what a kernel that imports it
itself would: what vLLM reads as it loads is in the kernel's environment from its start (kernel_env), and the warm
import is left out wherever that cannot be shown (a GPU host, a case with an environment of its own)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kit.backends import registry
from kit.backends.vllm import engine
from kit.backends.vllm.engine import ENGINE_MODULE, IMPORT_ENV, engine_settings, kernel_env, warm_imports
from kit.core.records.paths import DESCRIPTORS
from kit.descriptor.load import load_descriptor

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def specs():
    return {s.name: s for s in load_descriptor(DESCRIPTORS / "tiny-cpu.toml").case_specs(
        ["vllm-pp1", "vllm-pp1-decode", "vllm-pp2"])}


@pytest.fixture
def cpu_host(monkeypatch, tmp_path):
    monkeypatch.setattr(engine, "GPU_DEVICE_FILES", (str(tmp_path / "no-such-device"),))


def test_the_kernel_starts_with_what_the_engine_reads_as_it_loads(specs):
    for spec in specs.values():
        env = kernel_env(spec.options)
        assert env == IMPORT_ENV, spec.name
        # The engine's own settings repeat them: the runtime's update of the kernel's environment changes none.
        for cuda in (False, True):
            assert env.items() <= engine_settings(spec, cuda=cuda).env.items(), (spec.name, cuda)
    invariant = {**specs["vllm-pp1"].options, "batch_invariant": True}
    assert kernel_env(invariant) == {**IMPORT_ENV, "VLLM_BATCH_INVARIANT": "1"}


def test_every_embedded_vllm_case_forks_from_a_process_that_imported_the_engine_on_a_cpu_host(specs, cpu_host):
    vllm = registry.get("vllm")
    for spec in specs.values():  # offline and server alike: one warm process serves all three
        assert vllm.imports(spec.options) == ("torch", ENGINE_MODULE), spec.name


def test_a_gpu_host_or_a_case_with_its_own_environment_imports_vllm_itself(specs, monkeypatch, tmp_path):
    vllm = registry.get("vllm")
    device = tmp_path / "nvidiactl"
    device.touch()
    monkeypatch.setattr(engine, "GPU_DEVICE_FILES", (str(tmp_path / "kfd"), str(device)))
    assert vllm.imports(specs["vllm-pp1"].options) == ("torch",)
    device.unlink()
    own = {**specs["vllm-pp1"].options, "env": {"VLLM_X": "1"}}
    assert warm_imports(own) == () and vllm.imports(own) == ("torch",)
    assert warm_imports(specs["vllm-pp1"].options) == (ENGINE_MODULE,)


def test_a_backend_without_a_hook_imports_what_it_names():
    hf = registry.get("hf")
    assert hf.imports({}) == hf.warm_imports


def test_vllm_reads_the_variables_the_kit_sets_per_engine_only_when_asked():
    """What the warm import rests on: after the engine's module is imported, a variable the kit sets for each
    engine in the kernel (kit.backends.vllm.engine.engine_settings) is read as it is then, not as it was."""
    probe = (
        "import os\n"
        f"import {ENGINE_MODULE}\n"
        "import vllm.envs as envs\n"
        "os.environ.update(VLLM_CPU_KVCACHE_SPACE='3', VLLM_ENABLE_V1_MULTIPROCESSING='0',"
        " VLLM_CPU_OMP_THREADS_BIND='0')\n"
        "print(envs.VLLM_CPU_KVCACHE_SPACE, envs.VLLM_ENABLE_V1_MULTIPROCESSING, envs.VLLM_CPU_OMP_THREADS_BIND)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                         env={**IMPORT_ENV, "PATH": "/usr/bin:/bin", **_python_env()})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["3", "False", "0"], out.stdout


def _python_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("PYTHON") or k in ("HOME", "TMPDIR")}
