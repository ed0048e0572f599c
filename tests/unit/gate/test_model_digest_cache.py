"""The executor hands its preflight's model digests to the case kernels through the run directory."""

from __future__ import annotations

from pathlib import Path

from kit.core.records import contract, rundir
from kit.core.model.modeldigest import DigestCache, check_model_digest
from kit.descriptor.load import load_descriptor
from kit.gate import executor
from kit.run import compilecache
from kit.run.notebook import NotebookOutcome


def no_read(path):
    raise AssertionError(f"{path} was read again")


def test_prepare_run_saves_the_digests_and_each_kernel_is_told_where(tmp_path, embedded, monkeypatch):
    monkeypatch.setenv(compilecache.CACHE_ENV, str(tmp_path / "compile"))
    monkeypatch.delenv(compilecache.JAX_CACHE_ENV, raising=False)
    monkeypatch.delenv(compilecache.JAX_MIN_COMPILE_ENV, raising=False)
    run = executor.prepare_run(load_descriptor(embedded.descriptor), tmp_path / "run", only=["checkpoint"])
    try:
        cache_path = run.run_dir / rundir.MODEL_DIGESTS
        saved = DigestCache.load(cache_path)
        assert {Path(p).name for p in saved.entries} >= {"model.safetensors", "config.json", "tokenizer.json"}
        monkeypatch.setattr("kit.core.model.modeldigest.hash_file", no_read)  # a kernel's check then reads nothing
        assert check_model_digest(embedded.model, run.inputs.model_digest, "case checkpoint", saved) \
            == embedded.doc["model"]["digest"]

        given = {}
        monkeypatch.setattr(executor, "run_notebook",
                            lambda *a, **kw: given.update(kw) or NotebookOutcome("stopped here", None, None))
        executor.execute_case(run.specs[0], run.cases_dir)
        # ... beside where compiled programs persist between kernels.
        assert given["env"] == {contract.MODEL_DIGEST_CACHE_ENV: str(cache_path),
                                contract.RESULT_PATH_ENV: str(run.cases_dir / "checkpoint.json"),
                                compilecache.JAX_CACHE_ENV: str(tmp_path / "compile" / "jax"),
                                compilecache.JAX_MIN_COMPILE_ENV: "1"}  # float64 pins no kernels
    finally:
        run.lock.release()
