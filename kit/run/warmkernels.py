"""Kernels forked from a warm process instead of started cold (kit/run/zygote.py says how and why).

A kernel is forked only where that gives the very kernel a cold start would:

- the command is the plain ``python [-X option ...] -m ipykernel_launcher -f CONNECTION`` of a kernel spec that
  sets no environment of its own beyond the kit's variables (a spec that does, such as a stand-in for another
  release, starts cold);
- the warm process runs the same interpreter with the same options and the same first imports, in the same
  environment: compared whole, less the variables named in ``PER_CASE``, which each case sets for itself and
  which are read only when a case runs. Whatever a library reads once, when it loads (the kernels an hf case
  pins, the threads of OpenMP, the visible GPUs, the temporary folder), makes two warm processes different;
- and in the same context (``context``): the same user, namespaces, control groups, CPUs, capabilities,
  no_new_privs, seccomp mode, limits and umask, and the same source of the kit's own modules, which it imported
  when it started.

Anything else starts cold, and so does a kernel whose warm process failed (with a warning saying so, once).

A warm process serves every process of its user that asks with the same key: a gate's cases, and the gates
that one test run starts one after another. Its socket lives in a folder only its user may enter (in a base
folder no other user can replace it in: the user's own, or one with the sticky bit), mode 0600, named by the
key's digest; the first process to miss it starts it, under a lock, and it exits after ``IDLE_S`` unused.
It is alive while it holds the ``flock`` of its lock file; a file nobody holds is a dead one's, whatever pid it
names, and is removed, never signalled. At most ``MAX_WARM`` run at once for a user: a new key asks the least
recently used one to leave (it takes no more requests and exits once its kernels have ended), by a signal sent
only to the pid the kernel shows holding that lock, and only when its command line shows a warm process of the
kit for that lock's socket. The warm process keeps of its starter's environment only what kernels read as they load
(``kept``: an allowlist, less names that look like secrets), so nothing else outlives the command that started it
in a process of its own; each kernel gets everything with its request's environment. Confinement (capabilities,
no_new_privs, seccomp, resource limits) is part of the key, and a warm process refuses a client confined more
narrowly than itself. An asker never waits on a stopped or wedged warm process: its connect gives up after
``CONNECT_TIMEOUT_S``, and its answer after ``READY_ANSWER_S`` once the warm process says its imports are done;
the kernel then starts cold. ``PARITY_KIT_WARM_KERNELS=0`` turns forking off.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Mapping, Sequence

from kit.core.records.jsonio import read_umask
from kit.core.records.contract import LOG_PREFIX_ENV, MODEL_DIGEST_CACHE_ENV, RESULT_PATH_ENV
from kit.run import zygote

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
# A client of a warm process has this long to send its whole request (a few hundred bytes, sent at once); one that
# does not is dropped, and holds up no other meanwhile.
REQUEST_TIMEOUT_S = 5.0
MAX_WARM = 4  # warm processes at once per user (each holds what it imported: about half a GiB with torch)
ANSWER_TIMEOUT_S = 300.0  # a warm process's first answer waits for its imports (tens of seconds on a loaded host)
# A warm process whose imports are done answers at once, and one stopped (SIGSTOP) or wedged never answers: an
# asker gives up on it after these, and starts its kernel cold.
CONNECT_TIMEOUT_S = 3.0
READY_ANSWER_S = 5.0
POLL_S = 0.25  # how often an asker waiting for a warm process's imports looks whether it is stopped
SOCKET_PATH_MAX = 107  # bytes of an AF_UNIX socket's path on Linux, less its terminating NUL
DIGEST_CHARS = 24
START_LOCK = "start.lock"
# What a warm process keeps of its starter's environment: what a kernel, Python and the libraries it imports read
# when they load (the kernels an hf case pins, OpenMP's threads, the visible GPUs, JAX's and XLA's settings, the
# temporary folder). Everything else (a database's address, a package index's credentials, a CI job's token) goes
# only to each kernel, in its request; the warm process outlives the command that started it.
KEPT_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR",
                        "TEMP", "TMP", "VIRTUAL_ENV", "GLIBC_TUNABLES"})
KEPT_PREFIXES = (
    "LC_", "PYTHON", "JUPYTER", "JPY_", "IPYTHON", "XDG_", "CONDA", "LD_", "MALLOC_", "MPL",  # the process's own
    SPEC_ENV_PREFIX,  # the kit's own
    "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "GOTO", "BLIS_", "NUMEXPR_", "NUMBA_", "ATEN_", "ONEDNN_", "DNNL_",
    "TORCH", "PYTORCH_", "CUDA_", "CUBLAS", "CUDNN_", "NVIDIA_", "NCCL_", "TRITON_", "ROCM_", "HIP_", "HSA_",
    "JAX_", "XLA_", "TF_", "TPU_", "LIBTPU", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "SAFETENSORS_",
    "VLLM_", "LEVANTER_", "EQX_", "HALIAX_", "PAPERMILL", "SCRAPBOOK",  # the libraries the kit's kernels import
)
# The words of a variable's name (split at "_") that make it look like a secret: even a kept one (HF_TOKEN) is left
# to each kernel's request.
SECRET_WORDS = frozenset({"TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL",
                          "CREDENTIALS", "KEY", "KEYS", "APIKEY", "AUTH", "COOKIE", "PRIVATE"})
SECRET_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")  # PGPASSWORD, HFTOKEN
# A flock held through an open file, as /proc/PID/fdinfo/FD shows it.
_FLOCK_HELD = re.compile(r"^lock:\s.*\bFLOCK\s+ADVISORY\s+WRITE\b", re.MULTILINE)
_disabled = False


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether cases' kernels are forked from warm processes: unless $PARITY_KIT_WARM_KERNELS turns them off or
    this process stopped using them."""
    value = (os.environ if environ is None else environ).get(ENABLED_ENV, "1")
    return not _disabled and value.lower() not in ("0", "off", "false", "no")


def disable() -> None:
    """Start every kernel of this process cold (a Ray worker's kernels stay in its process tree, where Ray's
    cleanup and the run's reap find them)."""
    global _disabled
    _disabled = True


def secret_looking(name: str) -> bool:
    """Whether an environment variable's name looks like it holds a secret: HF_TOKEN, AWS_SECRET_ACCESS_KEY,
    OPENAI_API_KEY, PGPASSWORD, MYSQL_PWD, SSH_AUTH_SOCK. Not TOKENIZERS_PARALLELISM, PWD or OLDPWD."""
    words = [w for w in name.upper().split("_") if w]
    return any(w in SECRET_WORDS or w.endswith(SECRET_ENDINGS) for w in words) or (len(words) > 1 and "PWD" in words)


def kept(name: str) -> bool:
    """Whether a warm process keeps a variable of its starter's environment: one of ``KEPT_NAMES`` or
    ``KEPT_PREFIXES`` whose name does not look like a secret."""
    return (name in KEPT_NAMES or name.startswith(KEPT_PREFIXES)) and not secret_looking(name)


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
        # capabilities, no_new_privs and seccomp: a kernel forked has its warm process's, so a gate confined more
        # narrowly starts a warm process of its own (the warm process refuses it besides: zygote.confinement).
        "confinement": zygote.confinement("self")["status"],
        "namespaces": [read(f"ns:{n}") for n in zygote.NAMESPACES], "cgroup": read("/proc/self/cgroup"),
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
        """The key of a warm process: the interpreter, the environment it keeps (``kept``) less what each case
        sets, and the imports, so that only a kernel that would import the same things the same way is forked
        from it."""
        shared = tuple(sorted((k, v) for k, v in env.items()
                              if kept(k) and k not in PER_CASE and not k.startswith(PER_CASE_PREFIXES)))
        return cls(tuple(python), shared, tuple(dict.fromkeys([*COMMON_IMPORTS, *imports])),
                   json.dumps(context(), sort_keys=True))

    @functools.cached_property
    def digest(self) -> str:
        """The warm process's name: its socket, lock and log files are named by it."""
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
        """The kernel's exit code once it ended, else None, as Popen.poll says it."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the kernel's exit code (TimeoutExpired after ``timeout``), as Popen.wait does."""
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the kernel unless it has ended (its pid may be another process's by then)."""
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """Kill the kernel (SIGKILL), as Popen.kill does."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """Ask the kernel to end (SIGTERM), as Popen.terminate does."""
        self.send_signal(signal.SIGTERM)


def folder() -> Path:
    """Where this user's warm processes listen: a folder of the user's runtime directory, else of /tmp, that only
    the user may enter, since whoever reaches a socket there can run code as the user. Not of ``$TMPDIR``: a
    command given a temporary folder of its own (a test's) expects to find there only what it made, and the warm
    processes outlive it. A socket's path has at most 107 bytes: a runtime directory too deep for that is passed
    over too, and so is one where another user could replace the folder (``base_problem``)."""
    room = SOCKET_PATH_MAX - len("/parity-kit-warm-4294967295/") - DIGEST_CHARS - len(".sock")
    bases = [b for b in (os.environ.get("XDG_RUNTIME_DIR"), "/tmp", tempfile.gettempdir())
             if b and len(os.fsencode(b)) <= room and os.access(b, os.W_OK | os.X_OK)]
    why = {b: base_problem(b) for b in dict.fromkeys(bases)}
    base = next((b for b, problem in why.items() if problem is None), None)
    if base is None:
        raise OSError("no folder for warm kernels: " + ("; ".join(filter(None, why.values())) or
                                                        "no writable runtime or temporary folder"))
    path = Path(base) / f"parity-kit-warm-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    status = path.lstat()
    if status.st_uid != os.getuid() or status.st_mode & 0o077 or not path.is_dir() or path.is_symlink():
        raise OSError(f"{path} is not a folder of this user's alone")
    return path


def base_problem(base: str) -> str | None:
    """Why another user could replace what this user makes in ``base`` (None when none could): a folder on its
    path owned by someone other than the user or root, or writable by others without the sticky bit (which keeps
    each entry to its owner)."""
    path = os.path.realpath(base)
    while True:
        try:
            st = os.stat(path)
        except OSError as exc:
            return f"{path} cannot be read ({exc.strerror})"
        if st.st_uid not in (os.getuid(), 0):
            return f"{path} belongs to uid {st.st_uid}"
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return f"{path} is writable by others without the sticky bit (mode {stat.S_IMODE(st.st_mode):04o})"
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


@contextlib.contextmanager
def holding(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the block: one process at a time starts a warm process or reads its
    state."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def connect_warm(key: Key) -> tuple[socket.socket, Path]:
    """A connection to the warm process of ``key``, started now when none listens, and its socket's path; OSError
    saying why not (TimeoutError for one that takes no connection: stopped, or wedged with its backlog full)."""
    where = folder()
    address = where / f"{key.digest}.sock"
    conn = _try_connect(address)
    if conn is not None:
        with contextlib.suppress(OSError):
            os.utime(address.with_suffix(".lock"))  # used now: the last to be asked to leave
        return conn, address
    with holding(where / START_LOCK):
        conn = _try_connect(address)
        if conn is not None:
            return conn, address
        others = sorted((w for w in running(where, tidy=True) if w.lock != address.with_suffix(".lock")),
                        key=lambda w: w.used)
        for warm in others[:max(0, len(others) - MAX_WARM + 1)]:
            ask_to_leave(warm)  # the least recently used leaves
        start_warm(key, address)
    conn = _try_connect(address)
    if conn is None:
        raise OSError(f"the warm process just started does not listen at {address}")
    return conn, address


@dataclass(frozen=True)
class Warm:
    """A warm process alive now: its lock file is held."""

    lock: Path
    pid: int | None  # the process the kernel shows holding the lock; None when none can be shown (never signalled)
    used: float  # when it was last asked (its lock file's time)


def running(where: Path, tidy: bool = False) -> list[Warm]:
    """The warm processes alive in ``where``: those whose lock file is held. With ``tidy`` (under the start lock,
    where no warm process can be starting), the files of a lock nobody holds are removed: a dead warm process's
    (killed, or ended by the out-of-memory killer), or files planted there; their pids are never signalled."""
    found = []
    for lock in where.glob("*.lock"):
        if lock.name == START_LOCK:
            continue
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                found.append(Warm(lock, warm_holder(lock), st.st_mtime))
                continue
            if tidy:
                for suffix in (".sock", ".lock", ".log"):
                    with contextlib.suppress(OSError):
                        lock.with_suffix(suffix).unlink()
        finally:
            os.close(fd)
    return found


def warm_holder(lock: Path) -> int | None:
    """The pid of the warm process that holds ``lock``'s flock, as the kernel shows it: the pid the file names,
    only if that process has the very file open with a flock on it (/proc/PID/fd and fdinfo) and is a warm process
    of the kit serving that lock's socket (its command line: ``warm_process``). None otherwise: a stale file, a
    reused pid, a planted one, and another process that locked the file prove nothing, and are never signalled."""
    try:
        st = lock.stat(follow_symlinks=False)
        with open(lock, "rb") as f:
            claimed = int(f.read(32).split()[0])  # a pid, and " ready" once its imports are done; never more is read
        entries = os.listdir(f"/proc/{claimed}/fd")
    except (OSError, ValueError, IndexError):
        return None
    if not warm_process(claimed, lock.with_suffix(".sock")):
        return None
    for entry in entries:
        try:
            held = os.stat(f"/proc/{claimed}/fd/{entry}")
            if (held.st_dev, held.st_ino) != (st.st_dev, st.st_ino):
                continue
            with open(f"/proc/{claimed}/fdinfo/{entry}") as info:
                if _FLOCK_HELD.search(info.read()):
                    return claimed
        except OSError:
            continue
    return None


def warm_process(pid: int, address: Path) -> bool:
    """Whether ``pid`` runs the kit's warm process (``zygote.py``) for the socket at ``address``, as its command
    line (/proc/PID/cmdline) shows: ``start`` gives both."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read(1 << 16).split(b"\0")
    except OSError:
        return False
    script = next((i for i, a in enumerate(argv) if os.path.basename(a) == ZYGOTE.name.encode()), None)
    return script is not None and os.fsencode(str(address)) in argv[script + 1:]


def ready(lock: Path) -> bool:
    """Whether the warm process of ``lock`` has done its first imports (it then says so after its pid)."""
    try:
        with open(lock, "rb") as f:
            return f.read(32).rstrip(b"\n").endswith(zygote.READY.rstrip(b"\n"))
    except OSError:
        return False


def stopped(lock: Path) -> bool:
    """Whether the warm process of ``lock`` is stopped (SIGSTOP, a debugger): it will not answer until continued."""
    pid = warm_holder(lock)
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"T", b"t")


def ask_to_leave(warm: Warm) -> None:
    """SIGTERM to a warm process, only once the kernel has shown again that the pid holds its lock (through a pidfd,
    so that the pid cannot be another process's by the time the signal goes)."""
    if warm.pid is None:
        return
    try:
        pidfd = os.pidfd_open(warm.pid)
    except (OSError, AttributeError):
        return
    try:
        if warm_holder(warm.lock) == warm.pid:
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)
    except OSError:
        pass
    finally:
        os.close(pidfd)


def _try_connect(address: Path, timeout: float | None = None) -> socket.socket | None:
    """A connection to the socket at ``address``, None where none listens. A warm process that takes none (it is
    stopped, or wedged, with its backlog full: a Unix socket's connect then waits for it for ever) raises
    TimeoutError after ``timeout`` (``CONNECT_TIMEOUT_S``)."""
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.setblocking(False)  # a full backlog answers EAGAIN at once instead of blocking
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.connect(str(address))
            break
        except (FileNotFoundError, ConnectionRefusedError):
            conn.close()
            return None
        except (BlockingIOError, InterruptedError):
            if time.monotonic() >= deadline:
                conn.close()
                raise TimeoutError(f"the warm process at {address} took no connection in {timeout:g} s "
                                   "(stopped or wedged)") from None
            time.sleep(0.05)
        except OSError:
            conn.close()
            raise
    conn.setblocking(True)
    return conn


def start_warm(key: Key, address: Path) -> None:
    """Start the warm process of ``key`` listening at ``address`` (a stale path there is replaced). Its socket is
    its user's alone (0600) before it listens: a socket's mode follows the umask at bind, and only a chmod of its
    path changes it (an fchmod of its descriptor does not, on Linux)."""
    with contextlib.suppress(FileNotFoundError):
        address.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(address))
        os.chmod(address, 0o600)
        listener.listen(64)
        log_path = address.with_suffix(".log")
        # Never through a link planted in its place: the log is appended to, by a process that outlives this one.
        with os.fdopen(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                               0o600), "ab") as errors:
            starter = subprocess.Popen(
                [*key.python, str(ZYGOTE), "--detach", str(listener.fileno()), str(address), str(IDLE_S),
                 str(REQUEST_TIMEOUT_S), *key.imports], pass_fds=[listener.fileno()], env=dict(key.env),
                stdin=subprocess.DEVNULL, stdout=errors, stderr=errors, start_new_session=True,
                cwd=str(address.parent))
        # It exits once the warm process holds its lock (so that no one takes it for dead), else with 1.
        if starter.wait(timeout=60) != 0:
            raise OSError(f"the warm process did not start (exit {starter.returncode}; its log: {log_path})")
    finally:
        listener.close()


def fork(key: Key, cmd: Sequence[str], env: Mapping[str, str], cwd: str, stdout: IO,
         stderr: IO) -> ForkedKernel:
    """A kernel forked by the warm process of ``key`` with ``cmd``'s module and arguments; OSError saying why not
    (TimeoutError for a warm process that is stopped or wedged). A warm process that was just leaving is asked once
    more, started anew."""
    at = list(cmd).index("-m")
    payload = bytearray(json.dumps({"module": cmd[at + 1], "args": list(cmd[at + 2:]), "env": dict(env),
                                    "cwd": cwd}).encode())
    try:
        for attempt in (1, 2):
            conn, address = connect_warm(key)
            answer = _ask(conn, address.with_suffix(".lock"), payload, [stdout.fileno(), stderr.fileno()])
            if answer is None:
                conn.close()
                if attempt == 2:
                    raise OSError("the warm process closed the connection without an answer")
                continue
            word, _, value = answer.partition(" ")
            if word == "refused":
                conn.close()
                raise OSError(f"the warm process refused the request: {value}")
            if word != "pid" or not value.strip().isdigit():
                conn.close()
                raise OSError(f"the warm process answered {answer!r}")
            conn.settimeout(None)
            return ForkedKernel(int(value), conn, cmd)
    finally:
        payload[:] = bytes(len(payload))  # it held the kernel's environment, secrets included
    raise AssertionError("unreachable")


def _ask(conn: socket.socket, lock: Path, payload: bytearray, streams: list[int]) -> str | None:
    """Send a request on ``conn`` and read the first line of its answer (None when the warm process closed the
    connection first); closes ``conn`` and raises OSError where it cannot."""
    stdin = os.open(os.devnull, os.O_RDONLY)
    try:
        conn.settimeout(CONNECT_TIMEOUT_S)  # a request is small: a warm process's socket buffer takes it whole
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # refused at once: its answer is there
            socket.send_fds(conn, [len(payload).to_bytes(8, "big")], [stdin, *streams])
            conn.sendall(payload)
        return _read_line(conn, lock)
    except ConnectionResetError:
        return None
    except OSError:
        conn.close()
        raise
    finally:
        os.close(stdin)


def _read_line(conn: socket.socket, lock: Path) -> str | None:
    """One line of the warm process's answer; None when it closed the connection before a whole one. A warm
    process still importing has ``ANSWER_TIMEOUT_S``, unless it is stopped; once its imports are done, it answers
    within ``READY_ANSWER_S`` or is taken for stopped or wedged (TimeoutError)."""
    data, now = b"", time.monotonic()
    deadline, imported = now + ANSWER_TIMEOUT_S, False
    while not data.endswith(b"\n"):
        now = time.monotonic()
        if not imported and ready(lock):
            imported, deadline = True, min(deadline, now + READY_ANSWER_S)
        if now >= deadline or (not imported and stopped(lock)):
            raise TimeoutError(f"the warm process of {lock.name} gave no answer "
                               f"{'in time' if now >= deadline else 'and is stopped'} (stopped or wedged)")
        conn.settimeout(min(POLL_S, deadline - now))
        try:
            chunk = conn.recv(1)  # one byte at a time: what follows the line is the kernel's exit, read elsewhere
        except TimeoutError:
            continue
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
