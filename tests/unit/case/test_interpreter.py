"""One way to run Python in another interpreter: which one is the main environment's, what a run captures, how a
failure is told, and a kernel that is not installed refused in one line."""

from __future__ import annotations

import sys

import pytest

from kit.case import interpreter
from kit.core.records import contract
from kit.core.errors import BadInput


def test_the_main_interpreter_is_the_one_named_else_this_one(monkeypatch):
    monkeypatch.setenv(contract.MAIN_PYTHON_ENV, "/elsewhere/bin/python")
    assert interpreter.main_python() == "/elsewhere/bin/python"
    monkeypatch.delenv(contract.MAIN_PYTHON_ENV)
    assert interpreter.main_python() == sys.executable


def test_a_run_captures_both_streams_as_text_and_reads_its_stdin():
    proc = interpreter.run_python(sys.executable, ["-c", "import sys; print(sys.stdin.read().upper()); "
                                                         "sys.exit('refused: no such case')"], input="spec")
    assert (proc.returncode, proc.stdout) == (1, "SPEC\n")
    assert interpreter.last_line(proc.stderr, f"exit {proc.returncode}") == "refused: no such case"


def test_a_silent_failure_is_told_by_the_default():
    assert interpreter.last_line("\n  \n", "exit 3") == "exit 3"


def test_a_kernel_that_is_not_installed_is_one_line():
    with pytest.raises(BadInput, match=r"^case c: its kernel 'no-such-kernel' is not installed"):
        interpreter.kernel_python("no-such-kernel", "c")
