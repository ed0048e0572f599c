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
    NO_BASELINE = 7     # every case that ran passed, but an exact case has no golden for this runtime
    INCONCLUSIVE = 8    # nothing failed, but a case could not see a fault as small as the descriptor asks
    BORROWED_BOUNDS = 9  # a case failed only under bounds measured on another class of hardware, by what classes differ
    INTERNAL = 70       # an unexpected exception in the kit itself (EX_SOFTWARE): no verdict
    INTERRUPTED = 130   # SIGINT
    HANGUP = 129        # SIGHUP: 128 + the signal's number, the shell's convention for a process a signal ended
    TERMINATED = 143    # SIGTERM
    BROKEN_PIPE = 141   # 128 + SIGPIPE: the reader of stdout went away (`| head`), as Unix filters end

    @property
    def meaning(self) -> str:
        """What this exit code tells CI, in the words every command's --help epilog lists."""
        return _MEANINGS[self]


_MEANINGS = {
    ExitCode.PASSED: "passed (control, refresh: qualified)",
    ExitCode.FAILED: "failed: a case is outside its bound (control, refresh: regression in the candidate)",
    ExitCode.INCOMPLETE: "incomplete: a case errored, timed out or is missing",
    ExitCode.BAD_INPUT: "bad input: one line says what and where; nothing ran",
    ExitCode.BLOCKER: "control, refresh: baseline blocker or both broken (the pin fails too)",
    ExitCode.BUILD_STOPPED: "refresh: the build stopped (conflict, failed build, existing release)",
    ExitCode.NOT_QUALIFIED: "refresh: qualification failed",
    ExitCode.NO_BASELINE: ("no baseline for this runtime: an exact case has no golden made where it runs (neither "
                           "passed nor failed; the result names the command that makes one); the rest passed"),
    ExitCode.INCONCLUSIVE: ("inconclusive: nothing failed, but a case's detectable effect is over the limit its "
                            "descriptor states (or it scored fewer prompts than that effect was measured on): "
                            "neither passed nor failed"),
    ExitCode.BORROWED_BOUNDS: ("borrowed bounds: nothing else failed, but a case failed under bounds measured on "
                               "another class of hardware by no more than classes differ (neither passed nor "
                               "failed; its result names the `baseline make` command that measures this host)"),
    ExitCode.INTERNAL: "internal error: an unexpected exception in parity-kit (a bug); no verdict; traceback on stderr",
    ExitCode.INTERRUPTED: "interrupted (SIGINT, Ctrl-C)",
    ExitCode.HANGUP: "stopped by SIGHUP (a closed terminal)",
    ExitCode.TERMINATED: "stopped by SIGTERM (a cancelled CI job, timeout, Kubernetes)",
    ExitCode.BROKEN_PIPE: "output cut short: the reader of stdout went away (e.g. `| head`)",
}

# A command that can be interrupted can be stopped by the other signals too: its --help says so.
_STOPPED_TOO = (ExitCode.HANGUP, ExitCode.TERMINATED)


def epilog(*codes: ExitCode, meanings: dict[ExitCode, str] | None = None) -> str:
    """The exit-code section of a command's --help; ``meanings`` words a code the way one command uses
    it (e.g. 1 for `kernels` is a missing kernel, not a failed case)."""
    said = {**_MEANINGS, **(meanings or {})}
    if ExitCode.INTERRUPTED in codes:
        codes = tuple(dict.fromkeys([*codes, *_STOPPED_TOO]))
    return "exit codes:\n" + "\n".join(f"  {int(c):>3}  {said[c]}" for c in codes)
