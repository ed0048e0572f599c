"""One gate run at a time per run directory: an advisory lock on ``RUN_DIR/.lock``.

``flock`` belongs to the open file, so the kernel drops it when the holder
exits, however it exits: a crashed run never leaves a stale lock behind, and no
pid file needs second-guessing. The file itself says who holds it, for the
refusal message; it is never deleted (unlinking a lock file lets two runs lock
two different files of one name).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Sequence

from kit.core.errors import BadInput

LOCK_NAME = ".lock"


class RunLock:
    def __init__(self, run_dir: Path, fd: int) -> None:
        self.run_dir, self._fd = run_dir, fd

    def release(self) -> None:
        """Release the run directory's lock (closing the descriptor drops it), once."""
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire(run_dir: Path, command: Sequence[str] | None = None, what: str = "gate run") -> RunLock:
    """Lock ``run_dir`` for this process or refuse, in one line, naming the holder (``what``: the kind of
    run that holds such a directory, for the message)."""
    path = Path(run_dir) / LOCK_NAME
    # O_CLOEXEC: kernels and Ray workers started by this run must not inherit (and so prolong) the lock.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BadInput(f"run directory {run_dir} is in use by another {what}: {holder(path)}") from None
    info = {"pid": os.getpid(), "host": socket.gethostname(), "command": list(command or sys.argv),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    return RunLock(Path(run_dir), fd)


def holder(path: Path) -> str:
    """Who holds the lock, as its holder wrote it (it may still be writing: look twice)."""
    for _ in range(20):
        try:
            info = json.loads(path.read_text() or "null")
        except (OSError, ValueError):
            info = None
        if info:
            return (f"pid {info.get('pid')} on {info.get('host')} since {info.get('since')} "
                    f"({' '.join(info.get('command') or [])})")
        time.sleep(0.05)
    return "holder unknown (it has not said who it is)"
