"""Expensive, read-only results made once per test session and shared by every module that only reads them.

The e2e tier's time goes to engines and kernels starting, not to assertions: the embedded gate (every case,
Levanter's and vLLM's engines among them) costs minutes on 2 cores, and several modules only read what it
wrote. `make test` runs two pytest-xdist workers, each a process of its own, so a session fixture alone would
still make it twice: the first worker to ask makes it under an exclusive file lock in the session's shared
temporary folder, and every later asker, in either worker, waits on the lock and reads the same folder.
Tests that need their own fresh process or write into a run keep making their own.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DONE = ".made"  # written last: a folder without it was left by a maker that failed, and is made again


def session_root(tmp_path_factory) -> Path:
    """The temporary folder every xdist worker of this session shares (a worker's own base is one below)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder ``name``, filled by ``make`` once per test session, whichever worker asks first."""
    root = session_root(tmp_path_factory)
    folder = root / f"shared-{name}"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if make raises
        if not (folder / DONE).is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / DONE).write_text("")
    return folder


@dataclass(frozen=True)
class Command:
    """What a command run for a shared result returned, kept beside the result for every reader."""

    returncode: int
    stdout: str
    stderr: str

    @classmethod
    def saved(cls, proc, folder: Path) -> "Command":
        out = cls(proc.returncode, proc.stdout, proc.stderr)
        (folder / "command.json").write_text(json.dumps(out.__dict__))
        return out

    @classmethod
    def read(cls, folder: Path) -> "Command":
        return cls(**json.loads((folder / "command.json").read_text()))


def embedded_gate_run(tmp_path_factory) -> tuple[Path, Command]:
    """The embedded gate run as the README's first command runs it (every case, the summary rendered), made once
    per session: its run directory and what the command returned. Readers must not write into it."""
    from support import parity_kit

    def make(folder: Path) -> None:
        Command.saved(parity_kit("gate", "--out", folder / "run"), folder)

    folder = made_once(tmp_path_factory, "embedded-gate", make)
    return folder / "run", Command.read(folder)


STALE_MODEL = "old-model"  # beside the stale golden's folder: the older build it was made from


def stale_semantic_golden(tmp_path_factory, embedded) -> tuple[Path, Command]:
    """A semantic golden made from an older build of the model (its output layer x1.5): same fixture, other
    numbers. Made once per session: the gate, control and golden-regen modules only read it (regen places its
    successor beside a copy). Returns the folder `golden make` wrote into and what the command returned; the
    older model is ``STALE_MODEL`` beside that folder."""
    from support import copy_model, edit_weight, parity_kit

    def make(folder: Path) -> None:
        old = copy_model(embedded, folder / STALE_MODEL)
        edit_weight(old, "lm_head.weight", lambda w: w * 1.5)
        Command.saved(parity_kit("golden", "make", "--model", old, "--fixture", embedded.fixture, "--kind",
                                 "semantic", "--out", folder / "goldens"), folder)

    folder = made_once(tmp_path_factory, "stale-golden", make)
    return folder / "goldens", Command.read(folder)
