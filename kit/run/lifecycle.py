"""The lifecycle of a command that owns a folder, written once: claim it, lock it, turn signals into a stop,
and record how the command ended, also when it was stopped.

Gate, calibrate, power, localize, bisect and refresh each own a folder. Each claimed it its own way before (an
emptiness test of its own beside ``paths.claim_empty_dir``, a lock or none, signals or none), so a stop left some
folders saying nothing of it. Here a fresh folder is claimed by one rule (``claim``: one a live command holds is
refused naming that command, one that holds anything else is refused as full), and ``owned`` holds it for the
command's duration: locked (kit.run.runlock), SIGINT/SIGTERM/SIGHUP turned into ``Stopped`` (kit.run.stopping),
and the command's ``finish`` called with how it ended (an ``Ended``) before the lock
is let go, so the record a stopped command leaves says that it stopped.
"""

from __future__ import annotations

import contextlib
from enum import StrEnum
from pathlib import Path
from typing import Callable, Iterator, Sequence

from kit.core.records import paths
from kit.run import runlock
from kit.run.stopping import on_signals

class Ended(StrEnum):
    """How a command that owns a folder ended: what ``finish`` is told (and a record may keep)."""
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"


def claim(folder: str | Path, named: str, what: str, command: Sequence[str] | None = None,
          hint: str = "choose another --out") -> Path:
    """``folder`` created for a new ``what`` (``named``: how messages name it, ``--out`` or ``run directory``),
    refused in one line when it holds anything: naming the command that holds it when one does, else saying that
    an earlier run is never written over (``hint``: what to do instead)."""
    claimable(folder, named, what, command, hint)
    return paths.claim_empty_dir(folder, named, what, hint)


def claimable(folder: str | Path, named: str, what: str, command: Sequence[str] | None = None,
              hint: str = "choose another --out") -> None:
    """Refuse now, writing nothing, a folder that ``claim`` would refuse: for a command that claims its folder
    only once it has something to write in it, so that a full one is refused before anything runs."""
    folder = Path(folder)
    paths.check_dir_target(folder, named)
    if (folder / runlock.LOCK_NAME).exists():
        runlock.acquire(folder, command, what=what).release()  # a live holder is named, not only found full
    paths.refuse_full(folder, named, what, hint)


def claim_locked(folder: Path, named: str, what: str, command: Sequence[str] | None, hint: str,
                 marker: str) -> runlock.RunLock:
    """``folder`` claimed (``claim``) and locked for a command that holds it past this call (a gate run, whose
    session releases the lock however it ends), the claim made atomic by creating ``marker`` inside it: of two
    commands started at once, one creates it, and the other, finding the folder full, is refused as ``claim``
    refuses any full one."""
    claim(folder, named, what, command, hint)
    lock = locked(folder, command, what)
    try:
        (Path(folder) / marker).mkdir()
    except FileExistsError:
        lock.release()
        claim(folder, named, what, command, hint)  # the other command's files are there now: refused, naming it
        raise
    return lock


def locked(folder: Path, command: Sequence[str] | None, what: str) -> runlock.RunLock:
    """The lock of ``folder`` (claimed before, or resumed) for ``command``: refused in one line naming the live
    command that holds it. The one way a command locks a folder it owns (``owned`` holds it for a block)."""
    return runlock.acquire(folder, command, what=what)


@contextlib.contextmanager
def ending(finish: Callable[[Ended], None] | None = None) -> Iterator[None]:
    """Signals turned into ``Stopped`` for the duration, and ``finish`` told how the block ended (an
    ``Ended``) while they still are; a stop or an error goes on up once it is recorded. For a
    command that holds several folders (a gate session's runs), each locked on its own."""
    with on_signals():
        try:
            yield
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP as Stopped
            if finish is not None:
                finish(Ended.STOPPED)
            raise
        except BaseException:
            if finish is not None:
                finish(Ended.FAILED)
            raise
        if finish is not None:
            finish(Ended.FINISHED)


@contextlib.contextmanager
def owned(folder: Path, command: Sequence[str] | None, what: str,
          finish: Callable[[Ended], None] | None = None) -> Iterator[Path]:
    """``folder`` held for one command (claimed before, by ``claim``, or resumed): locked, and the command's end
    recorded by ``finish`` (``ending``) before the lock is released."""
    with locked(folder, command, what), ending(finish):
        yield folder
