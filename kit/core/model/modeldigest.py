"""The model digest (docs/architecture.md, Data formats): one SHA-256 for a whole model folder.

The format is fixed by the digests pinned in descriptors: SHA-256 over the lines
``relative/posix/path NUL sha256(file) LF`` of every file, ordered by path components (the order
``sorted()`` gives ``pathlib`` paths, in which ``a/b`` comes before ``a.txt``).

Links are followed: a Levanter checkpoint whose ``model/`` is a link to elsewhere is digested with
the target's bytes under the name inside the model folder, so corrupt or missing weights behind a
link change the digest. A dangling link or a link loop is refused, naming the link.

Files are hashed by a thread pool in large reads (hashlib releases the GIL while it hashes a
large buffer), because a model of several multi-GiB shards is otherwise hashed on one core.

**The cache.** A gate hashes each model in its preflight, and then every case kernel checked the
same folder again. A ``DigestCache`` maps each file, by its resolved path and the stat fields that
any write changes (size, mtime_ns, ctime_ns, inode, device), to its SHA-256, per host name; any
changed field means the file is read again. It lives as ``model-digests.json`` in the run
directory, and the executor names it to its kernels through ``contract.MODEL_DIGEST_CACHE_ENV``,
rather than in a per-user cache folder, because:

- every gate run reads every byte once, in its preflight, which starts from an empty cache; a
  stat-keyed cache only saves the rereads within that run, so a change that keeps every stat
  field (bit rot, a restore with ``touch -r``) is caught by the next gate, not hidden for good;
- kernels of other environments, or started under another HOME (containers, Ray workers),
  read the path they are given, where a per-user folder could differ between them;
- nothing outlives the run or is shared between concurrent gates, so there is no lock to take
  and no file to grow without bound; the run directory is already this run's alone.

Kernels only read the cache. A file whose ctime is less than ``RACY_NS`` older than the moment
it was looked at is hashed but not cached: a write within the file system's timestamp
granularity could otherwise leave every stat field equal (git's "racy" entries).

Kernel-safe: standard library only (Levanter's kernel imports it, on Python 3.11).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kit.core.records.contract import MODEL_DIGEST_CACHE_ENV
from kit.core.errors import BadInput
from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes

CHUNK = 8 << 20  # bytes per read: large enough that the pool's threads hash without the GIL
RACY_NS = 2_000_000_000  # FAT's 2 s mtime granularity is the coarsest a model folder may sit on
CACHE_FORMAT = 1


def hash_file(path: str | os.PathLike) -> str:
    """SHA-256 of one file's bytes, read into one reused buffer."""
    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def default_workers() -> int:
    """How many files are hashed at once: this process's cores, at most 8, since past a few threads the disk is
    the limit."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(8, cores or 1))  # beyond a few threads the disk, not the hashing, is the limit


# ---------------------------------------------------------------- the walk


@dataclass(frozen=True)
class ModelFile:
    parts: tuple[str, ...]  # the path inside the model folder, as named there
    path: str  # where its bytes are read: links in the folder resolved
    st: os.stat_result  # of the bytes' file (links followed)

    @property
    def rel(self) -> str:
        """The file's path relative to the model folder, with forward slashes: the name its line of the
        digest carries on any OS."""
        return "/".join(self.parts)


def list_files(root: Path) -> list[ModelFile]:
    """Every file under ``root``, links followed, in digest order."""
    found: list[ModelFile] = []
    top = os.stat(root)
    _walk(root, str(root), (), {(top.st_dev, top.st_ino)}, found)
    return sorted(found, key=lambda f: f.parts)


def _walk(root: Path, folder: str, parts: tuple[str, ...], ancestors: set[tuple[int, int]],
          found: list[ModelFile]) -> None:
    try:
        with os.scandir(folder) as entries:
            listed = list(entries)
    except OSError as exc:
        raise BadInput(f"model folder {root}: cannot list {'/'.join(parts) or '.'}: {exc.strerror}") from None
    for entry in sorted(listed, key=lambda e: e.name):  # of two faults, always the same one is named
        inner = (*parts, entry.name)
        st = _stat(root, entry, inner)
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in ancestors:  # only a link (or a bind mount) can lead back up
                raise BadInput(f"model folder {root}: {_named(entry, inner)} is a loop: it leads back to a "
                               "folder that contains it")
            _walk(root, entry.path, inner, ancestors | {key}, found)
        elif stat.S_ISREG(st.st_mode):
            found.append(ModelFile(inner, os.path.realpath(entry.path), st))


def _stat(root: Path, entry: os.DirEntry, inner: tuple[str, ...]) -> os.stat_result:
    try:
        return os.stat(entry.path)  # follows links: a linked file or folder counts as its target
    except FileNotFoundError:
        if entry.is_symlink():
            raise BadInput(f"model folder {root}: {_named(entry, inner)} is dangling: "
                           "its target does not exist") from None
        raise BadInput(f"model folder {root}: {'/'.join(inner)} vanished while it was read") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(f"model folder {root}: {_named(entry, inner)} is a loop: it links back to itself") from None
        raise BadInput(f"model folder {root}: cannot read {'/'.join(inner)}: {exc.strerror}") from None


def _named(entry: os.DirEntry, inner: tuple[str, ...]) -> str:
    rel = "/".join(inner)
    return f"link {rel} -> {os.readlink(entry.path)}" if entry.is_symlink() else f"folder {rel}"


# ---------------------------------------------------------------- the cache


def _stat_key(st: os.stat_result) -> dict:
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino, "dev": st.st_dev}


@dataclass
class DigestCache:
    """File digests keyed by path and stat on this host; see the module docstring for where it lives."""

    entries: dict[str, dict] = field(default_factory=dict)  # resolved path -> stat key + "sha256"
    host: str = field(default_factory=socket.gethostname)
    others: dict[str, dict] = field(default_factory=dict)  # other hosts' sections, kept as found

    @classmethod
    def load(cls, path: str | os.PathLike) -> "DigestCache":
        """The cache at ``path``; empty when it is missing or unreadable (a cache is never an input)."""
        cache = cls()
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
            hosts = doc["hosts"] if doc.get("format") == CACHE_FORMAT else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cache
        if isinstance(hosts, dict):
            cache.others = {h: e for h, e in hosts.items() if h != cache.host and isinstance(e, dict)}
            mine = hosts.get(cache.host)
            cache.entries = dict(mine) if isinstance(mine, dict) else {}
        return cache

    @classmethod
    def from_env(cls) -> "DigestCache | None":
        """The run's cache that the executor named to this kernel, or None outside a gate run."""
        path = os.environ.get(MODEL_DIGEST_CACHE_ENV)
        return cls.load(path) if path else None

    def lookup(self, f: ModelFile) -> str | None:
        """A file's cached SHA-256 when its size, times, inode and device are still what they were when it
        was hashed; None otherwise, so that it is hashed again."""
        entry, key = self.entries.get(f.path), _stat_key(f.st)
        if isinstance(entry, dict) and {k: entry.get(k) for k in key} == key:
            return entry.get("sha256")
        return None

    def store(self, f: ModelFile, sha256: str, looked_at_ns: int) -> None:
        """Remember a file's SHA-256 under its stat, unless the file changed too recently for its stat to
        tell a later change apart."""
        if looked_at_ns - f.st.st_ctime_ns < RACY_NS:
            return  # changed too recently for its stat to tell a later change apart
        self.entries[f.path] = {**_stat_key(f.st), "sha256": sha256}

    def save(self, path: str | os.PathLike) -> None:
        """Write the cache (this host's entries beside the others') atomically, so a reader never sees half a file."""
        doc = {"format": CACHE_FORMAT, "hosts": {**self.others, self.host: self.entries}}
        atomic_write_bytes(path, canonical_bytes(doc))


# ---------------------------------------------------------------- the digest


def _file_digests(files: list[ModelFile], workers: int, cache: DigestCache | None) -> dict[str, str]:
    looked_at = time.time_ns()
    known = {f.path: cache.lookup(f) for f in files} if cache is not None else {}
    todo = sorted({f.path: f for f in files if not known.get(f.path)}.values(), key=lambda f: -f.st.st_size)
    hashed = _hash_all([f.path for f in todo], workers)  # largest first: the long ones start early
    if cache is not None:
        for f in todo:
            cache.store(f, hashed[f.path], looked_at)
    return {**{p: d for p, d in known.items() if d}, **hashed}


def _hash_all(paths: list[str], workers: int) -> dict[str, str]:
    if workers <= 1 or len(paths) <= 1:
        return {p: hash_file(p) for p in paths}
    with ThreadPoolExecutor(max_workers=min(workers, len(paths)), thread_name_prefix="model-digest") as pool:
        return dict(zip(paths, pool.map(hash_file, paths)))


def model_digest(folder: str | Path, workers: int | None = None, cache: DigestCache | None = None) -> str:
    """SHA-256 over the lines ``relative/posix/path NUL sha256(file) LF``, in path-component order.

    Only file bytes and relative names count, so a copied or moved folder keeps its digest.
    ``workers`` threads hash the files (1: one at a time); ``cache`` spares rereading unchanged files.
    """
    root = Path(folder)
    if not root.is_dir():
        raise BadInput(f"model folder {root} does not exist")
    files = list_files(root)
    try:
        digests = _file_digests(files, workers or default_workers(), cache)
    except OSError as exc:
        raise BadInput(f"model folder {root}: cannot read {exc.filename}: {exc.strerror}") from None
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.rel}\0{digests[f.path]}\n".encode("utf-8"))
    return h.hexdigest()


def check_model_digest(folder: str | Path, expected: str, where: str, cache: DigestCache | None = None) -> str:
    """Refuse a model folder whose bytes differ from the pinned digest, naming both.

    Without ``cache``, a case kernel uses the run's cache the executor named (read only).
    """
    actual = model_digest(folder, cache=cache if cache is not None else DigestCache.from_env())
    if actual != expected:
        raise BadInput(
            f"{where}: model folder {folder} has digest {actual[:16]}..., "
            f"but {expected[:16]}... is pinned (full: {actual} != {expected})"
        )
    return actual
