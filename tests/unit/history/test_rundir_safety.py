"""The history reads run directories through the one reader (kit.core.records.rundir): a manifest naming a case outside
the run is refused in one line, a run behind a link or below a stray manifest is found once, and the index is a cache
that a damaged file never stops (issue 37, "Four readers of a run directory")."""

from __future__ import annotations

import logging

import pytest

from kit.core.records import rundir
from kit.core.records.jsonio import write_json
from kit.history import index as history_index
from kit.history.rows import LineKind, read_location
from kit.core.records.store import open_store
from support.history import case_result, gate_run

pytestmark = pytest.mark.unit


def test_a_case_name_leading_out_of_the_store_is_refused_not_read(tmp_path):
    store_root = tmp_path / "store"
    write_json(tmp_path / "x.json", case_result("x", {128: [0.01]}))  # outside the store
    run = gate_run(store_root, "r", {"hf-bf16": case_result("hf-bf16", {128: [0.01]})})
    write_json(run / rundir.MANIFEST, {"name": "tiny-cpu", "cases": ["../../../x"], "kit_version": "0.1.0"})
    read = read_location(open_store(str(store_root)), "r")
    assert read.runs == [] and read.cases == []
    [line] = read.lines
    assert line.kind == LineKind.SKIPPED and "cases[0]: expected a case name" in line.text
    assert "'../../../x'" in line.text


def test_runs_below_a_stray_manifest_and_behind_a_link_are_each_counted_once(tmp_path):
    write_json(tmp_path / rundir.MANIFEST, {"stray": True})
    gate_run(tmp_path, "a/r1", {"hf-bf16": case_result("hf-bf16", {128: [0.01]})})
    (tmp_path / "b").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "a" / "loop").symlink_to(tmp_path, target_is_directory=True)
    assert list(open_store(str(tmp_path)).run_dirs()) == ["", "a/r1"]


def test_a_damaged_index_is_rebuilt_with_a_line_saying_so(tmp_path, caplog):
    gate_run(tmp_path, "r1", {"hf-bf16": case_result("hf-bf16", {128: [0.01]})})
    store = open_store(str(tmp_path))
    path = history_index.update(store).path
    path.write_bytes(b"not a database" * 100)
    for rebuild in (False, True):
        with caplog.at_level(logging.WARNING, logger="kit.history.index"):
            done = history_index.update(store, rebuild=rebuild)
        assert done.read == 1
        assert "the history index is damaged" in caplog.text and "rebuilt" in caplog.text
        path.write_bytes(b"")
        caplog.clear()
