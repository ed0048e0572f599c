"""Kernels forked from a warm process instead of started cold (kit/run/zygote.py says how and why).

A kernel is forked only where that gives the very kernel a cold start would:

- the command is the plain ``python [-X option ...] -m ipykernel_launcher -f CONNECTION`` of a kernel spec that
  sets no environment of its own beyond the kit's variables (a spec that does, such as a stand-in for another
  release, starts cold);
- the warm process runs the same interpreter with the same options and the same first imports, in the same
  environment: compared whole, less the variables named in ``PER_CASE``, which each case sets for itself and
  which are read only when a case runs. Whatever a library reads once, when it loads (the kernels an hf case
  pins, the threads of OpenMP, the visible GPUs, the temporary folder), makes two warm processes different;
- and in the same context (``context``): the same user, namespaces, control groups, CPUs, limits and umask, and
  the same source of the kit's own modules, which it imported when it started.

Anything else starts cold, and so does a kernel whose warm process failed (with a warning saying so, once).

A warm process serves every process of its user that asks with the same key: a gate's cases, and the gates
that one test run starts one after another. Its socket lives in a folder only its user may enter, named by
the key's digest; the first process to miss it starts it, under a lock, and it exits after ``IDLE_S`` unused.
At most ``MAX_WARM`` run at once for a user: a new key asks the least recently used one to leave (it takes no
more requests and exits once its kernels have ended).
``PARITY_KIT_WARM_KERNELS=0`` turns forking off.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Mapping, Sequence

from kit.core.jsonio import read_umask
from kit.core.contract import LOG_PREFIX_ENV, MODEL_DIGEST_CACHE_ENV, RESULT_PATH_ENV

log = logging.getLogger(__name__)

ENABLED_ENV = "PARITY_KIT_WARM_KERNELS"  # "0" starts every kernel cold
ZYGOTE = Path(__file__).with_name("zygote.py")
LAUNCHER = "ipykernel_launcher"
# What a kernel spec may set and still be forked: the kit's own variables (the Levanter kernel's path to the main
# interpreter), which the kit reads when a case runs. Anything else a spec sets may change what runs when an
# interpreter starts (a stand-in's PYTHONPATH runs its sitecustomize, which must run in each kernel, not once).
SPEC_ENV_PREFIX = "PARITY_KIT_"
# Set by the kit for each case and read by its code only while the case runs; jupyter_client's own per-kernel
# ones; and the kernel search path, which jupyter_core reads when asked, never when it loads.
PER_CASE = frozenset({LOG_PREFIX_ENV, MODEL_DIGEST_CACHE_ENV, RESULT_PATH_ENV, "JPY_PARENT_PID", "JPY_SESSION_NAME",
                      "JUPYTER_PATH"})
# pytest's, which it changes for every test (PYTEST_CURRENT_TEST) and which nothing a kernel imports reads.
PER_CASE_PREFIXES = ("PYTEST_",)
# What every kit notebook's first cell imports (scrapbook with papermill and pandas, the case's and the views'
# modules); a backend adds its own (BackendInfo.warm_imports). Not ipykernel: the zygote's docstring says why.
COMMON_IMPORTS = ("scrapbook", "kit.case.runner", "kit.views.summary", "kit.views.plots")
IDLE_S = 90.0  # a warm process unused this long exits
MAX_WARM = 4  # warm processes at once per user (each holds what it imported: about half a GiB with torch)
ANSWER_TIMEOUT_S = 300.0  # a warm process's first answer waits for its imports (tens of seconds on a loaded host)
SOCKET_PATH_MAX = 107  # bytes of an AF_UNIX socket's path on Linux, less its terminating NUL
DIGEST_CHARS = 24
NAMESPACES = ("net", "mnt", "pid", "user", "ipc", "uts", "cgroup")
_disabled = False


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    value = (os.environ if environ is None else environ).get(ENABLED_ENV, "1")
    return not _disabled and value.lower() not in ("0", "off", "false", "no")


def disable() -> None:
    """Start every kernel of this process cold (a Ray worker's kernels stay in its process tree, where Ray's
    cleanup and the run's reap find them)."""
    global _disabled
    _disabled = True


def interpreter(cmd: Sequence[str], spec_env: Mapping[str, str] | None) -> tuple[str, ...] | None:
    """The interpreter and its options, where ``cmd`` (formatted) is the plain ipykernel launch of a spec that
    sets no environment beyond the kit's own variables; None for any other command."""
    if any(not name.startswith(SPEC_ENV_PREFIX) for name in spec_env or {}) or "-m" not in cmd:
        return None
    at = list(cmd).index("-m")
    head, rest = tuple(cmd[:at]), list(cmd[at + 1:])
    plain = (len(head) >= 1 and os.path.isabs(head[0]) and all(o.startswith("-X") for o in head[1:])
             and len(rest) == 3 and rest[0] == LAUNCHER and rest[1] == "-f")
    return head if plain else None


def context() -> dict:
    """What a forked kernel inherits from its warm process rather than from the process that asked for it."""
    import resource

    def read(path: str) -> str:
        try:
            return Path(path).read_text() if not path.startswith("ns:") else os.readlink(f"/proc/self/ns/{path[3:]}")
        except OSError:
            return ""

    kit_root = Path(__file__).resolve().parents[1]
    sources = sorted((str(p.relative_to(kit_root)), p.stat().st_mtime_ns, p.stat().st_size)
                     for p in kit_root.rglob("*.py"))
    return {
        "uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
        "namespaces": [read(f"ns:{n}") for n in NAMESPACES], "cgroup": read("/proc/self/cgroup"),
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [],
        "limits": [resource.getrlimit(getattr(resource, r)) for r in dir(resource) if r.startswith("RLIMIT_")],
        "umask": read_umask(), "kit": hashlib.sha256(json.dumps(sources).encode()).hexdigest(),
    }


@dataclass(frozen=True)
class Key:
    python: tuple[str, ...]  # the interpreter and its options
    env: tuple[tuple[str, str], ...]
    imports: tuple[str, ...]
    context: str  # context(), as JSON

    @classmethod
    def of(cls, python: Sequence[str], env: Mapping[str, str], imports: Sequence[str]) -> "Key":
        shared = tuple(sorted((k, v) for k, v in env.items()
                              if k not in PER_CASE and not k.startswith(PER_CASE_PREFIXES)))
        return cls(tuple(python), shared, tuple(dict.fromkeys([*COMMON_IMPORTS, *imports])),
                   json.dumps(context(), sort_keys=True))

    @functools.cached_property
    def digest(self) -> str:
        """The warm process's name: its socket, pid and log files are named by it."""
        text = json.dumps([self.python, self.env, self.imports, self.context])
        return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


class ForkedKernel:
    """A forked kernel as ``subprocess.Popen`` shows a process, for jupyter_client's provisioner and the kit's
    handle: its pid, ``poll``, ``wait`` and signals. Its exit status comes from the warm process, its parent."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, conn: socket.socket, args: Sequence[str]):
        self.pid, self.args, self.returncode = pid, list(args), None
        self._conn, self._done = conn, threading.Event()
        threading.Thread(target=self._await_exit, name=f"forked-kernel-{pid}", daemon=True).start()

    def _await_exit(self) -> None:
        code = None
        try:
            with self._conn, self._conn.makefile("rb") as answers:
                for line in answers:
                    word, _, value = line.decode().partition(" ")
                    if word == "exit":
                        code = int(value)
                        break
        except (OSError, ValueError):
            pass
        if code is None:  # the warm process went first: its child's status went with it
            log.warning("the warm process that forked kernel %d ended before it; its exit status is unknown",
                        self.pid)
            code = 1
        self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def folder() -> Path:
    """Where this user's warm processes listen: a folder of the user's runtime directory, else of /tmp, that only
    the user may enter, since whoever reaches a socket there can run code as the user. Not of ``$TMPDIR``: a
    command given a temporary folder of its own (a test's) expects to find there only what it made, and the warm
    processes outlive it. A socket's path has at most 107 bytes: a runtime directory too deep for that is passed
    over too."""
    room = SOCKET_PATH_MAX - len("/parity-kit-warm-4294967295/") - DIGEST_CHARS - len(".sock")
    bases = [os.environ.get("XDG_RUNTIME_DIR"), "/tmp", tempfile.gettempdir()]
    base = next((b for b in bases if b and len(os.fsencode(b)) <= room and os.access(b, os.W_OK | os.X_OK)), "/tmp")
    path = Path(base) / f"parity-kit-warm-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    status = path.lstat()
    if status.st_uid != os.getuid() or status.st_mode & 0o077 or not path.is_dir() or path.is_symlink():
        raise OSError(f"{path} is not a folder of this user's alone")
    return path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def connect(key: Key) -> socket.socket:
    """A connection to the warm process of ``key``, started now when none listens; OSError saying why not."""
    where = folder()
    address = where / f"{key.digest}.sock"
    conn = _try_connect(address)
    if conn is not None:
        with contextlib.suppress(OSError):
            os.utime(address.with_suffix(".pid"))  # used now: the last to be asked to leave
        return conn
    with locked(where / "start.lock"):
        conn = _try_connect(address)
        if conn is not None:
            return conn
        running = sorted((p for p in alive(where) if p != address.with_suffix(".pid")), key=lambda p: p.stat().st_mtime)
        for pid_file in running[:max(0, len(running) - MAX_WARM + 1)]:
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)  # the least recently used leaves
        start(key, address)
    conn = _try_connect(address)
    if conn is None:
        raise OSError(f"the warm process just started does not listen at {address}")
    return conn


def alive(where: Path) -> list[Path]:
    """The pid files of the warm processes running now (a killed one's files are removed)."""
    found = []
    for pid_file in where.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text().strip()), 0)
        except (OSError, ValueError):
            for suffix in (".sock", ".pid", ".log"):
                with contextlib.suppress(OSError):
                    pid_file.with_suffix(suffix).unlink()
            continue
        found.append(pid_file)
    return found


def _try_connect(address: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(address))
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return None
    except OSError:
        conn.close()
        raise
    return conn


def start(key: Key, address: Path) -> None:
    """Start the warm process of ``key`` listening at ``address`` (a stale path there is replaced)."""
    with contextlib.suppress(FileNotFoundError):
        address.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(address))
        listener.listen(64)
        with open(address.with_suffix(".log"), "ab") as errors:
            starter = subprocess.Popen(
                [*key.python, str(ZYGOTE), "--detach", str(listener.fileno()), str(address), str(IDLE_S),
                 *key.imports], pass_fds=[listener.fileno()], env=dict(key.env), stdin=subprocess.DEVNULL,
                stdout=errors, stderr=errors, start_new_session=True, cwd=str(address.parent))
        starter.wait(timeout=60)  # it exits once the warm process is forked
    finally:
        listener.close()


def fork(key: Key, cmd: Sequence[str], env: Mapping[str, str], cwd: str, stdout: IO,
         stderr: IO) -> ForkedKernel:
    """A kernel forked by the warm process of ``key`` with ``cmd``'s module and arguments; OSError saying why not.
    A warm process that was just leaving is asked once more, started anew."""
    at = list(cmd).index("-m")
    payload = json.dumps({"module": cmd[at + 1], "args": list(cmd[at + 2:]), "env": dict(env), "cwd": cwd}).encode()
    for attempt in (1, 2):
        conn = connect(key)
        stdin = os.open(os.devnull, os.O_RDONLY)
        try:
            conn.settimeout(ANSWER_TIMEOUT_S)
            socket.send_fds(conn, [len(payload).to_bytes(8, "big")], [stdin, stdout.fileno(), stderr.fileno()])
            conn.sendall(payload)
            answer = _read_line(conn)
        except (ConnectionResetError, BrokenPipeError):
            answer = None
        except OSError:
            conn.close()
            raise
        finally:
            os.close(stdin)
        if answer is None:
            conn.close()
            if attempt == 2:
                raise OSError("the warm process closed the connection without an answer")
            continue
        word, _, value = answer.partition(" ")
        if word != "pid" or not value.strip().isdigit():
            conn.close()
            raise OSError(f"the warm process answered {answer!r}")
        conn.settimeout(None)
        return ForkedKernel(int(value), conn, cmd)
    raise AssertionError("unreachable")


def _read_line(conn: socket.socket) -> str | None:
    """One line of the warm process's answer; None when it closed the connection before a whole one."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            return None
        data += chunk
    return data.decode().strip()


_broken: set[str] = set()  # keys whose warm process failed in this process: their kernels start cold


def fork_kernel(cmd: Sequence[str], spec_env: Mapping[str, str] | None, env: Mapping[str, str], cwd: str | None,
                stdout: IO, stderr: IO, imports: Sequence[str] = ()) -> ForkedKernel | None:
    """The kernel ``cmd`` would start, forked from a warm process, or None where it must start cold."""
    python = interpreter(cmd, spec_env) if enabled(env) else None
    if python is None:
        return None
    key = Key.of(python, env, imports)
    if key.digest in _broken:
        return None
    env = {**env, "JPY_PARENT_PID": str(os.getpid())}  # as jupyter_client's launcher sets it
    try:
        return fork(key, cmd, env, cwd or os.getcwd(), stdout, stderr)
    except (OSError, subprocess.SubprocessError) as exc:
        _broken.add(key.digest)
        log.warning("a warm kernel process failed (%s: %s); kernels of %s start cold from now on",
                    type(exc).__name__, exc, Path(python[0]).name)
        return None
