"""The kit's exceptions share one root, ParityKitError; BadInput is the one the CLI turns into a one-line
message and exit code 3.

One root lets a caller (a notebook, a plugin, a script around the kit) tell the kit's own refusals and faults
from a bug in itself or an engine's exception with one ``except``; every other exception class of the kit
derives from it.

An engine's faults that are the job's, not the case's, are typed (EngineDidNotStart, EngineStoppedAnswering):
each carries its kind (kit.core.outcomes) as a class attribute, so any backend raising one is classed by its
type. A case's kernel reports only the class name of what a cell raised, so the gate finds the kind by that name
(``kind_named``): a backend raises these classes themselves, not subclasses of its own.
"""

from __future__ import annotations

from typing import ClassVar

from kit.core import outcomes


class ParityKitError(Exception):
    """The root of every exception the kit defines: raised by the kit on purpose, with a message meant to be
    read, rather than a bug or an engine's own exception passing through."""


class BadInput(ParityKitError):
    """Input the gate refuses before (or instead of) running anything.

    The message is a single line that names what is wrong and where (file, key,
    case), so that a CI log shows the cause without a traceback.
    """


class NoBaselineHere(ParityKitError):
    """A case's kernel found itself on hardware no baseline of the case was made for (a GPU model no calibration
    record lists, on a node whose GPUs differ from the one the descriptor was resolved on): the case ends with the
    status no-baseline, as it would have had the plan known, never as an error."""

    kind: ClassVar[str] = outcomes.Outcome.NO_BASELINE


class Unrunnable(ParityKitError):
    """What a run needs to run at all (a Ray cluster) could not be had: no case ran, so there is no verdict, and
    nothing about the engine is known. The CLI says so in one line and exits as for an incomplete run, which a
    CI reads as "run again", never as a parity failure."""


class EngineFault(ParityKitError, RuntimeError):
    """An engine failed the case for a reason of the job; ``kind`` says which. A RuntimeError too, so that code
    catching an engine's RuntimeError still does."""

    kind: ClassVar[str]


class EngineDidNotStart(EngineFault):
    """The engine (a server, an engine process) exited, or never became ready, before it answered anything."""

    kind = outcomes.Outcome.ENGINE_DID_NOT_START


class EngineStoppedAnswering(EngineFault):
    """The engine started, then its connection was refused, reset or closed mid-case."""

    kind = outcomes.Outcome.ENGINE_STOPPED_ANSWERING


TYPED: tuple[type[EngineFault], ...] = (EngineDidNotStart, EngineStoppedAnswering)
# The class names of an out-of-memory error: Python's own, torch's (torch.OutOfMemoryError, and
# torch.cuda.OutOfMemoryError, the same class), Ray's.
MEMORY_ERRORS = ("MemoryError", "OutOfMemoryError")
_BY_NAME = {**{cls.__name__: cls.kind for cls in TYPED}, **dict.fromkeys(MEMORY_ERRORS, outcomes.Outcome.OUT_OF_MEMORY),
            BadInput.__name__: outcomes.Outcome.BAD_INPUT, NoBaselineHere.__name__: outcomes.Outcome.NO_BASELINE}


def kind_named(class_name: str | None) -> str:
    """The kind of an exception known only by its class name (what a kernel reports of a cell's exception), plain
    or qualified (``torch.OutOfMemoryError``); CASE_ERROR for every other class."""
    name = class_name or ""
    return _BY_NAME.get(name) or _BY_NAME.get(name.rsplit(".", 1)[-1]) or outcomes.Outcome.CASE_ERROR
