"""`parity-kit verify` on what is no verifiable run: one line, exit 3, and nothing extracted outside a temporary
folder (a zip member named to lead out, or a link, is refused before anything is written)."""

from __future__ import annotations

import json
import stat
import zipfile

import pytest

from kit.cli import main


def refused(capsys, path) -> str:
    assert main(["verify", str(path)]) == 3
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    return err.strip().removeprefix("parity-kit: bad input: ")


def a_zip(path, members: dict[str, bytes], links: tuple[str, ...] = ()):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, "/etc/passwd")
    return path


def test_a_folder_that_is_no_run_and_a_run_that_seals_nothing(tmp_path, capsys):
    assert refused(capsys, tmp_path) == (f"{tmp_path}: not a gate run (no manifest.json); verify a run directory or "
                                         "its zip")
    (tmp_path / "manifest.json").write_text(json.dumps({"name": "tiny", "cases": []}))
    assert refused(capsys, tmp_path) == (f"{tmp_path}: its manifest seals no files (a run of an earlier kit, or one "
                                         "that never finished): nothing to verify it against")
    assert refused(capsys, tmp_path / "nowhere") == f"{tmp_path / 'nowhere'}: no such run directory or zip"


@pytest.mark.parametrize("members, links, said", [
    ({"run/manifest.json": b"{}", "run/../../escaped": b"x"}, (), "member 'run/../../escaped' leads out of its folder"),
    ({"/run/manifest.json": b"{}"}, (), "member '/run/manifest.json' leads out of its folder"),
    ({"run/manifest.json": b"{}"}, ("run/cases/x.json",), "member 'run/cases/x.json' is a link"),
])
def test_a_zip_member_leading_out_or_a_link_is_refused_and_nothing_extracted(tmp_path, capsys, members, links, said):
    path = a_zip(tmp_path / "run.zip", members, links)
    assert refused(capsys, path).startswith(f"{path}: {said}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.zip"]


def test_a_truncated_zip_or_one_of_two_folders_is_refused(tmp_path, capsys):
    whole = a_zip(tmp_path / "whole.zip", {"run/manifest.json": b"{}" * 1000})
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole.read_bytes()[:200])
    assert refused(capsys, cut).startswith(f"{cut}: not a readable zip (")
    two = a_zip(tmp_path / "two.zip", {"a/manifest.json": b"{}", "b/manifest.json": b"{}"})
    assert refused(capsys, two) == (f"{two}: not a run's zip (`parity-kit report --attach` puts one folder at its "
                                    "root; this one has 2)")
