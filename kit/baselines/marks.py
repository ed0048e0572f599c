"""A person's mark that a gate run is known bad, and why.

A backtest needs runs whose verdict is known to be wrong to pass: a release later found broken, a run on a
machine with a faulty GPU. Nothing in a run says so by itself, so whoever learnt it leaves ``bad.json`` in the
run directory, with the reason. A mark is evidence other people's decisions rest on (it refuses a new
baseline that would pass the run), so it is written once, with a reason, and never replaced: a second mark of
the same run is refused, naming the first one's reason.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from kit import __version__
from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import canonical_bytes
from kit.core.records.paths import display
from kit.core.records.recordcheck import Wrong, formatted, text
from kit.core.records.results import RunDir, now_iso

log = logging.getLogger(__name__)

FORMAT = "parity-kit-bad/1"
KEYS = ("format", "reason", "marked_at", "kit_version")


@dataclass(frozen=True)
class BadMark:
    """Why a run is known bad, and when it was marked so."""

    reason: str
    marked_at: str
    path: Path


def mark_bad(run_dir: str | Path, reason: str) -> BadMark:
    """Mark the gate run in ``run_dir`` known bad for ``reason`` (one line, required). Refused in one line: a
    folder that is no gate run, a missing reason, and a run already marked (its mark is kept as it is)."""
    run_dir = Path(run_dir)
    if not (run_dir / rundir.MANIFEST).is_file():
        raise BadInput(f"{display(run_dir)}: not a gate run directory (no {rundir.MANIFEST}); only a run is marked bad")
    reason = reason.strip() if isinstance(reason, str) else ""
    if not reason:
        raise BadInput(f"{display(run_dir)}: a run is marked bad with a reason: say what was wrong with it")
    if "\n" in reason:
        raise BadInput(f"{display(run_dir)}: a bad mark's reason is one line; it names the run in messages")
    path = run_dir / rundir.BAD_MARK
    doc = {"format": FORMAT, "reason": reason, "marked_at": now_iso(), "kit_version": __version__}
    _create(path, canonical_bytes(doc))
    log.info(f"marked {display(run_dir)} bad: {reason}")
    return BadMark(reason, doc["marked_at"], path)


def _create(path: Path, data: bytes) -> None:
    """Write ``path`` whole, only if it does not exist: the bytes go to a temporary file that is then linked
    into place, which fails, atomically, when another mark got there first."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.link(tmp, path)
    except FileExistsError:
        raise BadInput(f"{display(path)}: the run is already marked bad ({_said(path)}); a mark is never "
                       "overwritten") from None
    except OSError as exc:
        raise BadInput(f"{display(path)} cannot be written: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _said(path: Path) -> str:
    try:
        mark = read_mark(path.parent)
    except BadInput as exc:
        return str(exc)
    return f"reason: {mark.reason}" if mark else "its mark vanished"


def read_mark(run_dir: str | Path) -> BadMark | None:
    """The mark of the run in ``run_dir``, None when it has none; a damaged one is refused in one line naming the
    file and the key."""
    run, path = RunDir.local(run_dir), Path(run_dir) / rundir.BAD_MARK
    if not run.has(rundir.BAD_MARK):
        return None
    doc = run.read_json(rundir.BAD_MARK)
    try:
        d = formatted(doc, KEYS, FORMAT)
        return BadMark(text(d["reason"], "reason"), text(d["marked_at"], "marked_at"), path)
    except Wrong as wrong:
        raise BadInput(f"{display(path)}: malformed bad mark: {wrong.text}") from None
