"""`parity-kit history` end to end: over a few run directories (one of them older than this kit reads, one whose
result.json disagrees with its case files) it renders the history notebook in the main kernel to HTML in a new
folder, with every case's plot, the margin table and the lines about what it did not read or trust."""

from __future__ import annotations

import json

import pytest
import scrapbook as sb

from kit.core.records import rundir
from kit.core.records.jsonio import write_json
from support import parity_kit
from support.history import case_result, gate_run, series

pytestmark = pytest.mark.e2e


def test_history_renders_its_notebook_over_a_store(tmp_path):
    runs = tmp_path / "runs"
    series(runs, [0.010 + 0.0008 * i for i in range(8)], releases=["2.2"] * 4 + ["2.3"] * 4)
    gate_run(runs, "tiny-cpu-z-disagrees", {"hf-bf16": case_result("hf-bf16", {128: [0.01], 256: [0.01]})},
             verdict="failed")
    write_json(runs / "tiny-cpu-old" / rundir.MANIFEST, {"kit_version": "0.0.1"})
    out = tmp_path / "history"

    proc = parity_kit("history", "--runs", runs, "--out", out, timeout=300)

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("history.html")
    html = (out / "history.html").read_text()
    assert "Parity history" in html and "Losing margin" in html and "<img" in html
    assert "<title>every descriptor — parity history</title>" in html
    scraps = sb.read_notebook(str(out / "history.ipynb")).scraps
    margins = scraps["history_margins"].data
    assert {(r["case"], r["bucket"]) for r in margins} == {("hf-bf16", 128), ("hf-bf16", 256)}
    kinds = sorted(line["kind"] for line in scraps["history_lines"].data)
    assert kinds == ["skipped", "verdict"]
    assert any(c["kind"] == "release" for c in scraps["history_changes"].data)
    assert json.loads((out / "history.json").read_text())["runs"] == 9

    again = parity_kit("history", "--runs", runs, "--out", out, timeout=60)
    assert again.returncode == 3 and "never writes over" in again.stderr  # an earlier rendering is kept
