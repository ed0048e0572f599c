"""Artifacts are written atomically and with the mode the umask gives (not mkstemp's 0600); a lone surrogate in
JSON text is found where its escape stands, for a message to point at; a file named by its own SHA-256 is read
through one check, whatever record it holds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kit.core.records.jsonio import lone_surrogate_at


def test_written_files_follow_the_umask(tmp_path):
    script = ("import os, sys; os.umask(int(sys.argv[2], 8)); from kit.core.records.jsonio import write_json; "
              "write_json(sys.argv[1], {'a': 1})")
    for umask, mode in (("022", 0o644), ("002", 0o664), ("077", 0o600)):
        target = tmp_path / f"result-{umask}.json"
        subprocess.run([sys.executable, "-c", script, str(target), umask], check=True)
        assert oct(os.stat(target).st_mode & 0o777) == oct(mode)
        assert target.read_text() == '{\n  "a": 1\n}\n'
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary file is left behind"


@pytest.mark.parametrize("text, place", [
    ('{"id":"bad\\ud800id"}', (1, 11)),            # a high half alone
    ('{"a":"ok",\n "id":"\\udc00"}', (2, 8)),      # a low half alone, on the second line
    ('{"id":"\\ud800x\\udc00"}', (1, 8)),          # halves apart are no pair
    ('{"id":"\\ud83d\\ude00 \\\\ud800"}', None),   # a pair, then an escaped backslash and text
    ('{"id":"\\uD800"}', (1, 8)),                  # escapes may be upper case
])
def test_a_lone_surrogate_is_found_where_its_escape_stands(text, place):
    assert lone_surrogate_at(text) == place



@pytest.mark.parametrize("read, noun", [
    ("kit.core.noise.calibration:load_record", "record"),
    ("kit.core.noise.power:read_power", "power record"),
    ("kit.core.baselines.lineage:load_entry", "entry"),
])
def test_every_content_addressed_reader_refuses_edited_bytes_and_a_wrong_name_alike(tmp_path, read, noun):
    """Calibration records, power records and lineage entries are read through one check (read_addressed): their
    bytes canonical JSON, their name their SHA-256, refused in the same words before anything of their kind is
    looked at."""
    import importlib

    from kit.core.errors import BadInput
    from kit.core.records.jsonio import canonical_bytes, sha256_bytes

    module, name = read.split(":")
    reader = getattr(importlib.import_module(module), name)
    loose = b'{"a": 1}\n'
    path = tmp_path / f"{sha256_bytes(loose)}.json"
    path.write_bytes(loose)
    with pytest.raises(BadInput) as exc:
        reader(path)
    assert str(exc.value).startswith(f"{path}: not canonical JSON (sorted keys, no spaces, one trailing newline, as "
                                     f"the kit writes a {noun}): the {noun} was edited; ")
    data = canonical_bytes({"a": 1})
    path = tmp_path / f"{'0' * 64}.json"
    path.write_bytes(data)
    with pytest.raises(BadInput) as exc:
        reader(path)
    assert str(exc.value).startswith(f"{path}: name is not the {noun}'s SHA-256 ({sha256_bytes(data)}): "
                                     f"the {noun} was changed after it was made; ")
