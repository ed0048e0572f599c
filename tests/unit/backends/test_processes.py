"""The one process killer (kit.backends.processes): a case-like process tree, its leader killed first and a
grandchild re-parented to init, is stopped whole on a loaded machine; a group inside a session is stopped
alone; a pid given to another process is left alone; and a guard stops a session once its holder dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.backends import processes
from support import ROOT, gone, wait_gone

# A case's kernel as the killer meets it: it starts a worker whose own child double-forks a
# grandchild (adopted by init once its parent exits); with "helper", also a helper that leaves for a
# session of its own. The grandchild and the helper ignore SIGTERM. Its pids go to the file, by role.
CASE = r"""
import json, os, signal, sys, time

def hold(ignore_term=False):
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
    os._exit(0)

def say(w, role):
    os.write(w, f"{role} {os.getpid()}\n".encode())
    os.close(w)  # the leader reads to the end: only the leader may hold the write end open

r, w = os.pipe()
if os.fork() == 0:
    if os.fork() == 0:  # the worker's child, which exits once it has forked the grandchild
        if os.fork() == 0:
            say(w, "grandchild")
            hold(ignore_term=True)
        os.close(w)
        os._exit(0)
    say(w, "worker")
    hold()
if sys.argv[2:] == ["helper"] and os.fork() == 0:  # found only through its parent, the leader
    os.setsid()
    say(w, "helper")
    hold(ignore_term=True)
os.close(w)
pids = {"leader": os.getpid()}
with os.fdopen(r) as f:
    pids.update((role, int(pid)) for role, pid in (line.split() for line in f))
with open(sys.argv[1] + ".tmp", "w") as out:
    json.dump(pids, out)
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
hold()
"""

# A gate-like holder: it starts the case in a session of its own with a guard on it, then sleeps.
HOLDER = r"""
import subprocess, sys, time
from kit.backends import processes
case = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], "helper"], start_new_session=True)
guard = processes.guard(processes.identity(case.pid))  # held: its end of the pipe closes when this process dies
print("guarded" if guard else "no guard", flush=True)
time.sleep(600)
"""


@pytest.fixture
def busy():
    """Two processes burning a core each, beside the test: the stop must hold on a loaded machine."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for b in burners:
            b.kill()
            b.wait()


def pids_of(path: Path, proc: subprocess.Popen, within_s: float = 60.0) -> dict[str, int]:
    deadline = time.monotonic() + within_s
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the case never wrote its pids (exit code {proc.poll()})")
        time.sleep(0.05)
    return json.loads(path.read_text())


def start_case(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen, dict[str, int]]:
    pidfile = tmp_path / "case.pids"
    case = subprocess.Popen([sys.executable, "-c", CASE, str(pidfile), *flags], start_new_session=True)
    try:
        return case, pids_of(pidfile, case)
    except BaseException:
        processes.stop_tree(case.pid, grace_s=0)
        raise


def kill_left(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.timeout(180)
def test_a_session_whose_leader_died_first_is_stopped_whole_under_load(tmp_path, busy):
    case, pids = start_case(tmp_path)
    leader = processes.identity(case.pid)
    try:
        assert set(pids) == {"leader", "worker", "grandchild"}
        assert os.getsid(pids["grandchild"]) == case.pid
        # The kernel dies first, as when its holder is lost: its worker is re-parented and drops out of
        # any tree rooted at the kernel; only the session still names it.
        os.kill(case.pid, signal.SIGKILL)
        case.wait()
        assert processes.descendants(case.pid) == []
        assert processes.stop_tree(leader, grace_s=0.5) == []
        assert gone(pids.values()), "the stop returned while a process of the case was alive"
        assert processes.members(case.pid) == []
    finally:
        kill_left(pids.values())


@pytest.mark.timeout(180)
def test_a_live_tree_is_stopped_with_sigterm_then_sigkill_and_waited_for(tmp_path, busy):
    case, pids = start_case(tmp_path, "helper")
    try:
        assert os.getsid(pids["helper"]) == pids["helper"], "the helper left the case's session"
        assert processes.stop_tree(case.pid, grace_s=1.0) == []
        assert gone(pids.values()), "the helper that left for its own session was found through its parent"
        assert case.wait(timeout=10) == -signal.SIGTERM, "the leader got SIGTERM first"
    finally:
        kill_left(pids.values())


def test_a_group_inside_a_session_is_stopped_alone(tmp_path):
    """An engine server in its own process group in the kernel's session: closing it leaves the kernel."""
    kernel = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from kit.backends.processes import own_group\n"
        "server = subprocess.Popen(['sleep', '600'], **own_group())\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(600)")], stdout=subprocess.PIPE, text=True, start_new_session=True, cwd=ROOT)
    try:
        server = int(kernel.stdout.readline())
        assert os.getpgid(server) == server and os.getsid(server) == kernel.pid
        assert processes.stop_tree(server, grace_s=5) == []
        assert gone([server])
        assert kernel.poll() is None, "stopping the server's group must leave the kernel"
        assert processes.members(kernel.pid) == [kernel.pid]
    finally:
        processes.stop_tree(kernel.pid, grace_s=0)
        kernel.wait()
    assert processes.members(kernel.pid) == []


def test_a_pid_given_to_another_process_is_left_alone():
    other = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        now = processes.identity(other.pid)
        assert processes.stop_tree(processes.Identity(other.pid, now.start - 1), grace_s=0) == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("children_killed_too", [False, True], ids=["holder", "holder-and-its-children"])
def test_a_guard_stops_the_session_once_its_holder_is_killed(tmp_path, busy, children_killed_too):
    """A lost Ray worker, a gate killed with SIGKILL: nothing in the holder runs, its guard does. Ray also
    kills a dead worker's children; the guard is none of them, so it survives that to do its work."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, CASE, str(tmp_path / "case.pids")], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    pids: dict[str, int] = {}
    try:
        assert holder.stdout.readline().strip() == "guarded"
        pids = pids_of(tmp_path / "case.pids", holder)
        assert set(pids) == {"leader", "worker", "grandchild", "helper"}
        children = [p.pid for p in processes.descendants(holder.pid)
                    if processes._read_stat(p.pid) and processes._read_stat(p.pid).ppid == holder.pid]
        assert pids["leader"] in children
        holder.kill()
        if children_killed_too:  # at once, as the runtime does: the case's leader among them
            for pid in children:
                os.kill(pid, signal.SIGKILL)
        holder.wait()
        # The guard acts on its own, in its own time: wait for the session to empty, within a bound. A process
        # that left the session is found only through its parent, the leader; with the leader killed by someone
        # else first, nothing can find it (an engine server stays in the kernel's session for this reason).
        lost = {"leader", "helper"} if children_killed_too else set()
        assert wait_gone([p for role, p in pids.items() if role not in lost], within_s=60) == []
    finally:
        holder.kill()
        holder.wait()
        kill_left(pids.values())


def test_a_released_guard_is_gone_when_release_returns():
    case = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        guard = processes.guard(processes.identity(case.pid))
        assert guard is not None
        me = os.getpid()
        children = {p.pid for p in processes.descendants(me) if processes._read_stat(p.pid).ppid == me}
        assert children == {case.pid}  # the guard is no child of ours
        guard.release()
        assert case.wait(timeout=30) == -signal.SIGKILL  # the guard stopped the session, then exited
        assert [p for p in processes.members(case.pid)] == []
    finally:
        case.kill()
        case.wait()


def test_identity_and_descendants_read_this_machine():
    me = processes.identity(os.getpid())
    assert me is not None and me.pid == os.getpid()
    assert processes.identity(os.getpid()) == me, "the same process reads the same start"
    child = subprocess.Popen(["sleep", "60"])
    try:
        assert child.pid in [p.pid for p in processes.descendants(os.getpid())]
    finally:
        child.kill()
        child.wait()
