"""What every command group of the CLI shares: the parser class, the epilog of a command that does its job or
refuses, the checks of a count given on the command line, and the command line as the user typed it.

Kept apart from kit.cli's entry so that each group imports these and nothing imports the entry back.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from kit.core.exitcodes import ExitCode, epilog


class Parser(argparse.ArgumentParser):
    """Every parser and subparser keeps the line breaks of its description and epilog (the exit codes)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A usage error is bad input (3) with argparse's usage message; argparse's own 2 is this
        command's "incomplete", which CI must never read from a mistyped flag."""
        self.print_usage(sys.stderr)
        self.exit(ExitCode.BAD_INPUT, f"{self.prog}: error: {message}\n")


def exits(done: str, *more: ExitCode) -> str:
    """The exit codes of a command that does its job or refuses; ``done`` says what 0 means for it."""
    return epilog(ExitCode.PASSED, *more, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                  meanings={ExitCode.PASSED: done})


def at_least(text: str, minimum: int) -> int:
    """A whole number of at least ``minimum`` from the command line, or a usage error (exit 3) saying so."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if n < minimum:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least {minimum}, got {text!r}")
    return n


def jobs(text: str) -> int:
    """``--jobs``: a count of cases at once, at least 1. Zero or less is refused as a usage error (exit 3, as
    ``--jobs many`` is): the executors read a falsy count as "no limit given" and clamp a negative one to 1,
    so either would run something other than what was asked, silently."""
    return at_least(text, 1)


def retries(text: str) -> int:
    """``--infra-retries``: how often an infrastructure failure runs again, 0 or more."""
    return at_least(text, 0)


def command_line(name: str) -> list[str] | None:
    """The command line as a user would retype it, for the reproduce line of the evidence."""
    return ["parity-kit", name, *sys.argv[2:]] if sys.argv[1:2] == [name] else None


def publish_target(given: str | None) -> str | None:
    """Where a finished run is published: ``given`` (--publish, publish's URL), else $PARITY_KIT_PUBLISH, else
    nowhere; asked of the history's publishing, whose module is imported only when a command publishes."""
    from kit.history.publish import default_target

    return default_target(given)
