"""Notebooks are committed clean and stay thin: a tagged parameters cell, calls into kit."""

from __future__ import annotations

import nbformat
import pytest

from kit.core import paths
from support import ROOT

NOTEBOOKS = sorted(paths.NOTEBOOKS.glob("*.ipynb"))
# A case notebook runs in its backend's kernel; the others in the main one.
KERNELS = {"parity_levanter.ipynb": paths.LEVANTER_KERNEL}


def test_there_are_notebooks():
    assert {p.name for p in NOTEBOOKS} >= {"parity_hf.ipynb", "parity_levanter.ipynb", "summary.ipynb",
                                           "control.ipynb", "build.ipynb", "qualify.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs; clear them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_one_tagged_parameters_cell_and_its_backends_kernel(path):
    nb = nbformat.read(str(path), as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert nb.metadata["kernelspec"]["name"] == KERNELS.get(path.name, paths.MAIN_KERNEL)
    nbformat.validate(nb)


def test_case_notebook_runs_as_is_with_its_default_parameters(tmp_path):
    """What a user gets when opening the notebook in JupyterLab and pressing run-all."""
    nb = _run_as_is("parity_hf.ipynb")
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "hf-bf16: passed, 0 of 64 prompts failed" in printed
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def test_summary_and_control_notebooks_run_as_is_on_the_newest_runs(tmp_path):
    """Opened in JupyterLab after `make gate` / `parity-kit control`, run-all shows the newest run."""
    import shutil
    import uuid

    from nbclient import NotebookClient

    from support import parity_kit

    tag = uuid.uuid4().hex[:8]
    gate_dir, control_dir = ROOT / "runs" / f"nbtest-{tag}", ROOT / "runs" / f"nbtest-control-{tag}"
    try:
        proc = parity_kit("control", "--case", "hf-bf16", "--out", control_dir, "--no-summary")
        assert proc.returncode == 0, proc.stderr
        proc = parity_kit("gate", "--case", "hf-bf16", "--out", gate_dir, "--no-summary")
        assert proc.returncode == 0, proc.stderr
        for name, expect in (("summary.ipynb", "Gate <code>tiny-cpu</code>"),
                             ("control.ipynb", "Control: today&#x27;s pin <code>current</code>")):
            nb = nbformat.read(str(paths.NOTEBOOKS / name), as_version=4)
            NotebookClient(nb, kernel_name=paths.MAIN_KERNEL, timeout=300,
                           resources={"metadata": {"path": str(paths.NOTEBOOKS)}}).execute()
            shown = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", []))
            assert expect in shown, name
            assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
    finally:
        shutil.rmtree(gate_dir, ignore_errors=True)
        shutil.rmtree(control_dir, ignore_errors=True)


@pytest.mark.levanter
def test_levanter_notebook_runs_as_is_in_its_kernel():
    nb = _run_as_is("parity_levanter.ipynb")
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "levanter: passed, 0 of 64 prompts failed" in printed
    table = nb.cells[-1].outputs[0]["data"]["text/plain"]
    assert "reference" in table and "attention" in table


def _run_as_is(name: str):
    from nbclient import NotebookClient

    nb = nbformat.read(str(paths.NOTEBOOKS / name), as_version=4)
    NotebookClient(nb, kernel_name=nb.metadata["kernelspec"]["name"], timeout=300,
                   resources={"metadata": {"path": str(paths.NOTEBOOKS)}}).execute()
    return nb
