"""One lifecycle for every command that owns a folder (kit.run.lifecycle): the folder claimed by one rule, locked,
signals turned into a stop, and how the command ended recorded also when it was stopped; every such command
enters it, and none claims, locks or installs signal handlers by hand (issue 53, "Five commands hand-write their
lifecycle")."""

from __future__ import annotations

import ast
import contextlib
import os
import signal
from pathlib import Path

import pytest

from kit.calibrate import run as calibrate_run
from kit.calibrate.run import INDEX, calibrate
from kit.core.errors import BadInput
from kit.core.records.jsonio import read_json
from kit.run import lifecycle, runlock
from kit.run.stopping import Stopped
from support import write_descriptor

pytestmark = pytest.mark.unit

KIT = Path(__file__).resolve().parents[3] / "kit"
# Each command that owns a folder, by the module its entry is in.
COMMANDS = {"gate": "gate/session.py", "gate's claim": "gate/executor.py", "calibrate": "calibrate/run.py",
            "power": "faults/power.py", "localize": "localize/run.py", "bisect": "bisect/run.py",
            "refresh": "refresh/run.py", "control": "control/run.py", "baseline make": "baselines/make.py",
            "golden regen": "goldens/regen.py", "fault inject": "faults/inject.py", "history": "history/command.py"}
# What only the lifecycle (and the modules it is built on) may call: a claim, a signal handler's install.
BY_HAND = {"on_signals", "claim_empty_dir"}


def _calls(source: str) -> list[tuple[str, int]]:
    """Each call in ``source`` by the name it calls, with its line."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            out.append((f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ""), node.lineno))
    return out


def _empty_tests(source: str) -> list[int]:
    """The lines of ``any(<folder>.iterdir())``: an emptiness test of a folder's own."""
    return [n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "any" and n.args
            and isinstance(n.args[0], ast.Call) and getattr(n.args[0].func, "attr", "") == "iterdir"]


@pytest.mark.parametrize("command, module", COMMANDS.items())
def test_each_command_that_owns_a_folder_enters_the_lifecycle(command, module):
    source = (KIT / module).read_text(encoding="utf-8")
    used = {name for name, _ in _calls(source)} & {"claim", "claimable", "claim_locked", "locked", "owned", "ending"}
    assert used, f"{command} ({module}) does not enter kit.run.lifecycle"
    assert [f"{module}:{line}: {name}" for name, line in _calls(source) if name in BY_HAND] == []
    assert [f"{module}:{line}" for line in _empty_tests(source)] == []


def test_the_guard_finds_a_command_that_claims_by_hand():
    planted = "def run(out):\n    if out.exists() and any(out.iterdir()):\n        raise X\n    with on_signals():\n" \
              "        pass\n"
    assert _empty_tests(planted) == [2]
    assert [line for name, line in _calls(planted) if name in BY_HAND] == [4]


def test_a_full_folder_is_refused_in_one_line_with_what_to_do(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("earlier")
    with pytest.raises(BadInput) as refused:
        lifecycle.claim(tmp_path / "out", "--out", "calibration", hint="use --resume to continue a calibration")
    assert str(refused.value) == (f"--out {tmp_path / 'out'} exists and is not empty; a calibration never writes "
                                  "over an earlier one (use --resume to continue a calibration)")


def test_a_folder_a_live_command_holds_is_refused_naming_it(tmp_path):
    folder = lifecycle.claim(tmp_path / "out", "--out", "power measurement")
    with runlock.acquire(folder, ["parity-kit", "power", "d.toml"], what="power measurement"):
        with pytest.raises(BadInput, match=r"in use by another power measurement: pid \d+"):
            lifecycle.claim(folder, "--out", "power measurement")


@pytest.mark.parametrize("raised, outcome", [(None, lifecycle.Ended.FINISHED),
                                              (KeyboardInterrupt, lifecycle.Ended.STOPPED),
                                              (ValueError, lifecycle.Ended.FAILED)])
def test_the_end_is_recorded_however_the_command_ends_and_the_lock_is_let_go(tmp_path, raised, outcome):
    folder = lifecycle.claim(tmp_path / "out", "--out", "localize")
    told = []
    with pytest.raises(raised) if raised else contextlib.nullcontext():
        with lifecycle.owned(folder, ["parity-kit"], "localize", told.append):
            with pytest.raises(BadInput, match="in use by another localize"):
                runlock.acquire(folder, what="localize")
            if raised:
                raise raised()
    assert told == [outcome]
    runlock.acquire(folder).release()  # free again


def test_a_sigterm_stops_the_command_and_its_end_is_recorded(tmp_path):
    folder = lifecycle.claim(tmp_path / "out", "--out", "refresh")
    told = []
    with pytest.raises(Stopped):
        with lifecycle.owned(folder, None, "refresh", told.append):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a call after the signal: its handler has run
    assert told == [lifecycle.Ended.STOPPED]


def test_an_interrupted_calibration_records_its_finish_and_the_cases_it_measured(tmp_path, embedded, monkeypatch):
    both = {"backend": "hf", "golden": "semantic", "bound": 0.075, "dtype": "bfloat16", "buckets": [128]}
    desc = write_descriptor(tmp_path, embedded, cases={"a": both, "b": dict(both)})
    measured = []

    def one_case(plan, spec, run_dir, to, command):
        if measured:
            raise KeyboardInterrupt  # Ctrl-C while the second case is measured
        measured.append(spec.name)
        return calibrate_run.CaseCalibration(spec.name, None, None, "not measured here")

    monkeypatch.setattr(calibrate_run, "calibrate_case", one_case)
    with pytest.raises(KeyboardInterrupt):
        calibrate(desc, out=tmp_path / "cal", to=tmp_path / "records")
    index = read_json(tmp_path / "cal" / INDEX)
    assert index["outcome"] == lifecycle.Ended.STOPPED and index["finished_at"]
    assert index["cases"][measured[0]]["error"] == "not measured here"
    runlock.acquire(tmp_path / "cal").release()  # the lock went with the command

