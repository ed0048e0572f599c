"""A Levanter case kernel starts with JAX's settings in its environment (the backend's ``kernel_env``), since JAX
reads its ``JAX_*`` settings when it is imported and a warm process imports JAX before any case; a user's own
settings win, as they did when the runtime set them itself."""

from __future__ import annotations

import os

from kit.backends import registry
from kit.backends.levanter import runtime

LEVANTER = registry.get("levanter")


def test_one_thread_on_the_cpu_gets_the_platform_and_the_single_threaded_flags(monkeypatch):
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert LEVANTER.environment({"threads": 1, "device": "cpu"}) == {
        "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
    assert LEVANTER.environment({"threads": 4, "device": "cuda"}) == {"JAX_PLATFORMS": "cuda"}


def test_a_users_own_settings_are_kept(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu,cuda")
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/dev/null")
    assert LEVANTER.environment({"threads": 1, "device": "cpu"}) == {}
    runtime._configure_xla(1, "cpu")  # the runtime opened outside a case kernel leaves them too
    assert os.environ["JAX_PLATFORMS"] == "cpu,cuda" and os.environ["XLA_FLAGS"] == "--xla_dump_to=/dev/null"


def test_the_runtime_outside_a_kernel_sets_what_a_kernel_starts_with(monkeypatch):
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    wanted = runtime.xla_env({"threads": 1, "device": "cpu"})
    runtime._configure_xla(1, "cpu")
    assert {k: os.environ[k] for k in wanted} == wanted


def test_its_warm_imports_begin_with_jax_and_name_only_modules_of_its_own_environment():
    assert LEVANTER.kernel_env and LEVANTER.warm_imports[0] == "jax"
    assert {m.split(".")[0] for m in LEVANTER.warm_imports} <= {"jax", "equinox", "haliax", "levanter", "kit"}
