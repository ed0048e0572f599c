"""A control runs each release in a folder named after it (``<control>/<release>/``), so a release name is a
plain name: ``../../x`` would write the candidate's run outside the control folder. Refused before anything
runs, in one line: as --current or --candidate, and as a [releases] table of the descriptor."""

from __future__ import annotations

import pytest

from kit.core.records import paths
from support import parity_kit, releases, write_descriptor


def refused(proc) -> str:
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0].removeprefix("parity-kit: bad input: ")


@pytest.mark.parametrize("flag", ["--current", "--candidate"])
@pytest.mark.parametrize("name, problem", [("../../x", "it holds a path separator"),
                                           ("..", ".. names a folder that is already there"),
                                           ("", "it is empty"),
                                           ("-rf", "it starts with a dash")])
def test_a_release_flag_that_is_no_plain_name_is_refused_before_anything_runs(tmp_path, embedded, flag, name,
                                                                              problem):
    desc = write_descriptor(tmp_path, embedded, releases=releases())
    out = tmp_path / "deep" / "er" / "control"
    line = refused(parity_kit("control", desc, f"{flag}={name}", "--out", out))
    assert line == f"{flag}: release {name!r} is not a plain name for a folder: {problem}"
    assert list(tmp_path.iterdir()) == [desc]  # no control folder, nothing beside it


def test_a_descriptor_release_that_is_no_plain_name_is_refused_at_its_line(tmp_path, embedded):
    # Refused where the descriptor loads, so by every command (check here: no case would run if it slipped by).
    rel = releases()
    rel["../../x"] = rel.pop("candidate")
    desc = write_descriptor(tmp_path, embedded, releases=rel)
    line = refused(parity_kit("check", desc, "--release", "../../x"))
    at = next(n for n, text in enumerate(desc.read_text().splitlines(), 1) if text.startswith('[releases."../../x"'))
    assert line == (f"{desc}:{at}: release name '../../x' is not a plain name for a folder: "
                    "it holds a path separator")
    assert list(tmp_path.iterdir()) == [desc]


@pytest.mark.parametrize("name", ["current", "candidate", "vllm-fork-20240102-0123456789ab", "v1.2_rc"])
def test_plain_names_pass(name):
    assert paths.plain_name_problem(name) is None
    paths.check_plain_name(name, "release")
