"""Every exit code of the `parity-kit` command, in one enum.

CI reads the code, not the log: 1 must mean "the engine broke parity" and nothing else, so bad
input (3) and an unfinished run (2) never share it.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    PASSED = 0          # gate passed; control: qualified
    FAILED = 1          # gate failed; control: regression in the candidate
    INCOMPLETE = 2      # a case errored, timed out or is missing
    BAD_INPUT = 3       # refused before (or instead of) running: one line says what and where
    BLOCKER = 4         # control: the baseline fails too (baseline blocker, or both broken)
    BUILD_STOPPED = 5   # refresh: the overlay did not replay or the wheels did not build
    NOT_QUALIFIED = 6   # refresh: the built release failed qualification
    INTERRUPTED = 130   # SIGINT

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.PASSED: "passed (control, refresh: qualified)",
    ExitCode.FAILED: "failed: a case is outside its bound (control, refresh: regression in the candidate)",
    ExitCode.INCOMPLETE: "incomplete: a case errored, timed out or is missing",
    ExitCode.BAD_INPUT: "bad input: one line says what and where; nothing ran",
    ExitCode.BLOCKER: "control, refresh: baseline blocker or both broken (the pin fails too)",
    ExitCode.BUILD_STOPPED: "refresh: the build stopped (conflict, failed build, existing release)",
    ExitCode.NOT_QUALIFIED: "refresh: qualification failed",
    ExitCode.INTERRUPTED: "interrupted",
}


def epilog(*codes: ExitCode, meanings: dict[ExitCode, str] | None = None) -> str:
    """The exit-code section of a command's --help; ``meanings`` words a code the way one command uses
    it (e.g. 1 for `kernels` is a missing kernel, not a failed case)."""
    said = {**_MEANINGS, **(meanings or {})}
    return "exit codes:\n" + "\n".join(f"  {int(c):>3}  {said[c]}" for c in codes)
