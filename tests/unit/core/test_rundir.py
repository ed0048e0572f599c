"""One reader of run directories (kit.core.records.rundir): every path it follows stays inside its root, and a walk says
what it did not look into instead of skipping it in silence (issue 37, "Four readers of a run directory")."""

from __future__ import annotations

import pytest

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import write_json
from kit.core.records.recordcheck import Wrong
from kit.core.records.resultcheck import check_manifest
from kit.core.records import store
from kit.core.records.store import local_store

pytestmark = pytest.mark.unit


def run(folder):
    write_json(folder / rundir.MANIFEST, {"name": "t", "cases": []})
    return folder


def found(root) -> list[str]:
    return [f.location for f in store.walk(local_store(root)).found]


@pytest.mark.parametrize("name", ["../../../x", "/etc/passwd", "a/b", "..", ".", "", "a\\b", "x\ny"])
def test_a_case_name_that_leads_out_of_the_run_is_refused_in_one_line(tmp_path, name):
    with pytest.raises(BadInput) as refused:
        rundir.case_file(tmp_path / rundir.CASES, name)
    assert repr(name) in str(refused.value) and "refused" in str(refused.value)
    assert "\n" not in str(refused.value).replace(repr(name), "")
    with pytest.raises(Wrong, match=r"cases\[1\]: expected a"):
        check_manifest({"name": "t", "cases": ["ok", name]})


def test_a_link_leading_out_of_the_root_is_refused(tmp_path):
    (tmp_path / "secret.json").write_text("{}")
    root = tmp_path / "run"
    (root / rundir.CASES).mkdir(parents=True)
    (root / rundir.CASES / "a.json").symlink_to(tmp_path / "secret.json")
    with pytest.raises(BadInput, match="a link leading out of"):
        rundir.inside(rundir.case_file(root / rundir.CASES, "a"), root)
    with pytest.raises(BadInput, match="is not a path inside it"):
        rundir.member(root, "../secret.json")


def test_a_stray_manifest_at_the_root_hides_no_run_below_it(tmp_path):
    run(tmp_path)
    run(tmp_path / "a")
    run(tmp_path / "b" / "c")
    assert found(tmp_path) == ["", "a", "b/c"]


def test_a_run_behind_a_link_inside_the_root_is_found_once_and_a_loop_ends(tmp_path):
    run(tmp_path / "real" / "r1")
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "real" / "loop").symlink_to(tmp_path, target_is_directory=True)
    walked = store.walk(local_store(tmp_path))
    assert [f.location for f in walked.found] == ["alias/r1"]
    assert {s.kind for s in walked.skipped} == {store.NotWalked.AGAIN}


def test_a_link_leading_out_of_the_root_is_said_not_followed(tmp_path):
    run(tmp_path / "elsewhere" / "r")
    root = tmp_path / "runs"
    root.mkdir()
    (root / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    walked = store.walk(local_store(root))
    assert walked.found == []
    assert [(s.location, s.kind) for s in walked.skipped] == [("out", store.NotWalked.OUTSIDE)]
    assert "a link leading out of the root" in walked.skipped[0].text


def test_hidden_and_deep_folders_are_said_not_looked_into(tmp_path):
    run(tmp_path / ".trash" / "old")
    (tmp_path / ".history").mkdir()  # the history's own index: no run there
    deep = tmp_path.joinpath(*"abcdefghij")
    run(deep)
    run(tmp_path.joinpath(*"abcdefg"))  # seven folders down: found
    walked = store.walk(local_store(tmp_path))
    assert [f.location for f in walked.found] == ["a/b/c/d/e/f/g"]
    assert [(s.location, s.kind) for s in walked.skipped] == [
        (".trash", store.NotWalked.HIDDEN), ("a/b/c/d/e/f/g/h/i", store.NotWalked.DEEP)]


def test_a_control_stands_for_its_two_runs(tmp_path):
    for side in ("current", "candidate"):
        run(tmp_path / "c" / side)
    write_json(tmp_path / "c" / rundir.CONTROL, {"current": "1.0", "candidate": "1.1",
                                                 "runs": {"1.0": "current", "1.1": "candidate"}})
    walked = store.walk(local_store(tmp_path))
    assert [(f.location, f.kind) for f in walked.found] == [("c", store.FolderKind.CONTROL_DIR)]
    assert rundir.control_run_dirs(tmp_path / "c") == (tmp_path / "c" / "current", tmp_path / "c" / "candidate")


def test_a_control_record_naming_a_run_outside_it_is_refused(tmp_path):
    write_json(tmp_path / rundir.CONTROL, {"current": "1.0", "candidate": "1.1",
                                           "runs": {"1.0": "../x", "1.1": "candidate"}})
    with pytest.raises(BadInput, match=r"control.json: malformed control record: runs.1.0"):
        rundir.control_run_dirs(tmp_path)
