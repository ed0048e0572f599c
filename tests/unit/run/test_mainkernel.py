"""Where the main kernel and the embedded data come from in a plain pip install (no kernel is started)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from kit.core.records import paths
from kit.run import mainkernel
from support import ROOT


@pytest.fixture
def fresh(monkeypatch):
    """provide_main_kernel as on a first call, with JUPYTER_PATH restored afterwards."""
    monkeypatch.setenv(mainkernel.JUPYTER_PATH_ENV, "/nonexistent-earlier-entry")
    mainkernel.provide_main_kernel.cache_clear()
    yield
    mainkernel.provide_main_kernel.cache_clear()


def test_unregistered_main_kernel_is_provided_for_this_interpreter(fresh, monkeypatch):
    monkeypatch.setattr(mainkernel, "registered_kernels", lambda: {})
    provided = mainkernel.provide_main_kernel()
    try:
        assert provided is not None and provided.name == paths.MAIN_KERNEL == "parity-kit"
        root = provided.spec_dir.parents[1]
        assert os.environ[mainkernel.JUPYTER_PATH_ENV] == f"{root}{os.pathsep}/nonexistent-earlier-entry"
        spec = KernelSpecManager().get_kernel_spec(paths.MAIN_KERNEL)
        assert Path(spec.resource_dir) == provided.spec_dir
        assert spec.argv[:3] == [sys.executable, "-m", "ipykernel_launcher"]
        assert json.loads((provided.spec_dir / "kernel.json").read_text())["display_name"] == \
            "parity-kit (this interpreter)"
        assert mainkernel.provide_main_kernel() is provided  # once per process
        assert provided.describe() == f"provided by the gate for {sys.executable}, for the run only"
    finally:
        shutil.rmtree(provided.spec_dir.parents[1])


def test_a_registered_main_kernel_wins(fresh, monkeypatch):
    monkeypatch.setattr(mainkernel, "registered_kernels", lambda: {paths.MAIN_KERNEL: "/somewhere/parity-kit"})
    assert mainkernel.provide_main_kernel() is None
    assert os.environ[mainkernel.JUPYTER_PATH_ENV] == "/nonexistent-earlier-entry"


def _data_root_of(site: Path) -> list[str]:
    code = "import kit.core.records.paths as p; print(p.DATA_ROOT); print(p.CHECKOUT)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
                         cwd=site, env=env, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_an_installed_kit_reads_its_packaged_data_even_when_it_is_missing(tmp_path):
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "kit", site / "kit", ignore=shutil.ignore_patterns("__pycache__"))
    # Without its data an installed kit must not take site-packages for a checkout.
    assert _data_root_of(site) == [str(site / "kit" / "_data"), "None"]
    (site / "kit" / "_data" / "notebooks").mkdir(parents=True)
    assert _data_root_of(site) == [str(site / "kit" / "_data"), "None"]


def test_a_checkout_reads_its_own_folders():
    assert paths.DATA_ROOT == paths.CHECKOUT == ROOT
    assert paths.EMBEDDED_DESCRIPTOR == ROOT / "descriptors" / "tiny-cpu.toml"
