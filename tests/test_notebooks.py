"""Notebooks are committed clean and stay thin: a tagged parameters cell, calls into kit."""

from __future__ import annotations

import nbformat
import pytest

from kit import paths

NOTEBOOKS = sorted(paths.NOTEBOOKS.glob("*.ipynb"))


def test_there_are_notebooks():
    assert {p.name for p in NOTEBOOKS} >= {"parity_hf.ipynb", "summary.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs; clear them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_one_tagged_parameters_cell_and_the_main_kernel(path):
    nb = nbformat.read(str(path), as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert nb.metadata["kernelspec"]["name"] == paths.MAIN_KERNEL
    nbformat.validate(nb)
