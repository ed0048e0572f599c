"""Stopping the processes an engine started, all of them.

An engine is a tree (server -> engine core -> one worker per pipeline stage); a survivor keeps
its memory and cores and, on a shared CI runner, starves the next case.
"""

from __future__ import annotations

import signal
from typing import Iterable

import psutil


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def stop_tree(pid: int, grace_s: float = 10.0) -> list[int]:
    """Stop a process and all its descendants; returns the pids that had to be killed."""
    procs = descendants(pid)
    try:
        procs.insert(0, psutil.Process(pid))
    except psutil.NoSuchProcess:
        pass
    return stop_procs(procs, grace_s)


def stop_procs(procs: Iterable[psutil.Process], grace_s: float = 10.0) -> list[int]:
    """SIGTERM first (an engine then shuts its workers down cleanly), SIGKILL what is left after
    ``grace_s``. The list is taken before the first signal: a dying parent's children are
    re-parented and a later walk of the tree would miss them."""
    procs = list({p.pid: p for p in procs}.values())
    for p in procs:
        _signal(p, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        _signal(p, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=5)
    return [p.pid for p in alive]


def _signal(p: psutil.Process, sig: int) -> None:
    try:
        p.send_signal(sig)
    except psutil.NoSuchProcess:
        pass
