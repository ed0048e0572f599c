"""A control holds its folder while both runs go and its records are written: a second command into the folder
is refused naming the control (kit.run.lifecycle.locked), and the lock is let go however the control ends."""

from __future__ import annotations

import pytest

from kit.control import run as control
from kit.core.errors import BadInput
from kit.run import lifecycle

pytestmark = pytest.mark.unit


class Stop(Exception):
    pass


def test_a_control_folder_is_locked_while_the_control_runs(monkeypatch, embedded, tmp_path):
    out = tmp_path / "control"
    seen = {}

    class Session:
        def __init__(self, *a, **kw):
            pass

        def __enter__(self):
            with pytest.raises(BadInput) as held:  # another command asking for the folder now
                lifecycle.locked(out, ["parity-kit", "gate"], "gate run")
            seen["refusal"] = str(held.value)
            raise Stop

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(control, "check_run", lambda desc, only, release: None)
    monkeypatch.setattr(control, "GateSession", Session)
    with pytest.raises(Stop):
        control.run_control(control.ControlRequest(embedded.descriptor, out=out,
                                                   command=["parity-kit", "control", "x"]))
    assert "parity-kit control x" in seen["refusal"] and "\n" not in seen["refusal"]
    lifecycle.locked(out, None, "control run").release()  # let go once the control ended
