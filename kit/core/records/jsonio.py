"""Canonical JSON, content digests and atomic writes.

Every JSON file the kit writes (fixtures, goldens, case results) goes through
here so that equal content always means equal bytes and equal digests.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any


def json_safe(obj: Any) -> Any:
    """NaN and infinities become null: strict JSON readers (jq, CI dashboards) refuse them."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def canonical_bytes(obj: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8, one trailing newline."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def sha256_bytes(data: bytes) -> str:
    """The SHA-256 of ``data`` in hex: the name of every content-addressed file the kit writes."""
    return hashlib.sha256(data).hexdigest()


class ContentAddressed:
    """A record whose name is the SHA-256 of its canonical JSON (calibration records, power records, lineage
    entries): one definition of the bytes that are written and of the name they give, for every kind."""

    def to_dict(self) -> dict:
        """The record's document: a subclass says which fields its bytes, and so its name, hold."""
        raise NotImplementedError

    def canonical(self) -> bytes:
        """The record's canonical bytes: what its file holds and its name hashes."""
        return canonical_bytes(self.to_dict())

    @property
    def sha256(self) -> str:
        """The record's name: the SHA-256 of its canonical bytes, computed from its fields, never stored beside them."""
        return sha256_bytes(self.canonical())


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 of a file in hex, read a megabyte at a time, so a large checkpoint shard never sits in memory
    whole."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_umask() -> int | None:
    """The process's umask, read without changing it (None where /proc does not say): setting it to probe it
    would race with the threads of whoever asks (the executor's cases, a forked kernel's warm process)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return None


def _process_umask() -> int:
    read = read_umask()
    if read is not None:
        return read
    old = os.umask(0o022)  # no /proc: probe once, at import, before any thread starts
    os.umask(old)
    return old


# mkstemp creates its file 0600 whatever the umask; artifacts must be readable as any other file the
# user writes (teammates on a shared filesystem read summary.html and result.json).
FILE_MODE = 0o666 & ~_process_umask()


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write via a temporary file in the same folder and rename it into place,
    so a reader (or a crash) never sees half a file. The file gets the mode the umask gives."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_canonical(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as canonical JSON, atomically: the one way a file named by its digest is written."""
    return atomic_write_bytes(path, canonical_bytes(obj))


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Human-readable (indented) but still atomic; for run artifacts, not content-addressed files."""
    text = json.dumps(json_safe(obj), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return atomic_write_bytes(path, text.encode("utf-8"))


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file the kit wrote itself, read as UTF-8; input from outside goes through read_json_input, which
    refuses in one line."""
    with open(path, "rb") as f:
        return json.loads(f.read().decode("utf-8"))


def read_input_bytes(path: str | os.PathLike, what: str) -> bytes:
    """The bytes of an input file; one that cannot be read (permissions, a folder, an I/O error) is
    bad input naming ``what`` and why, not a traceback."""
    from kit.core.errors import BadInput

    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise BadInput(f"{what} cannot be read: {exc.strerror or exc}") from None


NESTED_TOO_DEEP = "it nests deeper than a JSON reader can follow"


def _no_constant(name: str) -> Any:
    raise ValueError(f"it holds {name}, which JSON does not allow")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as an infinity
        raise ValueError(f"it holds {text}, which is beyond a float")
    return value


def read_json_input(path: str | os.PathLike, what: str) -> Any:
    """An input JSON file the kit wrote (a manifest, a result) that a user or a crash may have damaged:
    unreadable, not UTF-8, not JSON, or holding NaN/Infinity is one line naming ``what``."""
    return parse_json_input(read_input_bytes(path, what), what)


def parse_json_input(data: bytes, what: str) -> Any:
    """``data`` as read_json_input reads a file's bytes: for a caller that needs the bytes too (a
    content-addressed file is checked against its bytes, not against its re-serialized content)."""
    from kit.core.errors import BadInput

    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float)
    except UnicodeDecodeError as exc:
        raise BadInput(f"{what} is not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise BadInput(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:  # json's reader recurses per level: [[[[... deep enough ends it
        raise BadInput(f"{what} is not valid JSON: {NESTED_TOO_DEEP}") from None



def read_addressed(path: str | os.PathLike, what: str, noun: str, remedy: str) -> Any:
    """The document of a file named by its own SHA-256 (a ContentAddressed record: calibration record, power
    record, lineage entry), read once: its bytes must be canonical JSON and hash to its name (as given: a link's
    own name, not its target's), so the name pins the bytes. Anything else is one line naming the file, saying the
    ``noun`` was edited and what to do instead (``remedy``); ``what`` names the file where it cannot be read."""
    from kit.core.errors import BadInput

    path, shown = Path(path), str(path)
    data = read_input_bytes(path, f"{what} {shown}")
    doc = parse_json_input(data, f"{what} {shown}")
    if canonical_bytes(doc) != data:
        raise BadInput(f"{shown}: not canonical JSON (sorted keys, no spaces, one trailing newline, as the kit writes "
                       f"a {noun}): the {noun} was edited; {remedy}")
    digest = sha256_bytes(data)
    if digest != path.stem:
        raise BadInput(f"{shown}: name is not the {noun}'s SHA-256 ({digest}): the {noun} was changed after it was "
                       f"made; {remedy}")
    return doc

# A backslash escape in JSON text: \uXXXX with its code, or any other escape, consumed whole so that the "u"
# after an escaped backslash ("\\u...") is read as the text it is.
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def lone_surrogate_at(text: str) -> tuple[int, int] | None:
    """Line and column (1-based) of the first escape in JSON ``text`` that writes a lone surrogate (a high half not
    followed at once by a low half, or a low half alone), or None. UTF-8 cannot encode one, so a file holds it
    only as such an escape: where it stands is where a person must look."""
    high = None
    for m in _ESCAPE.finditer(text):
        code = int(m.group(1), 16) if m.group(1) else -1
        if high is not None:
            if 0xDC00 <= code <= 0xDFFF and m.start() == high.end():
                high = None  # a pair: one character beyond the Basic Multilingual Plane
                continue
            return _line_column(text, high.start())
        if 0xD800 <= code <= 0xDBFF:
            high = m
        elif 0xDC00 <= code <= 0xDFFF:
            return _line_column(text, m.start())
    return None if high is None else _line_column(text, high.start())


def surrogate_place(path: str | os.PathLike, data: bytes) -> str:
    """``path:line:column`` of the first lone surrogate's escape in the JSON file ``path`` holding ``data``, for a
    message (a canonical file is one line, sorted: that escape is the one its first offending entry holds); the
    path alone when there is none."""
    place = lone_surrogate_at(data.decode("utf-8", errors="replace"))
    return f"{path}:{place[0]}:{place[1]}" if place else str(path)


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
