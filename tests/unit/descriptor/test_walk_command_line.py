"""benchmarks/descriptor_walk.py's command line: with no command named it walks both, a command named is walked
alone, and an unknown one is refused in one line naming the known ones."""

from __future__ import annotations

import sys

import pytest

from support import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import descriptor_walk  # noqa: E402

pytestmark = pytest.mark.unit


def test_no_command_named_walks_both():
    assert descriptor_walk.parse_args([]).commands == ["gate", "make"]


def test_a_command_named_is_walked_alone():
    assert descriptor_walk.parse_args(["make", "--json", "w.json"]).commands == ["make"]
    assert descriptor_walk.parse_args(["make", "gate"]).commands == ["make", "gate"]


def test_an_unknown_command_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        descriptor_walk.parse_args(["gate", "bisect"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("invalid choice: 'bisect' (choose from gate, make)")
