"""Reading a run that anyone may have built: nothing in it can make `parity-kit verify` hang or exhaust memory.

A run's folder or zip comes from someone else. A named pipe where ``evidence.md`` should be blocks a plain open
forever; a device or a link to one reads without end; a sparse file of gigabytes is read whole by a reader that
trusts it. So before anything of a run is read, every entry of its folder is looked at without being opened
(``check_tree``): only folders and regular files, a link only where it stays inside the run and leads to one of
those, each file at most ``MAX_FILE`` bytes and all of them ``MAX_RUN``; and verify's own reads (``read_limited``)
open with O_NONBLOCK and O_NOFOLLOW and hold the open file to being regular and within the limit before reading it,
so that a file swapped after the look is refused too. Every name from a run reaches the terminal escaped
(``shown``): a name with terminal escapes in it cannot paint over the answer.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kit.core.errors import BadInput
from kit.core.records.text import printable

# The largest file of a run: a case's evidence or in-kernel reference of hundreds of prompts with their decoded
# steps takes tens of MB (the embedded descriptor's: 0.3 MB per case of 64 prompts, top 64); parsing a JSON file
# takes several times its size in memory.
MAX_FILE = 128 << 20
MAX_RUN = 1 << 30  # bytes, all files together (a zip's members are held to the same, kit.gate.verify.runzip)
MAX_ENTRIES = 100_000


def escaped(text: object) -> str:
    """Text from a run as a line may print it: every character that acts on the terminal written as its escape."""
    return printable(str(text))


def check_tree(run_dir: Path, source: str) -> int:
    """Every entry of ``run_dir`` a folder or a regular file within the limits, a link only to one inside it;
    BadInput, one line naming the first that is not. Returns the bytes the run's files take."""
    root = run_dir.resolve()
    total, entries = 0, 0
    stack = [run_dir]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                entries += 1
                if entries > MAX_ENTRIES:
                    raise BadInput(f"{escaped(source)}: more than {MAX_ENTRIES} files: not a run; nothing of it read")
                rel = escaped(Path(entry.path).relative_to(run_dir).as_posix())
                st = _kind_of(Path(entry.path), root, f"{escaped(source)}/{rel}")
                if stat.S_ISDIR(st.st_mode):
                    if not entry.is_symlink():
                        stack.append(Path(entry.path))
                    continue
                if st.st_size > MAX_FILE:
                    raise BadInput(f"{escaped(source)}/{rel}: {st.st_size} bytes, more than a run's file takes "
                                   f"({MAX_FILE}); nothing of the run read")
                total += st.st_size
                if total > MAX_RUN:
                    raise BadInput(f"{escaped(source)}: its files take more than {MAX_RUN} bytes (a run takes a few "
                                   "MB); nothing of it read")
    return total


def _kind_of(path: Path, root: Path, where: str) -> os.stat_result:
    """The status of a folder or regular file at ``path`` (through a link that stays inside ``root``)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        target = path.resolve()
        if target != root and root not in target.parents:
            raise BadInput(f"{where}: a link out of the run ({escaped(os.readlink(path))}); nothing of the run read")
        st = os.stat(path)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise BadInput(f"{where}: not a regular file ({_what(st.st_mode)}); a run holds files and folders only; "
                       "nothing of it read")
    return st


def _what(mode: int) -> str:
    for test, word in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return f"mode {oct(mode)}"


def read_limited(run_dir: Path, rel: str, limit: int = MAX_FILE) -> bytes | None:
    """The bytes of the run's file ``rel`` (None: absent), opened so that it cannot block or follow a link, and
    read only when it is a regular file of at most ``limit`` bytes; BadInput otherwise."""
    path = run_dir / rel
    if not os.path.lexists(path):
        return None
    real = path.resolve()
    root = run_dir.resolve()
    if root not in real.parents:
        raise BadInput(f"{escaped(rel)}: a link out of the run; not read")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise BadInput(f"{escaped(rel)}: cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{escaped(rel)}: not a regular file ({_what(st.st_mode)}); not read")
        if st.st_size > limit:
            raise BadInput(f"{escaped(rel)}: {st.st_size} bytes, more than a run's file takes ({limit}); not read")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise BadInput(f"{escaped(rel)}: grew past {limit} bytes while read; not read")
    return data
