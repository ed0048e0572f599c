"""LEGACY READING: records written before failures and errors had kinds. The one place wording is read.

A current record says what failed in typed fields (``typed_failures``, kit.core.rules.failure; ``error_kind``,
kit.core.outcomes). A run directory, an archive or a backtest may still hold records written before those
existed, and they must triage, replay and report as they always did. So their lines are classed here, by the
wording the kit used then, and nowhere else: no other module of the kit matches a failure's or an error's text
(tests/unit/core/test_verdict.py holds every other module to that). Every reader of a record's failures comes
through here (``failures_of``), so the typed failures of a current record and the lines of an older one reach
it as one list; nothing a current kit writes is read by wording, except a line without its typed record.

Frozen with the wording of the kit that wrote such records: a rewording of today's messages does not belong here.
"""

from __future__ import annotations

import re
from typing import Any

from kit.core.rules.failure import REJUDGED, Failure, Kind

# A failure line's kind, by the wording of the kit that wrote it, tried in order (first match wins; the order of
# the triage families these records were classed by: a bound line first, a winner change last).
_BOUND = re.compile(r": max probability error \S+ > bound [^\s;]+(?: \(bucket [^()]*\))?(?:;|$)")
_WINNER_CHANGE = re.compile(r"winner changed outside a near-tie: golden top token \d+ leads|"
                            r"winner changed outside a near-tie: gap |"
                            r"continuations diverged (?:inside|outside) a near-tie: golden token \d+ leads")
_KINDS: tuple[tuple[Kind, re.Pattern[str]], ...] = (
    (Kind.OVER_BOUND, _BOUND),
    (Kind.DRIFT, re.compile(r"^drift: ")),
    (Kind.NON_FINITE, re.compile(r"non-finite logprob|no finite max probability error")),
    (Kind.MISSING_TOKEN, re.compile(r"is missing from the backend")),
    (Kind.GREEDY_OUTSIDE_TOP, re.compile(r"backend greedy token \d+ is not in the golden top")),
    (Kind.DECODE_OUTSIDE_TOP, re.compile(r"which is not in the golden")),
    (Kind.NOT_EXACT, re.compile(r"bit-exact|exact golden needs|differs from run")),
    (Kind.WINNER_CHANGE, _WINNER_CHANGE),
)


def read_line(line: str) -> Failure:
    """An older record's failure line as a Failure: its kind by the old wording (OTHER when none), its prompt the
    words before the first ": " (none for a drift line), whether the executor re-judged it, and the line itself
    kept as written."""
    kind = next((k for k, pattern in _KINDS if pattern.search(line)), Kind.OTHER)
    prompt = line.split(": ", 1)[0] if ": " in line and kind is not Kind.DRIFT else None
    return Failure(kind, prompt=prompt, rejudged=line.endswith(REJUDGED), said=line)


def failures_of(record: Any) -> list[Failure]:
    """The typed failures of a record (a PromptScore, DecodeScore or CaseResult), one per line of its
    ``failures``, in order. A line the record's ``typed_failures`` does not hold (a record written before kinds
    existed, or by a kit that appended a line by hand) is read by the legacy reading (``read_line``)."""
    typed = {f.text: f for f in getattr(record, "typed_failures", None) or ()}
    return [typed.get(line) or read_line(line) for line in getattr(record, "failures", None) or ()]


# An error of a record without an error kind: what its text (or, failing that, its kernel's log tail) says when the
# job, not the engine's numbers, went wrong, in the wording the kit and vLLM used then: (pattern, the words the
# evidence uses). Searched in this order.
INFRASTRUCTURE_SIGNS: tuple[tuple[str, str], ...] = (
    (r"out of memory|OutOfMemoryError|\bMemoryError\b|\bOOM\b|oom-kill", "out of memory"),
    (r"Ray worker died|Ray task failed|WorkerCrashedError|NodeDiedError|ActorDiedError", "lost worker (Ray)"),
    (r"kernel died|DeadKernelError", "the kernel died"),
    (r"not healthy within|exited with code -?\d+ before it became healthy", "the engine failed to start"),
    (r"Connection ?refused|ConnectionRefusedError|RemoteDisconnected|Connection reset|ConnectionResetError|"
     r"BrokenPipeError|Connection aborted", "the engine stopped answering"),
    (r"^cannot start:|^executor failed:|never started|before its kernel started|could not be written",
     "the executor could not start or record the case"),
    (r"^interrupted", "the run was interrupted"),
)


def infrastructure_sign(error: str | None, log_tail: str | None) -> tuple[str, str] | None:
    """For an error without a kind: the words of the job's fault its text names, and what it said (the error
    itself, else "its log: " and the log line that named it); None when neither names one."""
    # The error first: it is the executor's or the case's own account; the log tail only when it names nothing.
    for where, text in (("", error or ""), ("its log: ", log_tail or "")):
        for pattern, words in INFRASTRUCTURE_SIGNS:
            hit = re.search(pattern, text, re.IGNORECASE | re.MULTILINE)
            if hit:
                return words, (f"{error}" if not where else where + _around(text, hit))
    return None


def _around(text: str, hit: re.Match) -> str:
    """The log line that matched, not the whole tail."""
    start = text.rfind("\n", 0, hit.start()) + 1
    end = text.find("\n", hit.end())
    return text[start:end if end >= 0 else len(text)].strip()
