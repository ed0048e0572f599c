"""The summary shows the result its executor recorded, whole: a retried case's triage reaches it, and a notebook
that glues a second result scrap with other numbers does not win over the file the verdict stands on (issue 37)."""

from __future__ import annotations

import nbformat
import pytest

from kit.core.records import contract, rundir
from kit.core.records.jsonio import write_json
from kit.views.summary import load_run
from support.history import case_result

pytestmark = pytest.mark.unit


def scrap_output(data: dict) -> dict:
    """A display output as scrapbook's glue writes it."""
    name = contract.CASE_RESULT_SCRAP
    return nbformat.v4.new_output("display_data", data={"application/scrapbook.scrap.json+json": {
        "name": name, "data": data, "encoder": "json", "version": 1}},
        metadata={"scrapbook": {"name": name, "data": True, "display": False}})


def test_the_executor_result_wins_over_a_second_scrap_and_keeps_its_triage(tmp_path):
    recorded = case_result("hf-bf16", {128: [0.00857]}, status="failed")
    recorded["triage"] = {"class": "numeric", "evidence": "1 prompt over its bound"}
    recorded["attempts"] = [{"attempt": 1, "triage": {"class": "infrastructure", "evidence": "kernel died"}}]
    glued = case_result("hf-bf16", {128: [0.000172]}, status="failed")
    write_json(tmp_path / rundir.MANIFEST, {"name": "t", "cases": ["hf-bf16"], "kit_version": "0.1.0"})
    write_json(tmp_path / rundir.CASES / "hf-bf16.json", recorded)
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("glue", outputs=[scrap_output(recorded), scrap_output(glued)]))
    nbformat.write(nb, tmp_path / rundir.CASES / "hf-bf16.ipynb")
    view = load_run(tmp_path)
    result = view.results["hf-bf16"]
    assert view.sources["hf-bf16"] == "executor"
    assert result.max_probability_error == pytest.approx(0.00857)
    assert result.triage == recorded["triage"] and result.attempts == recorded["attempts"]


def test_a_case_the_executor_recorded_nothing_for_is_read_from_its_scrap(tmp_path):
    glued = case_result("hf-bf16", {128: [0.001]})
    write_json(tmp_path / rundir.MANIFEST, {"name": "t", "cases": ["hf-bf16"], "kit_version": "0.1.0"})
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("glue", outputs=[scrap_output(glued)]))
    (tmp_path / rundir.CASES).mkdir()
    nbformat.write(nb, tmp_path / rundir.CASES / "hf-bf16.ipynb")
    view = load_run(tmp_path)
    assert view.sources == {"hf-bf16": "scrap"}
