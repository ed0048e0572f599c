"""A warm kernel: one process that imports what a case's kernel imports, once, and forks a kernel per case.

A case's kernel spends about ten seconds of CPU importing (ipykernel, scrapbook and pandas, then torch and
transformers for an hf case) for about one second of work (benchmarks/kernel_imports.py), and every case, in
every gate and every test, starts a fresh one. A forked child shares its parent's imported modules, so a kernel
forked from a process that has done those imports starts at once and still runs in a process of its own, as
the kit's timeouts, kills and guards need.

kit.run.warmkernels starts this script with the kernel's own interpreter and what kernels read of its environment
as they load (an allowlist, less the variables each case sets for itself and anything that looks like a secret:
each kernel gets its whole environment from its own request), detached in a session of its own, with a listening
Unix socket at the file descriptor its first argument names, bound at the path its second names. Its third is
how many seconds it may stay idle, its fourth how many seconds a client has to send its whole request; the rest
are the modules to import first. The process that detaches it returns only once this one holds its lock (below),
so whoever started it can tell it from a dead one at once.

It serves only its own: whoever reaches its socket can have a kernel run with its imports, in its context. The
folder it listens in is its user's alone, and on accept it checks the client's credentials as the kernel gives
them (``SO_PEERCRED``): the same user, and the same namespaces and control groups as its own, so a process of the
same user confined more narrowly (another network namespace, a container sharing the folder) gets nothing run
outside it; nor does one with fewer privileges than its own (fewer capabilities, no_new_privs, seccomp, a lower
resource limit), whose kernel would have more than its asker. It runs nothing but a kernel:
``ipykernel_launcher -f FILE``, found on its own path, never in the request's folder. Then, for each connection:

- it receives one message of 8 bytes (the length of what follows, big-endian) carrying three file descriptors
  (the kernel's stdin, stdout and stderr), then that many bytes of JSON: ``module``, ``args``, ``env`` and
  ``cwd``. Descriptors that come before the header is whole are closed at once and the connection refused; the
  buffer that held the request is zeroed once it is read; it waits with poll(2), which has no limit of 1023.
  Every connection is read as its bytes come, beside the others: a client that sends nothing (or half a
  request) holds no one up, and is dropped once it has had its seconds;
- a request whose client has gone by the time it is read whole is dropped unserved: its asker (a gate that gave
  up waiting) will never see the kernel, which would run on with its environment;
- it forks. The child becomes what ``python -m module *args`` would have started: a session of its own (as
  jupyter_client starts a kernel), the three descriptors as its standard streams, ``cwd`` and ``env``, and
  ``module`` run as ``__main__``. It leaves this module's loop before it does, so it ends as any Python
  program ends (its exit handlers, its threads);
- it answers ``pid N`` at once, ``refused REASON`` for a request it will not serve, and ``exit C`` when that
  child has ended (C as ``subprocess`` gives it: the exit status, or minus the signal that ended it). When the
  asker's connection closes while its kernel runs, the kernel's process group is killed: a cold kernel ends when
  the process that started it goes (ipykernel watches its parent), and a forked one's parent is this process. And
  a kernel dies with this process (``die_with``), should it be killed.

It holds an exclusive ``flock`` on its lock file (``<digest>.lock``, which also names its pid, and says ``ready``
once its first imports are done, so an asker may give up on one that then does not answer) for its whole life,
and no child keeps it: the lock, not a pid in a file, is what says it is alive, and which pid holds it is read
from the kernel (kit.run.warmkernels.warm_holder) before any signal is sent. Once it has had no kernel and no request
for its idle time, or on SIGTERM (a starter making room for another key), it removes its socket's path, its lock
file and its log and takes no more connections; it exits once its last kernel has ended, never before: ipykernel
shuts a kernel down when its parent goes. It is single-threaded: a fork copies only the forking thread, so it
must hold no lock another thread could own.

Standard library only, and run as a script: it must start in any kernel's environment.
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import importlib
import importlib.util
import json
import os
import re
import select
import signal
import socket
import struct
import sys
import time
import types
from dataclasses import dataclass, field

HEADER = struct.Struct(">Q")
PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
STREAMS = 3  # stdin, stdout, stderr
MAX_REQUEST = 16 * 1024 * 1024
MAX_PENDING = 64  # connections still sending their request; beyond, the oldest is dropped
KERNEL_MODULE = "ipykernel_launcher"
NAMESPACES = ("net", "mnt", "pid", "user", "ipc", "uts", "cgroup")
PROC = "/proc"
PR_SET_PDEATHSIG = 1  # prctl(2)
# What confines a process beyond its namespaces and control groups, as /proc/PID/status shows it: the capabilities
# it has and may ever gain (hexadecimal sets), whether execve may grant more, and its seccomp mode.
CAPABILITY_SETS = ("CapEff", "CapBnd")
CONFINEMENT_FIELDS = (*CAPABILITY_SETS, "NoNewPrivs", "Seccomp")
READY = b" ready\n"  # written after the pid in the lock file once the first imports are done
_LIMIT_LINE = re.compile(r"^(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", re.MULTILINE)


def main(argv: list[str]) -> int:
    """The warm process: detach where asked, hold its lock, import the modules named, then serve forks until
    idle; returns its exit code."""
    ready = None
    if argv and argv[0] == "--detach":  # started through a short-lived first process, so that init adopts it
        ready = detach()
        argv = argv[1:]
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # this script's folder holds kit's own modules: they must not shadow top-level names
    # ipykernel reads its parent's pid when it is imported: this process is the parent of every kernel it forks.
    os.environ["JPY_PARENT_PID"] = str(os.getpid())
    listener = socket.socket(fileno=int(argv[0]))
    address, idle_s, request_s = argv[1], float(argv[2]), float(argv[3])
    lock = hold_lock(sibling(address, ".lock"))
    if ready is not None:
        if lock is not None:
            os.write(ready, b"1")  # the lock is held: the starter may return
        os.close(ready)
    if lock is None:
        return 1
    # What a client is compared with is this process as it was started, before its imports: a library that raises
    # its own limits when it loads (open files) does the same in a cold kernel.
    own = own_context()
    for name in argv[4:]:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a kernel that needs it will say so itself, as a cold one would
            print(f"warm kernel: {name} not imported first: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # Its imports are done: from now on it answers at once, so an asker may give up on it within seconds.
    os.pwrite(lock, f"{os.getpid()}".encode() + READY, 0)
    request = Server(listener, address, idle_s, request_s, lock, own).serve()
    if request is None:
        return 0
    return become_kernel(request)


def detach() -> int:
    """Fork; the first process exits once the second holds its lock (1 when it died first), so that its starter's
    wait returns only when the warm process can be told alive. Returns, in the second, where to say so."""
    r, w = os.pipe()
    if os.fork():
        os.close(w)
        os._exit(0 if os.read(r, 1) else 1)
    os.close(r)
    return w


def hold_lock(path: str) -> int | None:
    """Open and lock exclusively this process's lock file, its pid written in it; None (and one line) when another
    process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        print(f"warm kernel: {path} is held by another process ({exc.strerror})", file=sys.stderr)
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def sibling(address: str, suffix: str) -> str:
    """A file beside the socket with another suffix (its lock, its log)."""
    return os.path.splitext(address)[0] + suffix


@dataclass
class Pending:
    """A connection still sending its request."""

    conn: socket.socket
    deadline: float
    head: bytes = b""
    fds: list[int] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)  # allocated whole once the header gives its size
    got: int = 0  # bytes of the body read so far
    size: int | None = None

    def clear(self) -> None:
        """Zero the buffer that held the request (its environment: a kernel's secrets), as far as Python allows:
        the strings decoded from it are freed, not wiped."""
        self.body[:] = bytes(len(self.body))

    def drop(self) -> None:
        """Close the connection and any file descriptors it passed: its request will not be served."""
        self.clear()
        close_all(self.fds)
        self.fds = []
        self.conn.close()


class Server:
    """The loop: accept, read every request as it comes, fork, answer, reap."""

    def __init__(self, listener: socket.socket, address: str, idle_s: float, request_s: float, lock: int,
                 own: dict):
        self.listener, self.address, self.idle_s, self.request_s, self.lock = listener, address, idle_s, request_s, lock
        self.own = own
        self.pending: dict[int, Pending] = {}
        self.children: dict[int, socket.socket | None] = {}  # pid -> its asker's connection (None once gone)
        self.ours: int | None = None  # the socket's inode: its path is removed only while it is still this one
        try:
            self.ours = os.stat(address).st_ino
        except OSError:
            pass

    def serve(self) -> dict | None:
        """Fork a child per request until idle for ``idle_s`` and its last child has ended. Returns the request in
        a child, None in this process when it is done."""
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup descriptor hears of it
        asked_to_leave: list[bool] = []
        signal.signal(signal.SIGTERM, lambda *_: asked_to_leave.append(True))
        self.listener.setblocking(False)
        accepting, last = True, time.monotonic()
        while accepting or self.children:
            ready = self.wait(wake_r, accepting)
            if (self.children or self.pending or self.listener in ready) and not asked_to_leave:
                last = time.monotonic()
            elif accepting and (asked_to_leave or time.monotonic() - last > self.idle_s):
                accepting = False
                self.withdraw()
            drain(wake_r)
            self.reap()
            self.watch_askers(ready)
            if not accepting:
                continue
            if self.listener in ready:
                self.accept()
            request = self.read(ready)
            if request is not None:  # the child
                signal.set_wakeup_fd(-1)
                for sig in (signal.SIGCHLD, signal.SIGTERM):
                    signal.signal(sig, signal.SIG_DFL)
                for fd in (wake_r, wake_w):
                    os.close(fd)
                return request
        return None

    def wait(self, wake_r: int, accepting: bool) -> list:
        """Wait, at most a second or until the soonest pending request's deadline, for the wake-up pipe, a
        child's connection, or (accepting) a new connection or request bytes; returns what is ready."""
        watched: list = [wake_r, *(c for c in self.children.values() if c is not None)]
        if accepting:
            watched += [self.listener, *(p.conn for p in self.pending.values())]
        soonest = min((p.deadline for p in self.pending.values()), default=time.monotonic() + 1.0)
        # poll(2), not select(2): select fails outright on a descriptor numbered past 1023.
        poller, by_fd = select.poll(), {}
        for w in watched:
            fd = w if isinstance(w, int) else w.fileno()
            by_fd[fd] = w
            poller.register(fd, select.POLLIN)
        try:
            events = poller.poll(max(0.0, min(1.0, soonest - time.monotonic())) * 1000)
        except InterruptedError:
            return []
        return [by_fd[fd] for fd, _ in events if fd in by_fd]

    def withdraw(self) -> None:
        """Take no more connections, and remove the socket's path, the lock file and the log, unless another warm
        process has bound the socket since (then the files are its)."""
        for p in self.pending.values():
            p.drop()
        self.pending.clear()
        self.listener.close()
        try:
            if os.stat(self.address).st_ino != self.ours:
                return
        except OSError:
            return
        lock_path = sibling(self.address, ".lock")
        try:
            mine = os.stat(lock_path).st_ino == os.fstat(self.lock).st_ino
        except OSError:
            mine = False
        for path in (self.address, *([lock_path] if mine else []), sibling(self.address, ".log")):
            try:
                os.unlink(path)
            except OSError:
                pass

    def accept(self) -> None:
        """Accept every waiting connection, refusing in a line any whose peer is not this user in this
        process's namespaces and control groups; the oldest pending one is dropped when too many wait."""
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                say(f"a connection could not be accepted: {exc}")
                return
            conn.setblocking(False)
            problem = peer_problem(conn, self.own)
            if problem is not None:
                say(f"a connection refused: {problem}")
                answer(conn, f"refused {problem}")
                conn.close()
                continue
            if len(self.pending) >= MAX_PENDING:
                oldest = min(self.pending, key=lambda fd: self.pending[fd].deadline)
                self.pending.pop(oldest).drop()
            self.pending[conn.fileno()] = Pending(conn, time.monotonic() + self.request_s)

    def read(self, ready: list) -> dict | None:
        """Read what has come on each pending connection, serve each request read whole, drop those whose time is
        out. Returns the request in a forked child."""
        now = time.monotonic()
        for fd, p in list(self.pending.items()):
            try:
                request = receive(p) if p.conn in ready else None
            except EOFError:  # the client closed its connection first
                self.pending.pop(fd).drop()
                continue
            except (OSError, ValueError) as exc:
                say(f"a request could not be read: {exc}")
                answer(p.conn, f"refused {exc}")
                self.pending.pop(fd).drop()
                continue
            if request is None:
                if now > p.deadline:
                    say(f"a connection sent no whole request in {self.request_s:g} s; dropped")
                    self.pending.pop(fd).drop()
                continue
            del self.pending[fd]
            forked = self.fork(p, request)
            if forked is not None:
                return forked
        return None

    def fork(self, p: Pending, request: dict) -> dict | None:
        """Fork a kernel for a request read whole, unless it is malformed or its client has gone; the child
        returns the request, the parent answers the client with the kernel's pid."""
        problem = request_problem(request) or gone(p.conn)
        if problem is not None:
            say(f"a request not served: {problem}")
            answer(p.conn, f"refused {problem}")
            p.drop()
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with(parent)
            self.leave_to_child(p)
            request["fds"] = p.fds
            return request
        for fd in p.fds:
            os.close(fd)
        if answer(p.conn, f"pid {pid}"):
            self.children[pid] = p.conn
        else:  # gone between the check and the answer: nobody will ever see this kernel
            kill_group(pid)
            p.conn.close()
            self.children[pid] = None
        return None

    def leave_to_child(self, p: Pending) -> None:
        """In a forked child: close what belongs to the warm process (its lock above all, or the lock would live on
        in the kernel)."""
        os.close(self.lock)
        self.listener.close()
        p.conn.close()
        for other in self.pending.values():
            other.clear()
            other.conn.close()
            close_all(other.fds)
        for conn in self.children.values():
            if conn is not None:
                conn.close()

    def watch_askers(self, ready: list) -> None:
        """A kernel whose asker's connection closed is killed: nobody will wait for it or stop it."""
        for pid, conn in list(self.children.items()):
            if conn is None or conn not in ready:
                continue
            try:
                if conn.recv(4096):
                    continue  # nothing is expected after a request; ignored
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                pass
            kill_group(pid)
            conn.close()
            self.children[pid] = None

    def reap(self) -> None:
        """Collect every ended kernel and tell its client its exit code."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self.children:
                continue
            conn = self.children.pop(pid)
            if conn is not None:
                answer(conn, f"exit {os.waitstatus_to_exitcode(status)}")
                conn.close()


def drain(fd: int) -> None:
    """Read a non-blocking pipe empty: the wake-up pipe is only a signal that something happened."""
    while True:
        try:
            if not os.read(fd, 4096):
                return
        except (BlockingIOError, InterruptedError):
            return


def say(line: str) -> None:
    """A line on the warm process's log (its stderr), prefixed so a reader knows whose it is."""
    print(f"warm kernel: {line}", file=sys.stderr, flush=True)


def answer(conn: socket.socket, line: str) -> bool:
    """Send one line without ever waiting on the client; False when it is gone."""
    try:
        conn.send(f"{line}\n".encode(), socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        return True
    except OSError:
        return False


def die_with(parent: int) -> None:
    """In a forked child: be killed when this warm process dies (PR_SET_PDEATHSIG). A cold kernel ends when the
    process that started it goes, and ipykernel's own watch of its parent sees only a parent that becomes init:
    under a subreaper, a kernel whose warm process was killed (the out-of-memory killer) would run on, holding its
    memory and devices, long after its asker recorded it dead."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: ipykernel's own watch stays
        return
    if os.getppid() != parent:  # it died between the fork and the prctl
        os._exit(1)


def kill_group(pid: int) -> None:
    """Kill a child of this process and its process group (its session, once it has made one). The pid is proven:
    a child not yet reaped keeps it."""
    for send in (os.killpg, os.kill):
        try:
            send(pid, signal.SIGKILL)
        except OSError:
            pass


def own_context() -> dict:
    """What a client must share with this process: its user, namespaces and control groups, and no narrower
    confinement than its own."""
    return {"uid": os.getuid(), **proc_context("self")}


def proc_context(pid: str, proc: str = PROC) -> dict:
    """A process's namespaces, control groups and confinement, as /proc shows them; OSError where they cannot be
    read."""
    with open(os.path.join(proc, pid, "cgroup")) as f:
        cgroup = f.read()
    return {"ns": {n: os.readlink(os.path.join(proc, pid, "ns", n)) for n in NAMESPACES
                   if os.path.lexists(os.path.join(proc, "self", "ns", n))},
            "cgroup": cgroup, **confinement(pid, proc)}


def confinement(pid: str, proc: str = PROC) -> dict:
    """What confines a process: its capability sets, no_new_privs and seccomp mode (/proc/PID/status, as integers)
    and its resource limits (/proc/PID/limits: the soft and hard limit by name, None for unlimited). A forked
    kernel has its warm process's, not its asker's. OSError where they cannot be read."""
    with open(os.path.join(proc, pid, "status")) as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    with open(os.path.join(proc, pid, "limits")) as f:
        limits = {name.strip(): [None if v == "unlimited" else int(v) for v in (soft, hard)]
                  for name, soft, hard in _LIMIT_LINE.findall(f.read())}
    fields = {}
    for name in CONFINEMENT_FIELDS:
        value = status.get(name, "0").strip()
        fields[name] = int(value, 16) if name in CAPABILITY_SETS else int(value or 0)
    return {"status": fields, "limits": limits}


def peer_problem(conn: socket.socket, own: dict, proc: str = PROC) -> str | None:
    """Why the process at the other end of ``conn`` may not be served (None when it may): another user, another
    namespace or control group than this process's, or a narrower confinement."""
    pid, uid, _ = PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size))
    return credentials_problem(pid, uid, own, proc)


def credentials_problem(pid: int, uid: int, own: dict, proc: str = PROC) -> str | None:
    """``peer_problem`` for a client's pid and uid as the kernel gave them."""
    if uid != own["uid"]:
        return f"a client of uid {uid}, not {own['uid']}"
    if pid <= 0:
        return "a client outside this process's pid namespace"
    try:
        theirs = proc_context(str(pid), proc)
    except (OSError, ValueError) as exc:
        return f"client {pid} cannot be read ({getattr(exc, 'strerror', None) or exc})"
    other = [n for n, link in own["ns"].items() if theirs["ns"].get(n) != link]
    if other:
        return f"client {pid} is in another {', '.join(other)} namespace"
    if theirs["cgroup"] != own["cgroup"]:
        return f"client {pid} is in another control group"
    narrower = confinement_problem(theirs, own)
    return f"client {pid} {narrower}" if narrower else None


def confinement_problem(theirs: dict, own: dict) -> str | None:
    """How a client is confined more narrowly than this process (None when it is not): a kernel forked here would
    have what its asker lacks. A client confined less narrowly is served: its kernel has this process's
    confinement, as the warm key (kit.run.warmkernels.context) makes it its own."""
    mine, its = own["status"], theirs["status"]
    for name in CAPABILITY_SETS:
        lacking = mine[name] & ~its[name]
        if lacking:
            return f"lacks capabilities this process has ({name} {lacking:#x})"
    if its["NoNewPrivs"] and not mine["NoNewPrivs"]:
        return "runs with no_new_privs, this process without"
    if its["Seccomp"] > mine["Seccomp"]:
        return f"runs under seccomp mode {its['Seccomp']}, this process under {mine['Seccomp']}"
    for name, limit in own["limits"].items():
        their_limit = theirs["limits"].get(name, limit)
        if any(lower(t, m) for t, m in zip(their_limit, limit)):
            return (f"has a lower limit of {name[4:].lower()} ({limit_text(their_limit)}, this process "
                    f"{limit_text(limit)})")
    return None


def limit_text(limit: list) -> str:
    """A soft and hard limit as ``soft/hard``."""
    return "/".join("unlimited" if v is None else str(v) for v in limit)


def lower(theirs: int | None, mine: int | None) -> bool:
    """Whether a client's resource limit is below this process's (None: unlimited)."""
    return theirs is not None and (mine is None or theirs < mine)


def receive(p: Pending) -> dict | None:
    """Read what has come of ``p``'s request: the request once whole, None while some is still to come. Raises
    EOFError when the client closed first, ValueError for what is no request.

    Descriptors are taken only with the read that makes the header whole, and only the three a request needs:
    any that come with a part of a header are closed at once and the connection refused (a client sending its
    header a byte at a time, descriptors with each, once pushed this process past 1023 open descriptors). The
    kernel itself drops any sent beyond three, or with the body, which is read without room for them."""
    try:
        if p.size is None:
            head, fds, flags, _ = socket.recv_fds(p.conn, HEADER.size - len(p.head), STREAMS)
            p.head += head
            if not head or len(p.head) < HEADER.size or flags & socket.MSG_CTRUNC or len(fds) != STREAMS:
                close_all(fds)
            if not head:
                raise EOFError()
            if fds and len(p.head) < HEADER.size:
                raise ValueError("descriptors before a whole header")
            if flags & socket.MSG_CTRUNC:
                raise ValueError(f"more than {STREAMS} descriptors")
            if len(p.head) < HEADER.size:
                return None
            if len(fds) != STREAMS:
                raise ValueError(f"{len(fds)} descriptors, not {STREAMS}")
            p.fds = fds
            (size,) = HEADER.unpack(p.head)
            if size > MAX_REQUEST:
                raise ValueError(f"a request of {size} bytes")
            p.size, p.body = size, bytearray(size)
        view = memoryview(p.body)
        while p.got < p.size:
            n = p.conn.recv_into(view[p.got:], min(p.size - p.got, 1 << 16))
            if not n:
                raise EOFError()
            p.got += n
    except (BlockingIOError, InterruptedError):
        return None
    except (ConnectionResetError, BrokenPipeError):
        raise EOFError() from None
    try:
        request = json.loads(p.body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"a request that is not JSON ({type(exc).__name__})") from None
    finally:
        p.clear()
    if not isinstance(request, dict):
        raise ValueError("a request that is not a JSON object")
    return request


def close_all(fds: list[int]) -> None:
    """Close descriptors received but not taken."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def request_problem(request: dict) -> str | None:
    """Why a request is not one this process serves: it runs a kernel (``ipykernel_launcher -f FILE``), in an
    absolute folder, with an environment of strings; nothing else."""
    module, args, env, cwd = (request.get(k) for k in ("module", "args", "env", "cwd"))
    if module != KERNEL_MODULE:
        return f"module {str(module)[:80]!r}: only {KERNEL_MODULE} is run"
    if not (isinstance(args, list) and len(args) == 2 and args[0] == "-f" and isinstance(args[1], str)
            and args[1] and "\0" not in args[1]):
        return f"arguments {str(args)[:120]!r}: only -f FILE"
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) and k and "=" not in k
                                          and "\0" not in k + v for k, v in env.items())):
        return "an environment that is not names and values without NUL"
    if not (isinstance(cwd, str) and os.path.isabs(cwd) and "\0" not in cwd):
        return f"folder {str(cwd)[:120]!r}: not an absolute path"
    return None


def gone(conn: socket.socket) -> str | None:
    """Why the client of a request read whole will not see its kernel: it closed its connection (or sent more
    than its request). None while it waits for the answer."""
    try:
        extra = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError as exc:
        return f"its client has gone ({errno.errorcode.get(exc.errno or 0, exc)})"
    return "its client has gone" if not extra else "bytes after the request"


def become_kernel(request: dict) -> int:
    """In the child: what ``python -m module *args`` would have been, with the request's streams, folder and
    environment, save one thing: the module is found where this warm process finds it (its interpreter, its
    ``sys.path``), before the child enters the request's folder. ``-m`` looks in the current folder first, and a
    request's folder is any the asker names: one holding a planted ``ipykernel_launcher.py`` would have it run."""
    os.setsid()
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
    spec = importlib.util.find_spec(request["module"])
    if spec is None or spec.loader is None or spec.origin is None:
        raise ModuleNotFoundError(f"No module named {request['module']}")
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path.insert(0, os.getcwd())  # what -m puts first, once the module is found: the kernel's own imports see it
    run_as_main(spec, request["args"])
    return 0


def run_as_main(spec, args: list[str]) -> None:
    """Run the module ``spec`` found as ``__main__``, as ``python -m`` does (runpy's own entry resolves the name
    again, on the path as it is then)."""
    code = spec.loader.get_code(spec.name)
    main = types.ModuleType("__main__")
    main.__dict__.update(__spec__=spec, __file__=spec.origin, __cached__=spec.cached, __loader__=spec.loader,
                         __package__=spec.parent, __builtins__=builtins)
    sys.modules["__main__"] = main
    sys.argv = [spec.origin, *args]
    exec(code, main.__dict__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
