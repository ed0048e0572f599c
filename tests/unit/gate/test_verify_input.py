"""`parity-kit verify` on what is no verifiable run: one line, exit 3, and nothing extracted outside a temporary
folder (a zip member named to lead out, or a link, is refused before anything is written)."""

from __future__ import annotations

import dataclasses
import json
import stat
import struct
import zipfile

import pytest

from kit.cli import main
from kit.gate.verify.runcheck import Verified


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


def patched(path, central: int, local: int, value: int):
    """``path`` with a 2-byte field of every central directory header (at ``central``) and local file header (at
    ``local``) set to ``value``: what a zip that no writer here makes looks like (encrypted, another method)."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x01\x02", central), (b"PK\x03\x04", local)):
        at = data.find(signature)
        while at >= 0:
            data[at + offset: at + offset + 2] = struct.pack("<H", value)
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))
    return path


def test_an_encrypted_member_or_an_unknown_method_is_refused(tmp_path, capsys):
    encrypted = patched(a_zip(tmp_path / "encrypted.zip", {"run/manifest.json": b"{}"}), 8, 6, 0x1)
    assert refused(capsys, encrypted) == (f"{encrypted}: member 'run/manifest.json' is encrypted; a run's zip is not; "
                                          "nothing extracted")
    unknown = patched(a_zip(tmp_path / "method.zip", {"run/manifest.json": b"{}"}), 10, 8, 99)
    assert refused(capsys, unknown) == (f"{unknown}: member 'run/manifest.json' uses compression method 99, which "
                                        "cannot be read here (stored, deflate, bzip2 or lzma); nothing extracted")


def test_a_corrupt_stream_is_one_line_whatever_python_raises_for_it(tmp_path, capsys):
    path = tmp_path / "corrupt.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("run/manifest.json", json.dumps({"cases": list(range(2000))}))
    data = bytearray(path.read_bytes())
    start = data.find(b"PK\x03\x04") + 30 + len("run/manifest.json")
    data[start + 5: start + 40] = b"\xff" * 35  # inside the deflate stream
    path.write_bytes(bytes(data))
    said = refused(capsys, path)
    assert said.startswith(f"{path}: ") and ("not a readable zip" in said or "could not be read whole" in said)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.zip"]


def test_a_zip_bomb_duplicates_and_odd_files_are_refused_before_anything_is_extracted(tmp_path, capsys):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("run/manifest.json", b"{}")
        z.writestr("run/cases/x.evidence.json", bytes(32 << 20))  # 32 MiB of zeros deflate about 1000 times
    said = refused(capsys, path)
    assert said.startswith(f"{path}: member 'run/cases/x.evidence.json' inflates 33554432 bytes from ")
    assert said.endswith("more than 200 times: not a run's file; nothing extracted")
    with pytest.warns(UserWarning):  # zipfile warns of a second member of one name, and writes it
        twice = a_zip(tmp_path / "twice.zip", {"run/manifest.json": b"{}"})
        with zipfile.ZipFile(twice, "a") as z:
            z.writestr("run//manifest.json", b'{"cases": []}')
            z.writestr("run/manifest.json", b'{"cases": []}')
    assert refused(capsys, twice) == (f"{twice}: member 'run//manifest.json' is in the zip twice; which one is the "
                                      "run's cannot be told; nothing extracted")
    fifo = tmp_path / "fifo.zip"
    with zipfile.ZipFile(fifo, "w") as z:
        info = zipfile.ZipInfo("run/cases/x.json")
        info.external_attr = (stat.S_IFIFO | 0o644) << 16
        z.writestr(info, b"")
    assert refused(capsys, fifo).startswith(f"{fifo}: member 'run/cases/x.json' is not a plain file (mode ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.zip", "fifo.zip", "twice.zip"]


def test_the_limit_on_what_a_zip_extracts_holds_for_the_sum_and_as_it_inflates(tmp_path, capsys, monkeypatch):
    from kit.gate.verify import runzip

    path = a_zip(tmp_path / "big.zip", {"run/manifest.json": b"{}", "run/cases/x.json": b"x" * 5000})
    monkeypatch.setattr(runzip, "MAX_EXTRACTED", 4000)
    assert refused(capsys, path) == (f"{path}: its members would take 5002 bytes, more than 4000 (a run's zip takes "
                                     "a few MB); nothing extracted")
    lying = tmp_path / "lying.zip"
    with zipfile.ZipFile(lying, "w") as z:  # stored: its declared size patched below what it holds
        z.writestr("run/manifest.json", b"{" + b" " * 3000 + b"}")
    data = bytearray(lying.read_bytes())
    for signature, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):  # uncompressed size
        at = data.find(signature)
        data[at + offset: at + offset + 4] = struct.pack("<I", 10)
    lying.write_bytes(bytes(data))
    said = refused(capsys, lying)
    assert said.startswith(f"{lying}: ")


def test_what_verify_found_is_a_frozen_record():
    """Every check adds to verify_run's own list of problems; the answer is built once, from all of them."""
    found = Verified("run", problems=("a", "b"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.verdict = "passed"  # type: ignore[misc]
    assert not found.ok and found.lines() == ["not verified: run: 2 problem(s)", "  a", "  b"]
