"""Where run directories live: a local folder or an object-store prefix, read the same way through fsspec.

The history is a query over run directories wherever they are kept: ``runs/`` on one machine, or a bucket
prefix a team shares (``s3://team/parity-runs``). fsspec gives one interface over both, so nothing above this
module knows which it reads. What this module adds is the part fsspec leaves to its callers: finding the run
directories under a root, and turning a store that cannot be reached, refuses the credentials or has no such
bucket into one line (BadInput) that names the URL and what is wrong, never a botocore traceback.

An S3 store is opened with the standard AWS settings (AWS_ENDPOINT_URL for an S3-compatible server,
AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, AWS_REGION), plus the fsspec storage options in
$PARITY_KIT_STORAGE_OPTIONS (a JSON object) where one is set; docs/history-store.md.

A folder on this machine is read through the same Store with a filesystem of the standard library's
(``LocalFS``): every reader of a run directory (verify, the baselines archive, the history) reads it one way
whether it is here or in a bucket, and none of them needs fsspec for a local folder. Stdlib only at import:
kernels import kit.core, and fsspec is imported when a remote store is opened.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import shutil
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Iterator

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import parse_json_input
from kit.core.records.paths import display
from kit.core.records.recordcheck import Wrong

log = logging.getLogger(__name__)

# What marks a directory as one command's run: a gate run's manifest, a control's record.
RUN_MARKERS = (rundir.MANIFEST, rundir.CONTROL)

# fsspec storage options for every store opened, as a JSON object: an escape hatch for what the AWS settings
# do not say (anon access, a requester-pays bucket, gcsfs's project), so that no option needs a flag of its own.
STORAGE_OPTIONS_ENV = "PARITY_KIT_STORAGE_OPTIONS"

# botocore's defaults (60 s to connect, several attempts with backoff) turn a wrong endpoint into minutes of
# silence before a CI job says anything; a store is small requests, so a short connect and few attempts suffice.
S3_CONFIG = {"connect_timeout": 5, "read_timeout": 60, "retries": {"max_attempts": 2, "mode": "standard"}}

# The error codes of a request the server refused for who made it.
_DENIED = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403", "Forbidden", "ExpiredToken",
           "InvalidToken", "InvalidClientTokenId", "AuthorizationHeaderMalformed", "AllAccessDisabled"}
_NO_BUCKET = {"NoSuchBucket"}
# Exceptions (by class name: botocore and aiohttp are optional here) that mean the endpoint was never reached.
_UNREACHABLE = {"EndpointConnectionError", "ConnectTimeoutError", "ConnectTimeout", "ClientConnectorError",
                "ServerDisconnectedError", "ProxyConnectionError", "SSLError", "ReadTimeoutError"}


@dataclass(frozen=True)
class Store:
    """A root of run directories: ``fs`` (an fsspec filesystem) and ``root`` (the path inside it). Every method
    that touches the filesystem raises BadInput, one line naming the URL, for whatever the store refused."""

    url: str  # as the user gave it, for messages
    fs: Any
    root: str

    def path(self, relative: str) -> str:
        """``relative`` below the root; a name that leads out of it (absolute, ``..``, a link of a local store
        pointing elsewhere) is refused in one line."""
        if not relative:
            return self.root
        if relative.startswith("/") or ".." in relative.split("/"):
            raise BadInput(f"{self.where('')}: {relative!r} is not a path inside the store; refused")
        path = posixpath.join(self.root, relative)
        if self.is_local:
            rundir.inside(path, self.root)
        return path

    def where(self, relative: str) -> str:
        """A file's name for messages: the URL the user gave, joined with the path below it."""
        return posixpath.join(self.url.rstrip("/"), relative) if relative else self.url

    @property
    def is_local(self) -> bool:
        """Whether the store is a folder on this machine (its folders exist apart from their files)."""
        return bool(getattr(self.fs, "local_file", False))

    @contextlib.contextmanager
    def errors(self, relative: str, doing: str) -> Iterator[None]:
        """Whatever the filesystem raises inside becomes BadInput: ``<url>: cannot <doing>: <why>``."""
        try:
            yield
        except BadInput:
            raise
        except Exception as exc:  # botocore and aiohttp raise their own classes, not OSError: all of them land here
            raise BadInput(f"{self.where(relative)}: cannot {doing}: {reason(exc, self.fs)}") from None

    def exists(self, relative: str) -> bool:
        """Whether ``relative`` exists in the store; an error of the store itself is refused in one line naming it."""
        with self.errors(relative, "be looked up"):
            return bool(self.fs.exists(self.path(relative)))

    def read_bytes(self, relative: str) -> bytes:
        """A file of the store, read; a missing file is refused in one line naming it, and an error of the
        store itself (a missing bucket, no credentials) in one line of its own."""
        with self.errors(relative, "be read"):
            try:
                return bytes(self.fs.cat_file(self.path(relative)))
            except FileNotFoundError as exc:
                if _code(exc) in _NO_BUCKET:
                    raise
                raise BadInput(f"{self.where(relative)}: no such file") from None

    def read_json(self, relative: str) -> Any:
        """A JSON file of the store, refused in one line naming it when it is not JSON."""
        return parse_json_input(self.read_bytes(relative), self.where(relative))

    def listdir(self, relative: str) -> list[str]:
        """The names directly under ``relative`` (files and folders), sorted."""
        with self.errors(relative, "be listed"):
            entries = self.fs.ls(self.path(relative), detail=False)
        return sorted(posixpath.basename(str(e).rstrip("/")) for e in entries)

    def stamps(self, relative: str) -> dict[str, str]:
        """Per file directly under ``relative``: what changes when it is rewritten (its size with its modification
        time, or an object store's ETag), without reading it; empty when there is no such folder."""
        with self.errors(relative, "be listed"):
            try:
                entries = self.fs.ls(self.path(relative), detail=True)
            except FileNotFoundError as exc:
                if _code(exc) in _NO_BUCKET:
                    raise
                return {}
        out = {}
        for e in entries:
            if e.get("type") == "directory":
                continue
            stamp = (e.get("ETag") or e.get("mtime") or e.get("LastModified") or e.get("last_modified")
                     or e.get("created") or "")
            out[posixpath.basename(str(e["name"]).rstrip("/"))] = f"{e.get('size')}:{stamp}"
        return out

    def isdir(self, relative: str) -> bool:
        """Whether ``relative`` is a folder of the store."""
        with self.errors(relative, "be looked up"):
            return bool(self.fs.isdir(self.path(relative)))

    def probe(self) -> None:
        """Refuse, in one line, a store that cannot be used at all: an endpoint not reached, credentials refused,
        a bucket or folder that does not exist. An empty or absent prefix in a bucket is a store with no runs yet
        (an object store has no folders: the first run published makes it)."""
        with self.errors("", "be opened"):
            try:
                self.fs.ls(self.root, detail=False)
            except FileNotFoundError as exc:
                if self.is_local or _code(exc) in _NO_BUCKET:
                    raise

    def entries(self, relative: str) -> list[tuple[str, bool]]:
        """The names directly under ``relative``, each with whether it is a folder, in one listing (a walk of a
        bucket asks nothing per name)."""
        with self.errors(relative, "be listed"):
            found = self.fs.ls(self.path(relative), detail=True)
        return sorted((posixpath.basename(str(e["name"]).rstrip("/")), e.get("type") == "directory") for e in found)

    def real(self, relative: str) -> str | None:
        """Where a folder of a local store really is, its links resolved; None for an object store (no links)."""
        if not self.is_local:
            return None
        return os.path.realpath(posixpath.join(self.root, relative) if relative else self.root)

    def run_dirs(self, walked: Walk | None = None) -> Iterator[str]:
        """Each run directory under the root, relative to it, in name order (which is the order they ran:
        run directories are named by their start time); each folder the walk did not look into is logged.
        ``walked``: the root's walk, where the caller has made it already."""
        found = walked if walked is not None else self.walk()
        for skipped in found.skipped:
            log.warning(f"{self.where(skipped.location)}: {skipped.why}")
        yield from (f.location for f in found.found)

    def newest(self, kinds: tuple[str, ...]) -> str | None:
        """The most recently written run directory of one of ``kinds`` (keys of rundir.RECORDS) directly under the
        root, by its record's time, relative to the root; None when there is none (nor a root). Hidden folders and
        a folder that leads out of the root are not looked into."""
        if not self.isdir(""):
            return None
        marks = []
        for name, is_dir in self.entries(""):
            if not is_dir or name.startswith("."):
                continue
            for kind in kinds:
                record = posixpath.join(name, rundir.RECORDS[kind])
                try:
                    if not self.exists(record):
                        continue
                    with self.errors(record, "be looked up"):
                        (info,) = self.fs.ls(self.path(record), detail=True)
                except BadInput:  # a link out of the root: not one of its runs
                    continue
                marks.append((float(info.get("mtime") or 0), name))
        return max(marks)[1] if marks else None

    def walk(self) -> Walk:
        """The run directories under the root and the folders not looked into (kit.core.records.rundir.walk). A prefix
        nothing was published under yet has none (refused where the bucket or, for a folder store, the folder
        does not exist)."""
        self.probe()
        if self.is_local or self.exists(""):
            return walk(self)
        return Walk()


# What a walk does not look into below a run directory: the run's own folders, which hold no runs.
RUN_FOLDERS = (rundir.CASES, rundir.FIGURES)
# Hidden folders that are known to hold no run: the history's index, version control, Jupyter's checkpoints.
NOT_RUNS = {".history": "the history's index", ".git": "version control", ".ipynb_checkpoints": "Jupyter's checkpoints"}
# How deep below a root run directories are looked for (runs/<refresh>/<control>/<release> is three down, a bisect's
# steps four); a folder deeper still is named in the walk's skipped lines, not looked into.
MAX_DEPTH = 8


class FolderKind(StrEnum):
    """What a walk found: a gate run's folder, or a control's (which stands for its two runs)."""
    GATE = "gate run"
    CONTROL_DIR = "control"


class NotWalked(StrEnum):
    """Why a walk did not look into a folder: hidden, too deep, a link out of the root, a second name of a folder
    already walked (a loop), or a folder that could not be listed."""
    HIDDEN = "hidden"
    DEEP = "deep"
    OUTSIDE = "outside"
    AGAIN = "again"
    UNLISTED = "unlisted"


@dataclass(frozen=True)
class Found:
    """A run directory a walk found: its folder relative to the root and whether it is a gate run or a control."""

    location: str
    kind: FolderKind


@dataclass(frozen=True)
class Skipped:
    """A folder a walk did not look into, and why, in one line."""

    location: str
    why: str
    kind: NotWalked

    @property
    def text(self) -> str:
        """What the walk passed over and why, in one line for the reader of its output."""
        return f"{self.location or '.'}: {self.why}"


# How a walk's skipped folders are counted in the one line that says a root holds no run.
_SKIPPED_WORDS = {NotWalked.HIDDEN: "hidden", NotWalked.DEEP: "too deep", NotWalked.OUTSIDE: "linked out of the root",
                  NotWalked.AGAIN: "a second name", NotWalked.UNLISTED: "could not be listed"}


@dataclass
class Walk:
    """What a walk found under a root, and each folder it did not look into."""

    found: list[Found] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    folders: int = 0  # how many folders were listed

    def said(self) -> str:
        """What the walk saw, in a few words: the folders it listed, none holding a run's record, and how many it
        passed over and why."""
        line = f"{self.folders} folder(s) looked into, none holding {rundir.MANIFEST} or {rundir.CONTROL}"
        counts = Counter(s.kind for s in self.skipped)
        if counts:
            line += f" ({', '.join(f'{n} {_SKIPPED_WORDS[kind]}' for kind, n in counts.most_common())}: passed over)"
        return line


def walk(tree: Store, max_depth: int = MAX_DEPTH) -> Walk:
    """Every gate run and control directory under ``tree``'s root, in name order. A run directory does not hide
    the folders below it (a stray manifest.json at a root is one run, not the end of the walk): only its own
    cases/ and figures/ and a control's two runs are not looked into again. A link is followed while it stays
    inside the root, and each folder is counted once however many names lead to it (a loop ends there); a link
    leading out, a hidden folder and a folder deeper than ``max_depth`` are each one skipped line."""
    out = Walk()
    top = tree.real("")
    _visit(tree, "", max_depth, top, set(), out)
    return out


def _visit(tree: Store, relative: str, left: int, top: str | None, seen: set[str], out: Walk) -> None:
    """Walk ``relative`` (``left``: how many folders deeper the walk may still go)."""
    real = tree.real(relative)
    if real is not None and top is not None:
        if rundir.leads_out(real, top):
            out.skipped.append(Skipped(relative, f"a link leading out of the root (to {real}): not followed",
                                       NotWalked.OUTSIDE))
            return
        if real in seen:
            out.skipped.append(Skipped(relative, f"a second name of a folder already walked ({real}): counted once",
                                       NotWalked.AGAIN))
            return
        seen.add(real)
    try:
        entries = tree.entries(relative)
    except (OSError, BadInput) as exc:
        out.skipped.append(Skipped(relative, f"cannot be listed: {getattr(exc, 'strerror', None) or exc}",
                                   NotWalked.UNLISTED))
        return
    out.folders += 1
    names = {name for name, _ in entries}
    own: set[str] = set()
    if rundir.CONTROL in names:
        out.found.append(Found(relative, FolderKind.CONTROL_DIR))
        own = set(_control_names(tree, relative))
    elif rundir.MANIFEST in names:
        out.found.append(Found(relative, FolderKind.GATE))
    if own or rundir.MANIFEST in names:
        own |= set(RUN_FOLDERS)
    for name, is_dir in entries:
        if not is_dir or name in own:
            continue
        child = posixpath.join(relative, name) if relative else name
        if name.startswith("."):
            if name in NOT_RUNS:
                continue
            out.skipped.append(Skipped(child, "a hidden folder: not looked into (name it as a root to read it)",
                                       NotWalked.HIDDEN))
        elif left < 1:
            out.skipped.append(Skipped(child, f"more than {MAX_DEPTH} folders below the root: not looked into "
                                              "(name a folder nearer it as a root)", NotWalked.DEEP))
        else:
            _visit(tree, child, left - 1, top, seen, out)


def _control_names(tree: Store, relative: str) -> tuple[str, ...]:
    """A control's two run folders, not walked again as gate runs of their own; none when its record cannot be
    read (its reader says why, and its runs are then found as gate runs)."""
    try:
        return rundir.control_run_names(json.loads(tree.read_bytes(posixpath.join(relative, rundir.CONTROL))))
    except (BadInput, Wrong, ValueError, OSError):
        return ()


class LocalFS:
    """A folder of this machine as the part of an fsspec filesystem a Store uses, from the standard library:
    links are followed (where one leads is the Store's to judge, ``Store.path``), and each listing says what
    fsspec's local filesystem says (name, size, type, mtime), so that a store's stamps do not depend on which
    of the two read it."""

    protocol = ("file", "local")
    local_file = True

    # fsspec's names for what the standard library does already (a link that leads nowhere does not exist).
    exists, isdir, makedirs = staticmethod(os.path.exists), staticmethod(os.path.isdir), staticmethod(os.makedirs)
    put_file = staticmethod(shutil.copyfile)  # (source, path): a local file copied into the store

    @staticmethod
    def cat_file(path: str) -> bytes:
        """The bytes of the file at ``path``."""
        return Path(path).read_bytes()

    def ls(self, path: str, detail: bool = True) -> list[Any]:
        """The entries of the folder ``path`` (the file itself for a file), as fsspec lists them."""
        names = [path] if os.path.isfile(path) else [os.path.join(path, n) for n in sorted(os.listdir(path))]
        if not detail:
            return names
        return [self._info(name) for name in names]

    @staticmethod
    def _info(name: str) -> dict[str, Any]:
        try:
            st = os.stat(name)
        except OSError:  # a link that leads nowhere: listed, as fsspec does, as what it is
            st = os.lstat(name)
        kind = "directory" if os.path.isdir(name) else "file" if os.path.isfile(name) else "other"
        return {"name": name, "size": st.st_size, "type": kind, "mtime": st.st_mtime}


def local_store(root: str | Path) -> Store:
    """The folder ``root`` of this machine as a Store (no fsspec), named in messages as ``display`` names it."""
    return Store(display(root), LocalFS(), os.path.abspath(root))


def open_store(url: str) -> Store:
    """The store at ``url`` (a local path, or any URL fsspec knows); one line when it cannot be opened. Nothing
    is requested from the store here: ``Store.probe`` asks it whether it can be used."""
    if "://" not in url:
        return Store(url, LocalFS(), os.path.abspath(url))
    import fsspec

    options = storage_options(url)
    try:
        fs, root = fsspec.core.url_to_fs(url, **options)
    except ImportError:
        protocol = url.split("://", 1)[0]
        extra = {"s3": "parity-kit[s3]", "s3a": "parity-kit[s3]", "gs": "gcsfs", "gcs": "gcsfs"}.get(protocol)
        hint = f": pip install {extra}" if extra else ""
        raise BadInput(f"{url}: the {protocol}:// filesystem is not installed{hint}") from None
    except Exception as exc:  # an unknown protocol (ValueError), a storage option the filesystem rejects (TypeError)
        raise BadInput(f"{url}: cannot open this store: {reason(exc)}") from None
    return Store(url, fs, root.rstrip("/") if root != "/" else root)


def storage_options(url: str) -> dict[str, Any]:
    """The fsspec options a store at ``url`` is opened with: for S3, bounded connects and retries, and a fresh
    client each time (fsspec reuses a filesystem by its options, not by the environment it was made in, so a
    changed AWS_ENDPOINT_URL or profile would otherwise be ignored); then $PARITY_KIT_STORAGE_OPTIONS over them."""
    options: dict[str, Any] = {}
    if url.split("://", 1)[0] in ("s3", "s3a"):
        options = {"config_kwargs": json.loads(json.dumps(S3_CONFIG)), "skip_instance_cache": True}
    text = os.environ.get(STORAGE_OPTIONS_ENV, "").strip()
    if text:
        try:
            given = json.loads(text)
        except ValueError as exc:
            raise BadInput(f"${STORAGE_OPTIONS_ENV}: not JSON: {exc}") from None
        if not isinstance(given, dict):
            raise BadInput(f"${STORAGE_OPTIONS_ENV}: expected a JSON object of fsspec storage options, "
                           f"got {type(given).__name__}")
        for key, value in given.items():  # one level deep, so config_kwargs can add to the bounds, not drop them
            if isinstance(value, dict) and isinstance(options.get(key), dict):
                options[key] = {**options[key], **value}
            else:
                options[key] = value
    return options


def reason(exc: BaseException, fs: Any = None) -> str:
    """What went wrong, in words and on one line, from an exception fsspec, s3fs, botocore or aiohttp raised."""
    code = _code(exc)
    if code in _NO_BUCKET:
        return "the bucket does not exist"
    if code in _DENIED:
        return (f"access denied ({code}): check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or AWS_PROFILE) and what they may do on this bucket")
    for e in _chain(exc):
        name = type(e).__name__
        if name in ("NoCredentialsError", "PartialCredentialsError"):
            return "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        if name in _UNREACHABLE or isinstance(e, (ConnectionError, TimeoutError)):
            return f"cannot reach the endpoint {_endpoint(fs)}: {_line(e)}"
    if isinstance(exc, FileNotFoundError):  # NoSuchKey, a 404, or a folder's absence: the bucket is there
        return "no such file or folder"
    if code:
        return f"the server refused the request ({code}): {_line(exc)}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {_line(exc)}"
    return f"{type(exc).__name__}: {_line(exc)}"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _code(exc: BaseException) -> str | None:
    """The S3 error code of a refused request (botocore's ClientError, which s3fs keeps as the cause of the
    OSError it raises), or None."""
    for e in _chain(exc):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            error = response.get("Error") or {}
            code = error.get("Code") or response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code:
                return str(code)
    return None


def _endpoint(fs: Any) -> str:
    """The endpoint a filesystem talks to, for messages: an S3 client's URL where there is one."""
    for owner in ("_s3", "s3"):
        try:
            url = getattr(getattr(getattr(fs, owner, None), "meta", None), "endpoint_url", None)
        except Exception:  # a client that is not made yet may say so by raising: the environment then says where
            url = None
        if url:
            return str(url)
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "(the default endpoint)"


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
