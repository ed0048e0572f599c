"""A run's zip (`parity-kit report --attach`) opened for `parity-kit verify`, as a reviewer opens an attachment.

The zip comes from anyone: an issue, a pull request, a mail. Whatever is wrong with it is one line naming the zip
and the member, and nothing is written outside a fresh folder. Every member is checked before anything is
extracted: a name that leads out (absolute, ``..``, a backslash, a control character), a link or any other file
that is not a plain file or folder, a name given twice (the second would silently win), encryption, a compression
method Python's zipfile cannot read, and sizes past the limits below. Then each member is copied in pieces, counted
as it comes: a member that inflates past the size it declares, or past the limits, stops the extraction there. A
damaged stream (a corrupt deflate, a wrong CRC, a cut file) is the same one line, whatever Python raises for it.
"""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from kit.core.errors import BadInput
from kit.core.records.paths import display
from kit.gate.verify.safeio import MAX_FILE, MAX_RUN

# A run's zip holds its notebooks, its HTML summary and figures, and its JSON records: the embedded descriptor's
# eight cases make 38 members, 2.1 MB inflating to 7.1 MB, none more than 11 times its compressed size. The limits
# leave room for runs of hundreds of cases and none for a zip bomb.
MAX_MEMBERS = 10_000
MAX_EXTRACTED = MAX_RUN  # bytes, all members together, as a run's folder is held (kit.gate.verify.safeio)
MAX_RATIO = 200  # a member's size over its compressed size
RATIO_FROM = 1 << 20  # members smaller than this are not held to the ratio (a tiny repetitive file may exceed it)
CHUNK = 1 << 20
READABLE = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


def extract_run(zip_path: Path, into: Path) -> Path:
    """The run folder of a run's zip, extracted into ``into`` (an empty folder) once every member was checked;
    BadInput, one line, for anything that is not a plain run's zip."""
    shown = display(zip_path)
    try:
        with zipfile.ZipFile(zip_path) as z:
            members = z.infolist()
            top = check_members(members, shown)
            budget = [MAX_EXTRACTED]
            for info in members:
                _extract(z, info, into, budget, shown)
    except BadInput:
        raise
    except zipfile.BadZipFile as exc:
        raise BadInput(f"{shown}: not a readable zip ({exc}): truncated, damaged, or not a zip") from None
    except (zlib.error, EOFError, OSError, RuntimeError, NotImplementedError, ValueError,
            zipfile.LargeZipFile) as exc:
        what = "zlib" if isinstance(exc, zlib.error) else type(exc).__name__
        raise BadInput(f"{shown}: could not be read whole ({what}: {exc}): damaged or truncated; nothing of it is "
                       "verified") from None
    return into / top


def check_members(members: list[zipfile.ZipInfo], shown: str) -> str:
    """The one folder at the zip's root, once every member passed the checks of the module; BadInput otherwise."""
    if len(members) > MAX_MEMBERS:
        raise BadInput(f"{shown}: {len(members)} members, more than a run's zip holds ({MAX_MEMBERS}); nothing "
                       "extracted")
    seen: set[str] = set()
    tops: set[str] = set()
    total = 0
    for info in members:
        name = member_name(info, shown)
        if name in seen:
            raise BadInput(f"{shown}: member {info.filename!r} is in the zip twice; which one is the run's cannot be "
                           "told; nothing extracted")
        seen.add(name)
        tops.add(PurePosixPath(name).parts[0])
        _check_kind(info, shown)
        total += info.file_size
        if info.file_size > MAX_FILE:  # read whole once extracted: held to what a run's file takes
            raise BadInput(f"{shown}: member {info.filename!r} declares {info.file_size} bytes, more than a run's "
                           f"file takes ({MAX_FILE}); nothing extracted")
        if info.file_size > RATIO_FROM and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise BadInput(f"{shown}: member {info.filename!r} inflates {info.file_size} bytes from "
                           f"{info.compress_size}, more than {MAX_RATIO} times: not a run's file; nothing extracted")
    if total > MAX_EXTRACTED:
        raise BadInput(f"{shown}: its members would take {total} bytes, more than {MAX_EXTRACTED} (a run's zip takes "
                       "a few MB); nothing extracted")
    if len(tops) != 1:
        raise BadInput(f"{shown}: not a run's zip (`parity-kit report --attach` puts one folder at its root; "
                       f"this one has {len(tops)})")
    return tops.pop()


def member_name(info: zipfile.ZipInfo, shown: str) -> str:
    """A member's name as a relative path inside the zip's folder (``a//b`` and ``a/./b`` are ``a/b``); refused
    when it could lead anywhere else."""
    raw = info.filename
    leads_out = (not raw.strip("/") or raw.startswith("/") or "\\" in raw or ".." in PurePosixPath(raw).parts
                 or any(ord(c) < 32 or ord(c) == 127 for c in raw))
    if leads_out:
        raise BadInput(f"{shown}: member {raw!r} leads out of its folder; nothing extracted")
    return str(PurePosixPath(raw))


def _check_kind(info: zipfile.ZipInfo, shown: str) -> None:
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if stat.S_ISLNK(mode):
        raise BadInput(f"{shown}: member {info.filename!r} is a link; a run's zip holds its own files only; nothing "
                       "extracted")
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise BadInput(f"{shown}: member {info.filename!r} is not a plain file (mode {oct(mode)}); nothing extracted")
    if info.flag_bits & 0x1:
        raise BadInput(f"{shown}: member {info.filename!r} is encrypted; a run's zip is not; nothing extracted")
    if info.compress_type not in READABLE:
        raise BadInput(f"{shown}: member {info.filename!r} uses compression method {info.compress_type}, which "
                       "cannot be read here (stored, deflate, bzip2 or lzma); nothing extracted")


def _extract(z: zipfile.ZipFile, info: zipfile.ZipInfo, into: Path, budget: list[int], shown: str) -> None:
    """One checked member, copied in pieces, its bytes counted against its own size and the zip's budget; a file is
    created, never opened over another or through a link."""
    target = into / PurePosixPath(info.filename)
    if info.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    written = 0
    with os.fdopen(fd, "wb") as out, z.open(info) as member:
        while chunk := member.read(CHUNK):
            written += len(chunk)
            budget[0] -= len(chunk)
            if written > info.file_size or written > MAX_FILE or budget[0] < 0:
                raise BadInput(f"{shown}: member {info.filename!r} inflates past "
                               f"{'the size it declares' if written > info.file_size else f'{MAX_EXTRACTED} bytes'}; "
                               "extraction stopped")
            out.write(chunk)
