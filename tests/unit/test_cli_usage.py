"""A usage error is bad input (3), never argparse's 2, which parity-kit means as "incomplete"; and a reader
that leaves early (`| head`) ends the command quietly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kit.cli.entry import _parser, main
from kit.core.exitcodes import ExitCode
from support import ROOT


@pytest.mark.parametrize("argv, usage, error", [
    (["gate", "--bogus"], "usage: parity-kit [-h]", "parity-kit: error: unrecognized arguments: --bogus"),
    (["gate", "--jobs", "many"], "usage: parity-kit gate [-h]",
     "parity-kit gate: error: argument --jobs: invalid int value: 'many'"),
    (["golden", "make", "--model", "m", "--fixture", "f"], "usage: parity-kit golden make [-h]",
     "parity-kit golden make: error: the following arguments are required: --kind"),
    (["nonsense"], "usage: parity-kit [-h]", "parity-kit: error: argument COMMAND: invalid choice: 'nonsense' "),
])
def test_a_usage_error_exits_3_with_argparse_usage(capsys, argv, usage, error):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == ExitCode.BAD_INPUT
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(usage)
    assert lines[-1].startswith(error)


@pytest.mark.parametrize("jobs", ["0", "-3"])
@pytest.mark.parametrize("command", [["gate"], ["control"], ["golden", "regen"],
                                     ["refresh", "--fork-repo", "f", "--upstream-ref", "r"]])
def test_jobs_below_one_is_a_usage_error_like_any_bad_jobs(capsys, command, jobs):
    # Parsed only: before the fix these parsed, and running them would start a real gate.
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args([*command, "--jobs", jobs])
    assert exc.value.code == ExitCode.BAD_INPUT
    *_, last = capsys.readouterr().err.splitlines()
    assert last == (f"parity-kit {' '.join(command[:2] if command[0] == 'golden' else command[:1])}: error: "
                    f"argument --jobs: expected a whole number of at least 1, got '{jobs}'")
    assert _parser().parse_args([*command, "--jobs", "1"]).jobs == 1


@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_schema_into_a_reader_that_leaves_ends_without_a_traceback(reader):
    proc = subprocess.run(f"{sys.executable} -m kit.cli schema | {reader}; echo \"exit ${{PIPESTATUS[0]}}\"",
                          shell=True, executable="/bin/bash", cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stderr == ""
    *printed, status = proc.stdout.splitlines()
    assert printed == (["{"] if reader == "head -1" else [])
    # head may have read everything before it left (then nothing broke); `true` reads nothing
    allowed = {f"exit {int(ExitCode.BROKEN_PIPE)}"} | ({"exit 0"} if reader == "head -1" else set())
    assert status in allowed
