"""`parity-kit control`: the gate against today's pin and the candidate side by side, then whose fault a failure
is."""

from __future__ import annotations

from kit.cli.common import command_line, jobs, publish_target
from kit.core.exitcodes import epilog, ExitCode
from kit.core.records import paths


def _add_control(sub) -> None:
    c = sub.add_parser("control", help="gate today's pin and the candidate, then say whose fault a failure is",
                       description="Runs the gate against two releases of the descriptor side by side and\n"
                                   "diagnoses whose fault a failure is.",
                       epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT,
                                     ExitCode.BLOCKER, ExitCode.INTERRUPTED))
    c.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                   help="descriptor TOML with [releases.current] and [releases.candidate]")
    c.add_argument("--out", help="control directory to create (default: runs/control-<name>-<time>-<id>)")
    c.add_argument("--current", default="current", help="the release pinned today (default: current)")
    c.add_argument("--candidate", default="candidate", help="the release to qualify (default: candidate)")
    c.add_argument("--jobs", type=jobs, help="cases run side by side, both runs together (default: the cores, "
                                              "and for cases that ask for GPUs the free GPUs)")
    c.add_argument("--case", action="append", dest="cases", help="run only this case (repeatable)")
    c.add_argument("--no-summary", action="store_true", help="skip the control and summary notebooks")
    c.add_argument("--junit", metavar="FILE", help="also write JUnit XML: one testsuite per release")
    c.add_argument("--publish", metavar="URL", help="copy the finished control directory, both runs in it, to "
                                                    "URL/<control>/, as gate --publish does")
    c.set_defaults(func=_control)


def _control(args) -> int:
    from kit.control.run import ControlRequest, run_control

    run = run_control(ControlRequest(args.descriptor, out=args.out, jobs=args.jobs, only=args.cases,
                                     current=args.current, candidate=args.candidate, command=command_line("control"),
                                     summary=not args.no_summary, junit=args.junit,
                                     publish=publish_target(args.publish)))
    print(run.control_dir)
    return run.diagnosis.exit_code


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"control": _add_control}
