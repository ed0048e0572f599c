"""A warm kernel: one process that imports what a case's kernel imports, once, and forks a kernel per case.

A case's kernel spends about ten seconds of CPU importing (ipykernel, scrapbook and pandas, then torch and
transformers for an hf case) for about one second of work (benchmarks/kernel_imports.py), and every case, in
every gate and every test, starts a fresh one. A forked child shares its parent's imported modules, so a kernel
forked from a process that has done those imports starts at once and still runs in a process of its own, as
the kit's timeouts, kills and guards need.

kit.run.warmkernels starts this script with the kernel's own interpreter and environment (less the variables
each case sets for itself, which are read only when a case runs), detached in a session of its own, with a
listening Unix socket at the file descriptor its first argument names, bound at the path its second names. Its
third is how many seconds it may stay idle; the rest are the modules to import first. Then, for each
connection:

- it receives one message of 8 bytes (the length of what follows, big-endian) carrying three file descriptors
  (the kernel's stdin, stdout and stderr), then that many bytes of JSON: ``module``, ``args``, ``env`` and
  ``cwd``;
- it forks. The child becomes what ``python -m module *args`` would have started: a session of its own (as
  jupyter_client starts a kernel), the three descriptors as its standard streams, ``cwd`` and ``env``, and
  ``module`` run as ``__main__``. It leaves this module's loop before it does, so it ends as any Python
  program ends (its exit handlers, its threads);
- it answers ``pid N`` at once, and ``exit C`` when that child has ended (C as ``subprocess`` gives it: the
  exit status, or minus the signal that ended it).

Any process of the same user, context and key may ask it (every gate, every test), so what it imported is paid
once for them all. Once it has had no kernel and no request for its idle time, or on SIGTERM (a starter making
room for another key), it removes its socket's path and takes no more connections; it exits once its last kernel
has ended, never before: ipykernel shuts a kernel down when its parent goes. It is single-threaded: a fork
copies only the forking thread, so it must hold no lock another thread could own.

Standard library only, and run as a script: it must start in any kernel's environment.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import select
import signal
import socket
import struct
import sys
import time

HEADER = struct.Struct(">Q")
STREAMS = 3  # stdin, stdout, stderr
MAX_REQUEST = 16 * 1024 * 1024


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--detach":  # started through a short-lived first process, so that init adopts it
        if os.fork():
            os._exit(0)
        argv = argv[1:]
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # this script's folder holds kit's own modules: they must not shadow top-level names
    # ipykernel reads its parent's pid when it is imported: this process is the parent of every kernel it forks.
    os.environ["JPY_PARENT_PID"] = str(os.getpid())
    listener = socket.socket(fileno=int(argv[0]))
    address, idle_s = argv[1], float(argv[2])
    with open(sibling(address, ".pid"), "w") as pid_file:  # how its starters count the warm processes alive
        pid_file.write(f"{os.getpid()}\n")
    for name in argv[3:]:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a kernel that needs it will say so itself, as a cold one would
            print(f"warm kernel: {name} not imported first: {type(exc).__name__}: {exc}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    request = serve(listener, address, idle_s)
    if request is None:
        return 0
    return become_kernel(request)


def serve(listener: socket.socket, address: str, idle_s: float) -> dict | None:
    """Fork a child per request until it has been idle for ``idle_s`` and its last child has ended. Returns the
    request in a child, None in this process when it is done."""
    try:
        ours = os.stat(address).st_ino
    except OSError:
        ours = None
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup descriptor hears of it
    asked_to_leave = []
    signal.signal(signal.SIGTERM, lambda *_: asked_to_leave.append(True))
    children: dict[int, socket.socket] = {}
    accepting, last = True, time.monotonic()
    while accepting or children:
        watched = [wake_r] + ([listener] if accepting else [])
        try:
            ready = select.select(watched, [], [], 1.0)[0]
        except InterruptedError:
            ready = []
        if (children or listener in ready) and not asked_to_leave:
            last = time.monotonic()
        elif accepting and (asked_to_leave or time.monotonic() - last > idle_s):
            accepting = False
            withdraw(address, ours)
            listener.close()
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 4096):
                        break
                except BlockingIOError:
                    break
        reap(children)
        if accepting and listener in ready:
            forked = accept(listener, children)
            if forked is not None:  # the child
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                for fd in (wake_r, wake_w):
                    os.close(fd)
                listener.close()
                for conn in children.values():
                    conn.close()
                return forked
    return None


def sibling(address: str, suffix: str) -> str:
    return os.path.splitext(address)[0] + suffix


def withdraw(address: str, ours: int | None) -> None:
    """Remove the socket's path and its pid file and log, unless another warm process has bound it since."""
    try:
        if os.stat(address).st_ino != ours:
            return
    except OSError:
        return
    for path in (address, sibling(address, ".pid"), sibling(address, ".log")):
        try:
            os.unlink(path)
        except OSError:
            pass


def accept(listener: socket.socket, children: dict[int, socket.socket]) -> dict | None:
    try:
        conn, _ = listener.accept()
    except OSError:
        return None
    try:
        request, fds = receive(conn)
    except (OSError, ValueError) as exc:
        print(f"warm kernel: a request could not be read: {exc}", file=sys.stderr)
        conn.close()
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        conn.close()
        request["fds"] = fds
        return request
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(f"pid {pid}\n".encode())
    except OSError:
        pass  # the asker is gone; the child is still reaped, and the asker's kill reaches it by its session
    children[pid] = conn
    return None


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, HEADER.size, STREAMS)
    if len(head) != HEADER.size or len(fds) != STREAMS:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"{len(head)} header bytes and {len(fds)} descriptors, not {HEADER.size} and {STREAMS}")
    (size,) = HEADER.unpack(head)
    if size > MAX_REQUEST:
        raise ValueError(f"a request of {size} bytes")
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 16))
        if not chunk:
            raise ValueError("the request ended early")
        chunks.append(chunk)
        left -= len(chunk)
    return json.loads(b"".join(chunks)), fds


def reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        try:
            conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass
        conn.close()


def become_kernel(request: dict) -> int:
    """In the child: what ``python -m module *args`` would have been, with the request's streams, folder and
    environment."""
    os.setsid()
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [sys.executable, *request["args"]]
    sys.path.insert(0, os.getcwd())  # what -m puts first
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
