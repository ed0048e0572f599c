"""Stopping every process a case started, and knowing it is done.

A case is a tree (kernel -> engine server -> engine core -> one worker per pipeline stage); a survivor
keeps its memory and cores and, on a shared CI runner, starves the next case. Walking a tree by parent
links is not enough: a process whose parent dies first is re-parented to init (or a subreaper) and
drops out of the tree before the walk reaches it, and on a loaded machine that happens between any
two steps. Sessions and process groups do not forget: a process keeps its session id and process
group through its parents' deaths. So each case's kernel runs in a session of its own (jupyter_client's
launcher starts it with ``start_new_session``), an engine server in a process group of its own inside
that session (``own_group``), and ``stop_tree`` stops a target as a whole: every process of the session
and group the target leads (even once the leader is gone), every descendant of those (one that left
for a session of its own is still found through its parent, and its session with it), SIGTERM, a grace
period, SIGKILL, and then a wait until none of them is alive before it returns.

``guard`` covers the one path on which the process that holds the case cannot run a stop: that
process itself dying (a lost Ray worker, a gate killed with SIGKILL). A small process in a session of
its own waits for the holder to go and then stops the kernel's session.

Standard library only: a kernel imports this module (engine servers are stopped from the kernel), and
the guard runs it as a script.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from typing import IO, Iterable, NamedTuple

log = logging.getLogger(__name__)

WAIT_S = 30.0  # after SIGKILL, how long a process may take to be gone (a loaded machine, a process in I/O)
POLL_S = 0.05
_DEAD = frozenset("ZXx")  # a zombie is dead: only its parent's wait is missing


class Identity(NamedTuple):
    """A process as it was when first seen: ``start`` (clock ticks since boot) tells it from a later
    process that was given the same pid."""

    pid: int
    start: int


class _Proc(NamedTuple):
    pid: int
    ppid: int
    pgid: int
    sid: int
    alive: bool
    start: int


# ---------------------------------------------------------------- the process table

def _table() -> dict[int, _Proc]:
    """Every process of the machine, read in one pass."""
    if not os.path.isdir("/proc/self"):
        return _table_without_proc()
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            proc = _read_stat(int(name))
            if proc is not None:
                table[proc.pid] = proc
    return table


def _read_stat(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:  # gone between the listing and the read
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    fields = data[data.rindex(")") + 2:].split()
    # state, ppid, pgrp, session are fields 3-6 of proc(5); starttime is field 22
    return _Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0] not in _DEAD, int(fields[19]))


def _table_without_proc() -> dict[int, _Proc]:
    """The same table where there is no /proc (macOS): psutil, imported only here."""
    import psutil

    table = {}
    for p in psutil.process_iter(["ppid", "status", "create_time"]):
        try:
            pgid, sid = os.getpgid(p.pid), os.getsid(p.pid)
        except OSError:
            continue
        alive = p.info["status"] not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
        table[p.pid] = _Proc(p.pid, p.info["ppid"] or 0, pgid, sid, alive, int((p.info["create_time"] or 0) * 100))
    return table


def identity(pid: int) -> Identity | None:
    """The process now running as ``pid``, or None when there is none."""
    if os.path.isdir("/proc/self"):
        proc = _read_stat(pid)
    else:
        proc = _table_without_proc().get(pid)
    return Identity(pid, proc.start) if proc else None


def descendants(pid: int) -> list[Identity]:
    """The processes under ``pid`` now, by parent links."""
    table = _table()
    return [Identity(p, table[p].start) for p in _under({pid}, table)]


def members(leader: int) -> list[int]:
    """The live processes of the session or process group that ``leader`` leads (or led: they keep its
    id after it is gone)."""
    return sorted(p.pid for p in _table().values() if p.alive and leader in (p.sid, p.pgid))


def _under(roots: set[int], table: dict[int, _Proc]) -> list[int]:
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, frontier = [], list(roots)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in roots and child not in found:
                found.append(child)
                frontier.append(child)
    return found


# ---------------------------------------------------------------- the killer

class _Target:
    """What a stop has seen so far: it only grows, so a process found once is stopped and waited for
    even after its parent, group leader or session leader is gone."""

    def __init__(self, roots: Iterable[int | Identity]):
        self.seen: dict[int, int] = {}  # pid -> start time when first seen
        self.leaders: set[int] = set()  # sessions and groups (by their leader's pid) taken whole
        table = _table()
        for root in roots:
            pid, start = (root.pid, root.start) if isinstance(root, Identity) else (int(root), None)
            now = table.get(pid)
            if now is not None and start is not None and now.start != start:
                # The pid was given to another process: ours is gone, and so is every member of its
                # session and group (the kernel hands out no pid that a session or group still uses).
                continue
            self.leaders.add(pid)
            if now is not None:
                self.seen[pid] = now.start

    def alive(self) -> dict[int, _Proc]:
        """Every process of the target alive now, after taking in what appeared since the last look."""
        table = _table()
        for proc in table.values():
            if proc.sid in self.leaders or proc.pgid in self.leaders:
                self.seen.setdefault(proc.pid, proc.start)
        live = {p for p, start in self.seen.items() if p in table and table[p].start == start}
        for pid in _under(live, table):
            self.seen.setdefault(pid, table[pid].start)
            live.add(pid)
        for pid in live:
            proc = table[pid]
            if proc.sid == pid or proc.pgid == pid:  # it leads a session or group of its own: take it whole
                self.leaders.add(pid)
        me = os.getpid()
        return {p: table[p] for p in live if table[p].alive and p != me}

    def signal(self, procs: dict[int, _Proc], sig: int) -> None:
        own_group = os.getpgrp()
        # A whole group at once also reaches a process forked since the last look.
        for pgid in {p.pgid for p in procs.values() if p.pgid in self.leaders and p.pgid != own_group}:
            _quietly(os.killpg, pgid, sig)
        for pid in procs:
            _quietly(os.kill, pid, sig)


def _quietly(send, target: int, sig: int) -> None:
    try:
        send(target, sig)
    except (ProcessLookupError, PermissionError):  # gone already, or never ours to signal
        pass


def stop_tree(pid: int | Identity | None, grace_s: float = 10.0, wait_s: float = WAIT_S,
              warn: bool = True) -> list[int]:
    """Stop a process with everything it started (see the module's docstring for what that covers).
    Returns the pids still alive ``wait_s`` after SIGKILL: empty once the job is done."""
    return stop_procs([] if pid is None else [pid], grace_s, wait_s, warn)


def stop_procs(roots: Iterable[int | Identity], grace_s: float = 10.0, wait_s: float = WAIT_S,
               warn: bool = True) -> list[int]:
    """``stop_tree`` for several targets at once. SIGTERM first (an engine then shuts its workers down
    cleanly); after ``grace_s``, or at once when it is 0, SIGKILL to whatever of them is left, again
    to any that appears, until none is alive."""
    target = _Target(roots)
    procs = target.alive()
    if procs and grace_s > 0:
        termed: set[int] = set()
        deadline = time.monotonic() + grace_s
        while procs and time.monotonic() < deadline:
            fresh = {p: v for p, v in procs.items() if p not in termed}
            if fresh:
                target.signal(fresh, signal.SIGTERM)
                termed.update(fresh)
            time.sleep(POLL_S)
            procs = target.alive()
    deadline = time.monotonic() + wait_s
    while procs:
        target.signal(procs, signal.SIGKILL)
        if time.monotonic() > deadline:
            if warn:
                log.warning("%d process(es) did not exit within %g s of SIGKILL (pids %s)", len(procs), wait_s,
                            ", ".join(map(str, sorted(procs))))
            return sorted(procs)
        time.sleep(POLL_S)
        procs = target.alive()
    return []


# ---------------------------------------------------------------- starting processes to be stopped

def own_group() -> dict:
    """``subprocess.Popen`` keywords that start a process in a process group of its own, in its
    parent's session: stopping it then takes its workers and leaves its parent, and a stop of the
    parent's session still takes it."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}


class Guard:
    """A process that stops ``session`` once this process closes it or dies, whichever comes first.

    It reads its stdin until the end: the only write end is this process's, which the kernel closes
    when this process exits, however it exits. It runs in a session of its own, so a terminal's
    Ctrl-C to the gate's process group does not take it first, and it is no child of this process: a
    runtime that kills a dead worker's children (Ray does) would otherwise kill the guard together with
    the kernel, at the very moment it is needed, and leave the kernel's own children running. So it is
    started through a short-lived first process that forks it and exits; its stdout's end tells this
    process when it is done, since it cannot be waited for."""

    def __init__(self, session: Identity):
        self.session = session
        starter = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__), "--detach", str(session.pid), str(session.start)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            starter.wait(timeout=WAIT_S)  # it exits once the guard is forked
        except subprocess.TimeoutExpired:
            starter.kill()
            starter.wait()
            raise OSError("the guard's starter did not exit") from None
        self._ends: tuple[IO[bytes], IO[bytes]] | None = (starter.stdin, starter.stdout)  # type: ignore[assignment]

    def release(self, wait_s: float = WAIT_S + 10) -> None:
        """Close its stdin, so that it stops the session (empty by now, normally) and exits; wait until its
        stdout's end says it has."""
        import select

        ends, self._ends = self._ends, None
        if ends is None:
            return
        stdin, stdout = ends
        stdin.close()
        try:
            ready, _, _ = select.select([stdout], [], [], wait_s)
            if not ready:
                log.warning("the guard of session %d did not exit within %g s", self.session.pid, wait_s)
        finally:
            stdout.close()


def guard(session: Identity) -> Guard | None:
    """A guard for ``session``; None (and a warning) where one cannot start: the stops this process
    makes itself still run."""
    try:
        return Guard(session)
    except OSError as exc:
        log.warning("no guard for session %d: %s", session.pid, exc)
        return None


def _guard_main(argv: list[str]) -> int:
    if argv and argv[0] == "--detach":  # the starter: fork the guard, which init adopts, and go
        if os.fork():
            os._exit(0)
        argv = argv[1:]
    session = Identity(int(argv[0]), int(argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only its stdin's end may start the stop
    try:
        sys.stdin.buffer.read()
    except OSError:
        pass
    return 1 if stop_tree(session, grace_s=0, warn=False) else 0


if __name__ == "__main__":
    sys.exit(_guard_main(sys.argv[1:]))
