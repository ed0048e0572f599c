"""How much the pipelines say on the console: the CLI's global ``-q`` and ``-v``.

One process-wide level rather than a parameter on every pipeline (gate, control, refresh, regen and
the preflight under them): the level belongs to whoever reads the console, not to any one run.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kit.core.paths import display

QUIET, NORMAL, VERBOSE = -1, 0, 1

_level = NORMAL


def set_level(level: int) -> None:
    global _level
    _level = max(QUIET, min(VERBOSE, level))


def quiet() -> bool:
    """Only the verdict lines (and refusals, which go to stderr anyway)."""
    return _level <= QUIET


def verbose() -> bool:
    return _level >= VERBOSE


LARGE_MODEL_BYTES = 256 * 2**20  # hashing this much takes long enough that a silent console looks hung


def announce_hashing(folder: str | Path) -> None:
    """Say that a model folder is being hashed, before a wait that can last minutes on a large model:
    when the folder is large, or always under -v. Stderr, like every progress line."""
    if quiet():
        return
    files = [p for p in Path(folder).rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    if size > LARGE_MODEL_BYTES or verbose():
        amount = f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"
        print(f"hashing model folder {display(folder)} ({len(files)} files, {amount})...", file=sys.stderr,
              flush=True)
