"""Where run directories live: a local folder or an object-store prefix, read the same way through fsspec.

The history is a query over run directories wherever they are kept: ``runs/`` on one machine, or a bucket
prefix a team shares (``s3://team/parity-runs``). fsspec gives one interface over both, so nothing above this
module knows which it reads. What this module adds is the part fsspec leaves to its callers: finding the run
directories under a root, and turning a store that cannot be reached into one line that names it.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import Any, Iterator

from kit.core import rundir
from kit.core.errors import BadInput
from kit.core.jsonio import parse_json_input

log = logging.getLogger(__name__)

# What marks a directory as one command's run: a gate run's manifest, a control's record.
RUN_MARKERS = (rundir.MANIFEST, rundir.CONTROL)
# How deep below a root run directories are looked for (runs/<refresh>/<control>/<release> is three down).
MAX_DEPTH = 6


@dataclass(frozen=True)
class Store:
    """A root of run directories: ``fs`` (an fsspec filesystem) and ``root`` (the path inside it)."""

    url: str  # as the user gave it, for messages
    fs: Any
    root: str

    def path(self, relative: str) -> str:
        return posixpath.join(self.root, relative) if relative else self.root

    def where(self, relative: str) -> str:
        """A file's name for messages: the URL the user gave, joined with the path below it."""
        return posixpath.join(self.url.rstrip("/"), relative) if relative else self.url

    def exists(self, relative: str) -> bool:
        return bool(self.fs.exists(self.path(relative)))

    def read_bytes(self, relative: str) -> bytes:
        try:
            return bytes(self.fs.cat_file(self.path(relative)))
        except FileNotFoundError:
            raise BadInput(f"{self.where(relative)}: no such file") from None
        except OSError as exc:
            raise BadInput(f"{self.where(relative)}: cannot be read: {exc}") from None

    def read_tail(self, relative: str, size: int) -> bytes:
        """The last ``size`` bytes of a file (all of it when shorter), without fetching the rest."""
        try:
            total = int(self.fs.size(self.path(relative)))
            return bytes(self.fs.cat_file(self.path(relative), start=max(0, total - size)))
        except FileNotFoundError:
            raise BadInput(f"{self.where(relative)}: no such file") from None
        except OSError as exc:
            raise BadInput(f"{self.where(relative)}: cannot be read: {exc}") from None

    def read_json(self, relative: str) -> Any:
        return parse_json_input(self.read_bytes(relative), self.where(relative))

    def listdir(self, relative: str) -> list[str]:
        """The names directly under ``relative`` (files and folders), sorted."""
        entries = self.fs.ls(self.path(relative), detail=False)
        return sorted(posixpath.basename(str(e).rstrip("/")) for e in entries)

    def stamps(self, relative: str) -> dict[str, str]:
        """Per file directly under ``relative``: what changes when it is rewritten (its size with its modification
        time, or an object store's ETag), without reading it; empty when there is no such folder."""
        try:
            entries = self.fs.ls(self.path(relative), detail=True)
        except FileNotFoundError:
            return {}
        out = {}
        for e in entries:
            if e.get("type") == "directory":
                continue
            stamp = (e.get("ETag") or e.get("mtime") or e.get("LastModified") or e.get("last_modified")
                     or e.get("created") or "")
            out[posixpath.basename(str(e["name"]).rstrip("/"))] = f"{e.get('size')}:{stamp}"
        return out

    def run_dirs(self) -> Iterator[str]:
        """Each run directory under the root, relative to it, in name order (which is the order they ran:
        run directories are named by their start time). A run is not looked into."""
        yield from self._walk("", 0)

    def _walk(self, relative: str, depth: int) -> Iterator[str]:
        names = self.listdir(relative)
        if any(m in names for m in RUN_MARKERS):
            yield relative
            return
        if depth >= MAX_DEPTH:
            return
        for name in names:
            if name.startswith("."):
                continue
            child = posixpath.join(relative, name) if relative else name
            if self.fs.isdir(self.path(child)):
                yield from self._walk(child, depth + 1)


def open_store(url: str) -> Store:
    """The store at ``url`` (a local path or any URL fsspec knows); one line when it cannot be opened."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise BadInput(f"{url}: cannot open this store: {exc}") from None
    return Store(url, fs, root.rstrip("/") if root != "/" else root)

