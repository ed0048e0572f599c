"""A rendered page names itself and its files for any reader: its <title> carries what it is about and its verdict,
and its provenance names files relative to the repository or the run, never by a machine's absolute paths."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from kit.core.records import paths
from kit.core.records.results import RunView
from kit.run.notebook import TITLE_SCRAP, render_html
from kit.views.audit import page_command, page_path, page_title, provenance_table

pytestmark = pytest.mark.unit


def glued(name: str, text: str) -> nbformat.NotebookNode:
    """A cell output as `scrapbook.glue(name, text)` writes it into an executed notebook (scrapbook's format 1)."""
    return nbformat.v4.new_output("display_data", data={"application/scrapbook.scrap.text+json": {
        "name": name, "data": text, "encoder": "text", "version": 1}},
        metadata={"scrapbook": {"name": name, "data": True, "display": False}})


def page(tmp_path: Path, *outputs) -> str:
    cell = nbformat.v4.new_code_cell("pass", outputs=list(outputs))
    notebook = tmp_path / "summary.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), notebook)
    return render_html(notebook).read_text(encoding="utf-8")


def test_the_page_is_titled_by_its_glued_title_escaped(tmp_path):
    title = page_title("tiny-cpu", "failed", "parity gate")
    assert title == "tiny-cpu: failed — parity gate"
    assert "<title>tiny-cpu: failed — parity gate</title>" in page(tmp_path, glued(TITLE_SCRAP, title))
    # A descriptor's name is the world's text: it is escaped like the rest of the page.
    assert "<title>a&lt;b&gt;: passed — parity gate</title>" in page(
        tmp_path, glued(TITLE_SCRAP, page_title("a<b>", "passed", "parity gate")))
    # Another scrap is no title: nbconvert's own stands (the same in every tab).
    assert "<title>Notebook</title>" in page(tmp_path, glued("gate_verdict", "passed"))
    assert page_title("tiny-cpu", None, "parity history") == "tiny-cpu — parity history"


def test_files_are_named_relative_to_the_repository_else_to_the_run(tmp_path):
    run = tmp_path / "runs" / "gate-1"
    assert page_path(paths.DESCRIPTORS / "tiny-cpu.toml", run) == "descriptors/tiny-cpu.toml"
    assert page_path(run / "cases" / "hf.json", run) == "cases/hf.json"
    assert page_path(tmp_path / "models" / "llama", run) == "../../models/llama"
    assert page_path(run, run) == "."
    assert page_command(["parity-kit", "gate", str(tmp_path / "d.toml"), "--out", str(run),
                         f"--junit={tmp_path / 'j.xml'}", "--case", "hf-bf16"], run) == (
        "parity-kit gate ../../d.toml --out . --junit=../../j.xml --case hf-bf16")


def test_the_provenance_shows_no_absolute_path(tmp_path):
    run = tmp_path / "runs" / "gate-1"
    manifest = {"cases": [], "descriptor": str(tmp_path / "mine.toml"), "fixture": str(paths.DATA_ROOT / "fixtures"
                                                                                         / "f.json"),
                "model": str(tmp_path / "models" / "llama"),
                "goldens": {"semantic": {"path": str(tmp_path / "goldens" / "g.json"), "sha256": "ab" * 32}},
                "command": ["parity-kit", "gate", str(tmp_path / "mine.toml"), "--out", str(run)]}
    rows = dict(provenance_table(RunView(run, manifest, {}, {})).set_index("what")["value"])
    assert rows["descriptor"] == "../../mine.toml" and rows["fixture"] == "fixtures/f.json"
    assert rows["model"] == "../../models/llama" and rows["golden (semantic)"] == "../../goldens/g.json"
    assert rows["command"] == "parity-kit gate ../../mine.toml --out ."
    shown = provenance_table(RunView(run, manifest, {}, {})).to_string()
    assert str(tmp_path) not in shown and str(paths.DATA_ROOT) not in shown
