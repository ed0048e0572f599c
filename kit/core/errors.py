"""The kit's exceptions share one root, ParityKitError; BadInput is the one the CLI turns into a one-line
message and exit code 3.

One root lets a caller (a notebook, a plugin, a script around the kit) tell the kit's own refusals and faults
from a bug in itself or an engine's exception with one ``except``; every other exception class of the kit
derives from it.
"""


class ParityKitError(Exception):
    """The root of every exception the kit defines: raised by the kit on purpose, with a message meant to be
    read, rather than a bug or an engine's own exception passing through."""


class BadInput(ParityKitError):
    """Input the gate refuses before (or instead of) running anything.

    The message is a single line that names what is wrong and where (file, key,
    case), so that a CI log shows the cause without a traceback.
    """


class Unrunnable(ParityKitError):
    """What a run needs to run at all (a Ray cluster) could not be had: no case ran, so there is no verdict, and
    nothing about the engine is known. The CLI says so in one line and exits as for an incomplete run, which a
    CI reads as "run again", never as a parity failure."""
