"""A case's (and a descriptor's) name is part of every file name the kit derives from it: a name the file system
cannot hold is refused as the descriptor loads, at its line, and every name derived from the longest one allowed
is made for real here."""

from __future__ import annotations

import os
import tempfile

import pytest

from kit.core.records import rundir
from kit.core.records.jsonio import write_json
from kit.descriptor.schema import MAX_NAME
from support import parity_kit, write_descriptor

pytestmark = pytest.mark.unit


def test_every_file_the_kit_names_after_the_longest_name_can_be_made(tmp_path):
    name = "c" * MAX_NAME
    cases = tmp_path / rundir.CASES
    for suffix in (*rundir.CASE_FILES, rundir.CASE_REFERENCE):
        # write_json writes through a temporary .<name><suffix>.<random>.tmp beside it
        assert write_json(rundir.case_file(cases, name, suffix), {}).name == f"{name}{suffix}"
        kept = cases / rundir.SUPERSEDED / f"{name}.{10**6}{suffix}"  # an earlier attempt's files, moved aside
        assert write_json(kept, {}).is_file()
    for kind in ("localize", "calibrate", "control"):
        rundir.new_run_dir(kind, name, str(tmp_path)).mkdir()
    for prefix in (f"parity-kit-vllm-{name}-", f"parity-kit-calibrate-{name}-"):
        made = tempfile.mkdtemp(prefix=prefix, dir=tmp_path)
        assert os.path.isdir(made)
    assert all(len(p.name.encode()) <= 255 for p in tmp_path.rglob("*"))


def test_a_case_name_longer_than_the_limit_is_refused_at_its_line(tmp_path, embedded):
    long = "c" * 250
    case = embedded.doc["cases"]["hf-bf16"]
    desc = write_descriptor(tmp_path, embedded, cases={long: case})
    line_no = next(n for n, line in enumerate(desc.read_text().splitlines(), start=1) if long in line)
    for command in ("check", "gate"):
        proc = parity_kit(command, desc, *(("--out", tmp_path / "run") if command == "gate" else ()))
        assert proc.returncode == 3, proc.stderr
        [line] = [line for line in proc.stderr.splitlines() if line.strip()]
        assert line.startswith(f"parity-kit: bad input: {desc}:{line_no}: case name ccc")
        assert f"is 250 characters long, more than {MAX_NAME}" in line
    assert not (tmp_path / "run").exists()


def test_a_case_name_at_the_limit_loads(tmp_path, embedded):
    name = "c" * MAX_NAME
    desc = write_descriptor(tmp_path, embedded, cases={name: embedded.doc["cases"]["hf-bf16"]})
    proc = parity_kit("check", desc)
    assert proc.returncode == 0, proc.stderr


def test_a_descriptor_name_longer_than_the_limit_is_refused(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded)
    desc.write_text(desc.read_text().replace('name = "test"', f'name = "{"d" * (MAX_NAME + 1)}"'))
    proc = parity_kit("check", desc)
    assert proc.returncode == 3, proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.strip()]
    assert f"{desc}:1: name:" in line and f"at most {MAX_NAME} characters" in line
