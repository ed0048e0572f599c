"""Copying a finished run (or control) directory to a store a team shares: ``--publish URL``.

A run is published whole and once: ``URL/<run dir name>/`` gets every file of the finished run, and a
destination that already exists is refused rather than replaced, so a published run stays the run that was
judged. Object stores have no folders and no atomic copy of many files, so the markers that make a folder a run
for the history (manifest.json, control.json) go last, deepest first: a reader listing the store meanwhile sees
either no run or a run with all its files, and a copy cut short leaves files without a marker, which the history
does not read as a run.

Publishing happens after the run, so its failure cannot change the run: the verdict and its exit code stand,
the failure is logged in one line, and ``published.json`` in the local directory records every attempt (where,
when, how many files, or why not). That record is written after the copy and never copied itself: the published
copy is the run as it finished (docs/history-store.md).
"""

from __future__ import annotations

import logging
import os
import posixpath
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import write_json
from kit.core.records.paths import real_outside
from kit.core.records.results import RunDir, now_iso
from kit.core.records.store import RUN_MARKERS, Store, open_store

log = logging.getLogger(__name__)

# The store a gate or control publishes to when --publish is not given: a CI job sets it once for every run.
PUBLISH_ENV = "PARITY_KIT_PUBLISH"
FORMAT = "parity-kit-published/1"
# Not part of the run: its lock (held while it runs), and the record of its publications (written after).
NOT_PUBLISHED = {rundir.LOCK, rundir.PUBLISHED}


@dataclass(frozen=True)
class Publication:
    """One attempt to publish a run: the destination URL, when, the files copied, and why it failed (or None)."""

    url: str
    at: str
    files: int
    error: str | None = None


def default_target(given: str | None) -> str | None:
    """The store to publish to: the flag's URL, else $PARITY_KIT_PUBLISH, else none."""
    return given or os.environ.get(PUBLISH_ENV, "").strip() or None


def check_target(url: str) -> Store:
    """The store at ``url``, refused in one line before a run starts when it cannot take one: not installed,
    not reached, credentials refused, no such bucket or folder. A run of an hour should not end in a typo."""
    store = open_store(url)
    store.probe()
    return store


def run_files(local_dir: Path) -> list[str]:
    """The files a run's copy carries, as paths relative to it: everything but its lock and publication
    record, markers last and deepest first (see the module's docstring). A link that leads out of the run is
    refused: the copy stands for this run, and must not carry a file from elsewhere in its name."""
    root = local_dir.resolve()
    files: list[str] = []
    for path in sorted(root.rglob("*")):
        if (path.name in NOT_PUBLISHED and path.parent == root) or path.name == rundir.LOCK:  # every run's lock
            continue
        if not path.is_file():
            continue
        if (target := real_outside(path, root)) is not None:
            raise BadInput(f"{path}: a link that leads out of the run ({target}); a published run carries "
                           "only its own files")
        files.append(path.relative_to(root).as_posix())

    def order(rel: str) -> tuple[int, int, str]:
        if posixpath.basename(rel) in RUN_MARKERS:
            return (1, -rel.count("/"), rel)
        return (0, 0, rel)

    return sorted(files, key=order)


def check_run_dir(local_dir: str | Path) -> Path:
    """``local_dir`` as a Path, refused in one line unless it is a gate run or control directory."""
    local = Path(local_dir)
    if not local.is_dir():
        raise BadInput(f"{local_dir}: not a directory; publish copies a run or control directory")
    if not any((local / m).is_file() for m in RUN_MARKERS):
        raise BadInput(f"{local_dir}: not a gate run or control directory (no {' or '.join(RUN_MARKERS)})")
    return local


def publish(local_dir: str | Path, url: str) -> str:
    """Copy the finished run (or control) directory ``local_dir`` to ``url/<its name>/`` and return that URL.
    BadInput, one line naming the URL, when the store refuses, or when the destination exists already."""
    local = check_run_dir(local_dir)
    files = run_files(local)
    store = check_target(url)
    name = local.resolve().name
    if store.exists(name):
        raise BadInput(f"{store.where(name)}: already exists; a published run is never replaced (a copy cut short "
                       "has no manifest.json or control.json: remove it, then publish again)")
    for rel in files:
        target = posixpath.join(name, rel)
        with store.errors(target, "be written"):
            if store.is_local:  # a folder store needs its folders; an object store has none to make
                store.fs.makedirs(posixpath.dirname(store.path(target)), exist_ok=True)
            store.fs.put_file(str(local / rel), store.path(target))
    return store.where(name)


def publish_run(local_dir: str | Path, url: str) -> Publication:
    """``publish``, never raising for the store: the outcome is returned and recorded in the run's
    ``published.json`` (a failure too, so the run itself says it was not published, and why). Only a directory
    that is no run at all is refused (BadInput): there is nowhere to record anything."""
    local = check_run_dir(local_dir)
    at = now_iso()
    destination = posixpath.join(url.rstrip("/"), local.resolve().name)
    try:
        count = len(run_files(local))
        destination = publish(local, url)
        done = Publication(destination, at, count)
    except BadInput as exc:
        done = Publication(destination, at, 0, str(exc))
    record_publication(local, done)
    return done


def record_publication(local_dir: Path, publication: Publication) -> None:
    """Add ``publication`` to the run's ``published.json``: every attempt is kept, in order."""
    path, run = local_dir / rundir.PUBLISHED, RunDir.local(local_dir)
    earlier: list[dict] = []
    if run.has(rundir.PUBLISHED):
        try:
            earlier = list(run.read_json(rundir.PUBLISHED).get("publications", []))
        except (BadInput, ValueError, AttributeError):
            log.warning("%s: unreadable, replaced by a record of this publication alone", path)
    write_json(path, {"format": FORMAT, "publications": [*earlier, asdict(publication)]})


def publications(local_dir: str | Path) -> list[Publication]:
    """The publications ``published.json`` records for a run, oldest first (none where it has none)."""
    run = RunDir.local(local_dir)
    if not run.has(rundir.PUBLISHED):
        return []
    return [Publication(**p) for p in run.read_json(rundir.PUBLISHED).get("publications", [])]
