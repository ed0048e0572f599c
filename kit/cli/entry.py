"""The `parity-kit` command: parse, call one command, map its outcome to an exit code.

Each command is a module of this package named for it that adds its parser and holds its handler, beside the
commands that belong with it (``gate`` with ``check``, ``kernels`` and ``spec``; ``calibrate`` with ``power`` and
``fault``; ``fixture`` with ``digest``; ``history`` with ``publish``; ``refresh`` with ``bisect``; ``report`` with
``lab``), and ``tools`` holds the small ones that read the kit itself (``schema``, ``backends``, ``key``); what they
share is ``common``. A handler imports what it needs when it runs, so `--help` and bad-input
refusals answer without loading torch; it returns the command's exit code, and writes no file itself.
"""

from __future__ import annotations

import os
import sys

from kit import __version__
from kit.cli import (baseline, calibrate, control, fixture, gate, golden, history, localize, refresh, report, tools,
                     verify)
from kit.cli.common import Parser
from kit.core.errors import BadInput, Unrunnable
from kit.core.exitcodes import ExitCode, epilog
from kit.core.records import contract, paths
from kit.core.records.text import printable
from kit.run import output, stopping

# What `parity-kit --help` says of the command as a whole.
DESCRIPTION = """The `parity-kit` command.

Subcommands import what they need when they run, so `--help` and bad-input
refusals answer without loading torch.
"""
GROUPS = (gate, control, history, refresh, localize, fixture, golden, verify, report, calibrate, baseline, tools)
# Every command, in the order `parity-kit --help` lists them.
ORDER = ("gate", "control", "publish", "refresh", "bisect", "fixture", "golden", "verify", "report", "lab", "kernels",
         "spec", "calibrate", "power", "fault", "localize", "digest", "check", "schema", "backends", "key",
         "baseline", "history")


def main(argv: list[str] | None = None) -> int:
    """Run the one command ``argv`` names (default: this process's arguments) and return its exit code: its
    own, or 3 for bad input, 2 where no case could run, 130 and the like for a signal, 70 for a bug."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare `--` belongs to the program a command wraps (jupyter lab).
    passthrough = argv[argv.index("--") + 1:] if "--" in argv else []
    args = _parser().parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.passthrough = passthrough
    output.setup(args.verbosity)  # every command's lines go through logging from here
    # Kernels started from here (gate cases, JupyterLab) find the main environment through this.
    os.environ.setdefault(contract.MAIN_PYTHON_ENV, sys.executable)
    try:
        if _runs_embedded_descriptor(args):
            paths.require_embedded_data()  # a wheel installed without its data: one line, not a traceback
        with stopping.on_signals():  # SIGTERM, SIGHUP, SIGINT (even inherited as ignored) end kernels too
            code = args.func(args)
            sys.stdout.flush()  # a reader gone early shows here, where it is caught, not at the exit's flush
            return code
    except BadInput as exc:
        print(f"parity-kit: bad input: {printable(str(exc))}", file=sys.stderr)  # it may quote a prompt id
        return ExitCode.BAD_INPUT
    except Unrunnable as exc:  # no case ran: no verdict, as for an incomplete run
        print(f"parity-kit: cannot run: {printable(str(exc))}", file=sys.stderr)
        return ExitCode.INCOMPLETE
    except KeyboardInterrupt as exc:
        print(f"parity-kit: {stopping.stop_words(exc)}", file=sys.stderr)
        return stopping.exit_code(exc)
    except BrokenPipeError:  # the reader of stdout left early (`| head`): end quietly, as Unix filters do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not raise again
        return ExitCode.BROKEN_PIPE
    except Exception as exc:  # a bug, not bad input: its own code, so CI never reads it as a verdict
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(printable(f"parity-kit: internal error: {type(exc).__name__}: {exc}".splitlines()[0]), file=sys.stderr)
        return ExitCode.INTERNAL


def _runs_embedded_descriptor(args) -> bool:
    """Whether the command reads the embedded descriptor (every descriptor argument's default)."""
    if getattr(args, "descriptors", None) == []:  # `kernels` with none named
        return True
    return getattr(args, "descriptor", None) == str(paths.EMBEDDED_DESCRIPTOR)


def _parser() -> Parser:
    p = Parser(prog="parity-kit", description=DESCRIPTION, epilog=epilog(*ExitCode))
    p.add_argument("--version", action="version", version=f"parity-kit {__version__}")
    level = p.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=output.QUIET,
                       default=output.NORMAL, help="print only the verdict lines (refusals still go to stderr)")
    level.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=output.VERBOSE,
                       help="more detail: each case's start, its buckets in the heartbeat, every model hashing")
    sub = p.add_subparsers(required=True, metavar="COMMAND")
    adders = {name: add for group in GROUPS for name, add in group.COMMANDS.items()}
    for name in ORDER:
        adders[name](sub)
    return p
