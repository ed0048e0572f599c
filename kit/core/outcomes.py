"""The kinds of error a case can end with, and which of them are the job's rather than the engine's.

An error is typed where it arises (the executor knows it killed a kernel on its timeout, nbclient raises
DeadKernelError, a backend raises kit.core.errors.EngineDidNotStart) and the kind travels with the case result
(``CaseResult.error_kind``). Triage then reads the kind, not the error's wording: a new backend whose engine fails
to start is infrastructure because it raised the typed exception, whatever its message says.

A kind is a member of ``Outcome``, a StrEnum: a plain string, so that a kernel of another environment writes and
reads it as it does every other field of a record. Stdlib only: the kernel-safe core.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

class Outcome(StrEnum):
    """The kind of error a case ended with, as its result's ``error_kind`` spells it."""

    ENGINE_DID_NOT_START = "engine-did-not-start"
    ENGINE_STOPPED_ANSWERING = "engine-stopped-answering"
    KERNEL_DIED = "kernel-died"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out-of-memory"
    WORKER_LOST = "worker-lost"
    INTERRUPTED = "interrupted"
    EXECUTOR = "executor"  # the executor could not start the case or record its result
    CASE_ERROR = "case-error"  # the case raised for a reason of its own: a bug, an answer of the wrong shape
    # The case refused what it was given (kit.core.errors.BadInput raised in a cell: a record of another GPU, a
    # missing file): the same refusal whatever else failed beside it, so never a sign of the job.
    BAD_INPUT = "bad-input"
    # No baseline for the hardware the case's kernel found itself on (kit.core.errors.NoBaselineHere): a verdict of
    # its own (status no-baseline), never the job's and never an error.
    NO_BASELINE = "no-baseline"


@dataclass(frozen=True)
class ErrorKind:
    name: Outcome
    infrastructure: bool  # the job failed the case, not the engine's numbers: worth running again
    words: str  # what a reader is told (triage's evidence)


KINDS: dict[Outcome, ErrorKind] = {k.name: k for k in (
    ErrorKind(Outcome.ENGINE_DID_NOT_START, True, "the engine failed to start"),
    ErrorKind(Outcome.ENGINE_STOPPED_ANSWERING, True, "the engine stopped answering"),
    ErrorKind(Outcome.KERNEL_DIED, True, "the kernel died"),
    ErrorKind(Outcome.TIMEOUT, True, "timeout"),
    ErrorKind(Outcome.OUT_OF_MEMORY, True, "out of memory"),
    ErrorKind(Outcome.WORKER_LOST, True, "lost worker"),
    ErrorKind(Outcome.INTERRUPTED, True, "the run was interrupted"),
    ErrorKind(Outcome.EXECUTOR, True, "the executor could not start or record the case"),
    ErrorKind(Outcome.CASE_ERROR, False, "case error"),
    ErrorKind(Outcome.BAD_INPUT, False, "bad input"),
    ErrorKind(Outcome.NO_BASELINE, False, "no baseline for this hardware"),
)}
# Kinds that explain an error in full: the rule of cases erroring together (kit.core.verdict.triage) does not count
# them.
EXPLAINED = frozenset({Outcome.BAD_INPUT, Outcome.NO_BASELINE})


def kind_of(name: str | None) -> ErrorKind | None:
    """The kind a record names; None for a record without one (written before kinds existed) or with one this kit
    does not know (written by a newer kit)."""
    if not isinstance(name, str) or name not in Outcome._value2member_map_:
        return None
    return KINDS[Outcome(name)]
