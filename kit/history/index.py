"""The history's index: a DuckDB file of every run's rows, a cache the run directories can rebuild at any time.

Reading a run means parsing every case result it holds (tens of kilobytes each); a store of a thousand runs is
too much to parse on every question. So the rows are kept in a DuckDB file and only what changed is read
again: a location whose files (sizes with modification times, or an object store's ETags) are what they were
when it was indexed is not read; one that vanished loses its rows. Nothing in the index is authoritative:
``rebuild`` drops it and reads every run again, and deleting the file does the same.

Where it lives: beside a local store, ``<root>/.history/index.duckdb`` (a hidden folder, which the store's walk
does not enter); for a remote store, or a local one that cannot be written, in the user's cache
(``$XDG_CACHE_HOME/parity-kit/history/``), named by the URL's digest, since a bucket is not ours to write into.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import posixpath
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.history.rows import BucketRow, CaseRow, Line, Read, RunRow, read_location
from kit.core.records.store import Store

log = logging.getLogger(__name__)

# A file of another format is rebuilt, not migrated: it is only a cache. 2: bucket rows say which check they measure.
# 3: a bucket's bound - error is its margin (rules.margin), the column format 2 named headroom (_renamed).
FORMAT = "parity-kit-history/3"
PREVIOUS = "parity-kit-history/2"
INDEX_FOLDER = ".history"
INDEX_FILE = "index.duckdb"

_COLUMNS = {
    "runs": [(f.name, _t) for f, _t in zip(dataclasses.fields(RunRow), (
        "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "TIMESTAMP", "VARCHAR", "VARCHAR",
        "VARCHAR"))],
    "cases": [(f.name, _t) for f, _t in zip(dataclasses.fields(CaseRow), (
        "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE",
        "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "TIMESTAMP", "VARCHAR", "VARCHAR"))],
    "buckets": [(f.name, _t) for f, _t in zip(dataclasses.fields(BucketRow), (
        "VARCHAR", "VARCHAR", "INTEGER", "INTEGER", "DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE", "DOUBLE", "VARCHAR"))],
    "lines": [("location", "VARCHAR"), ("kind", "VARCHAR"), ("text", "VARCHAR")],
    "locations": [("location", "VARCHAR"), ("signature", "VARCHAR")],
}


@dataclass(frozen=True)
class Update:
    """What one update of the index did."""

    path: Path
    found: int  # locations under the store
    read: int  # read again (new or changed)
    removed: int  # gone from the store
    seconds: float


def index_path(store: Store) -> Path:
    """Where the index of ``store`` is kept (see the module)."""
    local = "file" in _protocols(store)
    if local and os.access(store.root, os.W_OK | os.X_OK):
        return Path(store.root) / INDEX_FOLDER / INDEX_FILE
    # A remote store, or a local one we may only read (a shared mount): the user's cache.
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    named = store.root if local else store.url.rstrip("/")  # a local folder by its absolute path
    digest = hashlib.sha256(named.encode("utf-8")).hexdigest()[:32]
    return base / "parity-kit" / "history" / f"{digest}.duckdb"


def _protocols(store: Store) -> tuple[str, ...]:
    protocol = store.fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


@contextlib.contextmanager
def reading(store: Store, rebuild: bool = False) -> Iterator[tuple[Update, Any]]:
    """The index of ``store`` brought up to date (``update``), then open for reading: what it found, and a
    connection closed when the block is left."""
    indexed = update(store, rebuild=rebuild)
    con = connect(indexed.path, read_only=True)
    try:
        yield indexed, con
    finally:
        con.close()


def connect(path: Path, read_only: bool = False) -> Any:
    """A connection to the history index (DuckDB), its folder made first unless read only; a file that cannot be
    opened is refused in one line."""
    import duckdb

    try:
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        return duckdb.connect(str(path), read_only=read_only)
    except (OSError, duckdb.Error) as exc:
        raise BadInput(f"{path}: the history index cannot be opened: {str(exc).splitlines()[0]}") from None


# What every DuckDB file holds at bytes 8 to 12, whatever its version.
DUCKDB_MAGIC = b"DUCK"


def open_for_update(path: Path, rebuild: bool) -> Any:
    """The index at ``path``, ready to be written. The index is a cache (see the module): a damaged one (not a
    DuckDB file, or one whose tables cannot be read) is removed and made anew from the run directories, with a
    line saying so, never refused. A file that is a DuckDB file but cannot be opened (another process holds its
    lock, no permission) is refused in one line: removing it would not be ours to do."""
    import duckdb

    try:
        con = connect(path)
        try:
            _prepare(con, rebuild)
        except BaseException:
            con.close()
            raise
        return con
    except (BadInput, duckdb.Error) as exc:
        if not damaged(path, exc):
            raise
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    log.warning(f"{path}: the history index is damaged ({why}); it is a cache, so it is removed and rebuilt "
                "from the run directories")
    for stale in (path, path.with_name(path.name + ".wal")):
        try:
            stale.unlink(missing_ok=True)
        except OSError as exc:
            raise BadInput(f"{stale}: the damaged history index cannot be removed: {exc.strerror or exc}") from None
    con = connect(path)
    _prepare(con, True)
    return con


def damaged(path: Path, exc: BaseException) -> bool:
    """Whether opening the index at ``path`` failed for what its file holds: no DuckDB header, or a DuckDB file
    whose contents the database refused (anything but an I/O error, which is a lock or a permission)."""
    import duckdb

    if isinstance(exc, BadInput):  # connect's line: what the database raised is its context
        exc = exc.__context__ or exc
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    if head[8:12] != DUCKDB_MAGIC:
        return True
    return isinstance(exc, duckdb.Error) and not isinstance(exc, duckdb.IOException)


def update(store: Store, path: Path | None = None, rebuild: bool = False) -> Update:
    """Bring the index of ``store`` up to date with its run directories (all of them with ``rebuild``)."""
    started = time.perf_counter()
    found = _locations(store)
    if not found:  # refused before an index is made inside a folder that is not one of runs
        raise BadInput(f"{store.url}: holds no run directory (no {rundir.MANIFEST} or {rundir.CONTROL} below it)")
    path = path or index_path(store)
    con = open_for_update(path, rebuild)
    try:
        known = dict(con.execute("SELECT location, signature FROM locations").fetchall())
        fresh = Read()
        changed: list[tuple[str, str]] = []
        for location in found:
            sig = signature(store, location)
            if known.get(location) == sig:
                continue
            read = read_location(store, location)
            for name in ("runs", "cases", "buckets", "lines"):
                getattr(fresh, name).extend(getattr(read, name))
            changed.append((location, sig))
        gone = [loc for loc in known if loc not in set(found)]
        con.execute("BEGIN TRANSACTION")
        for location in [loc for loc, _ in changed] + gone:
            _forget(con, location)
        _insert(con, "runs", fresh.runs)
        _insert(con, "cases", fresh.cases)
        _insert(con, "buckets", fresh.buckets)
        _insert(con, "lines", fresh.lines)
        _insert_tuples(con, "locations", changed)
        con.execute("COMMIT")
    finally:
        con.close()
    done = Update(path, len(found), len(changed), len(gone), time.perf_counter() - started)
    log.info(f"history index {path}: {done.found} run location(s), {done.read} read, {done.removed} removed, "
             f"in {done.seconds:.2f} s")
    return done


def _locations(store: Store) -> list[str]:
    """The run locations of ``store``; one line naming it when it cannot be reached."""
    try:
        found = store.walk()
        if not found.found:  # one line, not one for each folder passed over (a root named by mistake has hundreds)
            raise BadInput(f"{store.url}: holds no run directory: {found.said()}; expected a folder of runs (the "
                           "runs/ a gate writes, or a store runs were published to)")
        return list(store.run_dirs(found))
    except BadInput:
        raise
    except FileNotFoundError:
        raise BadInput(f"{store.url}: no such folder or bucket prefix") from None
    except Exception as exc:  # fsspec backends raise their own (botocore, aiohttp): one line for any of them
        said = (str(exc).splitlines() or [""])[0]
        raise BadInput(f"{store.url}: cannot be read: {type(exc).__name__}: {said}") from None


def signature(store: Store, location: str) -> str:
    """What changes when anything the history reads at ``location`` is rewritten, without reading it: the stamps
    of the run's own files and its case results (a control: of each of its runs too)."""
    parts = []
    folders = [location]
    stamps = store.stamps(location)
    if rundir.CONTROL in stamps:
        folders += [posixpath.join(location, name) for name in store.listdir(location) if name not in stamps]
    for folder in folders:
        own = stamps if folder == location else store.stamps(folder)
        parts += [f"{folder}/{k}={v}" for k, v in sorted(own.items())
                  if k in (rundir.MANIFEST, rundir.RESULT, rundir.CONTROL, rundir.BAD_MARK)]
        cases = store.stamps(posixpath.join(folder, rundir.CASES))
        parts += [f"{folder}/cases/{k}={v}" for k, v in sorted(cases.items()) if k.endswith(".json")]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def _prepare(con: Any, rebuild: bool) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    stored = con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    if not rebuild and stored is not None and stored[0] == PREVIOUS:
        stored = (_renamed(con),)
    if rebuild or stored is None or stored[0] != FORMAT:
        for table in _COLUMNS:
            con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute("DELETE FROM meta")
        con.execute("INSERT INTO meta VALUES ('format', ?)", [FORMAT])
    for table, columns in _COLUMNS.items():
        quoted = ", ".join(f'"{name}" {kind}' for name, kind in columns)  # "case" is a keyword of SQL
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({quoted})")


def _renamed(con: Any) -> str:
    """An index of the format before (PREVIOUS), its buckets' bound - error column renamed from headroom to margin;
    the format it has now (PREVIOUS still, to be rebuilt, where it holds no such column).

    Kits before this format named bound - error "headroom", which now means error / bound (rules.ratio). The
    figure is the same, only its name changed, so an existing index keeps its rows rather than reading every run
    of its store again (minutes for a remote store of thousands of runs)."""
    columns = {name for (name,) in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'buckets'").fetchall()}
    if "headroom" not in columns or "margin" in columns:
        return PREVIOUS
    con.execute("BEGIN TRANSACTION")
    con.execute("ALTER TABLE buckets RENAME COLUMN headroom TO margin")
    con.execute("UPDATE meta SET value = ? WHERE key = 'format'", [FORMAT])
    con.execute("COMMIT")
    log.info("history index: the buckets' headroom column (bound - error) renamed margin, as the kit now names it")
    return FORMAT


def _forget(con: Any, location: str) -> None:
    runs = "SELECT run FROM runs WHERE location = ?"
    con.execute(f"DELETE FROM cases WHERE run IN ({runs})", [location])
    con.execute(f"DELETE FROM buckets WHERE run IN ({runs})", [location])
    for table in ("runs", "lines", "locations"):
        con.execute(f"DELETE FROM {table} WHERE location = ?", [location])


def _insert(con: Any, table: str, rows: Sequence[Any]) -> None:
    _insert_tuples(con, table, [dataclasses.astuple(r) if not isinstance(r, Line) else
                                (r.location, r.kind, r.text) for r in rows])


def _insert_tuples(con: Any, table: str, rows: Iterable[tuple]) -> None:
    """Bulk rows through a DataFrame: DuckDB's executemany binds one row at a time, far slower at this size."""
    import pandas as pd  # type: ignore[import-untyped]  # no stubs in the test extra; a frame is all it makes

    rows = list(rows)
    if not rows:
        return
    frame = pd.DataFrame(rows, columns=[n for n, _ in _COLUMNS[table]])
    con.register("incoming", frame)
    try:
        con.execute(f"INSERT INTO {table} SELECT * FROM incoming")
    finally:
        con.unregister("incoming")
