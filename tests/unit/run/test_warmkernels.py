"""A kernel forked from a warm process is the process a cold start would have given: its own session, the
asker's streams, folder and environment, the warm process's imports, and its exit status (a code or the signal
that ended it) as subprocess gives it. Only a plain ipykernel spec in an equal environment and context is forked;
anything else, a full house of warm processes and a warm process that fails start cold, the last with one line.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from kit.backends import processes
from kit.run import warmkernels
from kit.run.notebook import run_notebook

ROOT = Path(__file__).resolve().parents[3]

# The "kernel" a test forks: a module of the test's own by the one name a warm process runs (ipykernel_launcher),
# first on the test's PYTHONPATH; it writes what it sees to the file its -f names.
CHILD = '''
import json, os, sys, signal, time
out, code, how = sys.argv[2], int(os.environ.get("CHILD_CODE", "0")), os.environ.get("CHILD_HOW", "exit")
json.dump({"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "cwd": os.getcwd(),
           "case": os.environ.get("CASE_VAR"), "shared": os.environ.get("OMP_NUM_THREADS"),
           "token": os.environ.get("HF_TOKEN"), "db": os.environ.get("DATABASE_URL"), "argv": sys.argv[1:],
           "preloaded": "wave" in sys.modules, "name": __name__, "file": __file__,
           "nnp": [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("NoNewPrivs:")][0]},
          open(out, "w"))
print("to stdout", flush=True)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "sleep":
    time.sleep(300)
sys.exit(code)
'''


@pytest.fixture
def warm(tmp_path, monkeypatch):
    """Warm processes of this test alone (their own folder), importing only what the test asks."""
    run = Path(tempfile.mkdtemp(prefix="pk-", dir="/tmp"))  # a socket's path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setattr(warmkernels, "COMMON_IMPORTS", ())
    monkeypatch.setattr(warmkernels, "_broken", set())
    site = tmp_path / "site"
    site.mkdir()
    (site / "ipykernel_launcher.py").write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}  # kept by a warm process: part of its key
    yield env
    stop_warm(run)


def stop_warm(run: Path) -> None:
    """Stop every warm process under ``run`` and what it forked, and remove the folder: nothing of a test is left."""
    for folder in run.glob("*"):
        for warm in warmkernels.running(folder):
            if warm.pid is not None:
                processes.stop_tree(warm.pid, grace_s=0)
    shutil.rmtree(run, ignore_errors=True)


def forked(env: dict, tmp_path: Path, name: str, code: int = 0, how: str = "exit", case: str = "one",
           imports=("wave",)) -> tuple[warmkernels.ForkedKernel, dict, Path]:
    out, log = tmp_path / f"{name}.json", tmp_path / f"{name}.log"
    key = warmkernels.Key.of((sys.executable,), env, imports)
    cwd = tmp_path / name
    cwd.mkdir()
    with open(log, "ab") as stream:
        kernel = warmkernels.fork(key, [sys.executable, "-m", "ipykernel_launcher", "-f", str(out)],
                                  {**env, "CASE_VAR": case, "CHILD_CODE": str(code), "CHILD_HOW": how}, str(cwd),
                                  stream, stream)
    assert kernel is not None
    kernel.wait(60)
    return kernel, (json.loads(out.read_text()) if out.exists() else {}), log


def sleeping(env: dict, tmp_path: Path, name: str) -> tuple[warmkernels.ForkedKernel, dict]:
    """A forked kernel that keeps running (unlike ``forked``'s, which end), once it has written what it sees."""
    out = tmp_path / f"{name}.json"
    key = warmkernels.Key.of((sys.executable,), env, ("wave",))
    with open(tmp_path / f"{name}.log", "ab") as stream:
        kernel = warmkernels.fork(key, [sys.executable, "-m", "ipykernel_launcher", "-f", str(out)],
                                  {**env, "CHILD_HOW": "sleep"}, str(tmp_path), stream, stream)
    deadline = time.monotonic() + 30
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return kernel, json.loads(out.read_text())


def test_a_deep_runtime_folder_is_passed_over_and_tmpdir_never_holds_them(monkeypatch, tmp_path):
    deep = tmp_path / ("deep" * 30)
    deep.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert warmkernels.folder().parent == Path("/tmp")


def test_a_forked_child_is_what_a_cold_start_gives(warm, tmp_path):
    kernel, seen, log = forked(warm, tmp_path, "a", case="first")
    assert kernel.returncode == 0
    assert seen["pid"] == kernel.pid and seen["sid"] == kernel.pid  # a session of its own, as jupyter_client's
    assert seen["ppid"] != os.getpid()  # the warm process's child, not the asker's
    assert seen["cwd"] == str(tmp_path / "a") and seen["case"] == "first" and seen["shared"] == "1"
    assert seen["argv"] == ["-f", str(tmp_path / "a.json")] and seen["name"] == "__main__"
    assert seen["preloaded"] is True  # imported by the warm process, not by the child
    assert "to stdout" in log.read_text()
    again, seen_again, _ = forked(warm, tmp_path, "b", case="second")
    assert seen_again["ppid"] == seen["ppid"] and seen_again["case"] == "second"  # one warm process for both


def test_exit_codes_and_signals_come_back_as_subprocess_gives_them(warm, tmp_path):
    assert forked(warm, tmp_path, "code", code=3)[0].returncode == 3
    assert forked(warm, tmp_path, "killed", how="kill")[0].returncode == -signal.SIGKILL


def test_another_environment_or_other_imports_get_another_warm_process(warm, tmp_path):
    _, first, _ = forked(warm, tmp_path, "a")
    _, per_case, _ = forked(warm, tmp_path, "b", case="other")  # a per-case variable: same process
    _, other_env, _ = forked({**warm, "OMP_NUM_THREADS": "4"}, tmp_path, "c")
    _, other_imports, _ = forked(warm, tmp_path, "d", imports=("wave", "colorsys"))
    assert per_case["ppid"] == first["ppid"]
    assert len({first["ppid"], other_env["ppid"], other_imports["ppid"]}) == 3


def test_what_each_case_sets_and_pytest_changes_do_not_split_the_key():
    base = {"PATH": "/bin", "OMP_NUM_THREADS": "2"}
    one = warmkernels.Key.of(("/py",), {**base, "PARITY_KIT_RESULT_PATH": "a", "PYTEST_CURRENT_TEST": "t1"}, ())
    two = warmkernels.Key.of(("/py",), {**base, "PARITY_KIT_RESULT_PATH": "b", "PYTEST_CURRENT_TEST": "t2"}, ())
    threads = warmkernels.Key.of(("/py",), {**base, "OMP_NUM_THREADS": "1"}, ())
    assert one.digest == two.digest != threads.digest
    assert one.digest != warmkernels.Key.of(("/py", "-Xfrozen_modules=off"), base, ()).digest


@pytest.mark.parametrize("cmd, spec_env, forkable", [
    (["/py", "-m", "ipykernel_launcher", "-f", "c.json"], {}, True),
    (["/py", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "c.json"], None, True),
    (["/py", "-m", "ipykernel_launcher", "-f", "c.json"], {"PYTHONPATH": "/site"}, False),  # a stand-in's spec
    (["/py", "-m", "ipykernel_launcher", "-f", "c.json"], {"PARITY_KIT_MAIN_PYTHON": "/py"}, True),  # Levanter's
    (["/py", "-m", "ipykernel_launcher", "-f", "c.json"], {"PARITY_KIT_X": "1", "LD_PRELOAD": "x.so"}, False),
    (["/py", "-I", "-m", "ipykernel_launcher", "-f", "c.json"], {}, False),
    (["/py", "-m", "other_kernel", "-f", "c.json"], {}, False),
    (["py", "-m", "ipykernel_launcher", "-f", "c.json"], {}, False),
    (["/usr/bin/env", "python", "-m", "ipykernel_launcher", "-f", "c.json"], {}, False),
])
def test_only_a_plain_ipykernel_launch_is_forked(cmd, spec_env, forkable):
    assert (warmkernels.interpreter(cmd, spec_env) is not None) is forkable


def test_a_warm_process_exits_once_idle_and_another_starts(warm, tmp_path, monkeypatch):
    monkeypatch.setattr(warmkernels, "IDLE_S", 1.0)
    _, first, _ = forked(warm, tmp_path, "a")
    deadline = time.monotonic() + 30
    while not gone(first["ppid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(first["ppid"])
    assert not list(Path(os.environ["XDG_RUNTIME_DIR"]).glob("*/*.sock"))  # its socket, pid file and log went with it
    _, second, _ = forked(warm, tmp_path, "b")
    assert second["ppid"] != first["ppid"]


def test_a_new_key_beyond_the_most_asks_the_least_recently_used_to_leave(warm, tmp_path, monkeypatch):
    monkeypatch.setattr(warmkernels, "MAX_WARM", 2)
    _, first, _ = forked(warm, tmp_path, "a")
    _, second, _ = forked({**warm, "OMP_NUM_THREADS": "2"}, tmp_path, "b")
    time.sleep(0.05)  # file times are coarse: the first is used again, later
    _, first_again, _ = forked(warm, tmp_path, "c")
    _, third, _ = forked({**warm, "OMP_NUM_THREADS": "3"}, tmp_path, "d")
    assert first_again["ppid"] == first["ppid"]
    deadline = time.monotonic() + 30
    while not gone(second["ppid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(second["ppid"]) and not gone(first["ppid"]) and not gone(third["ppid"])


def test_a_warm_process_that_cannot_start_is_one_line_and_a_cold_start(warm, tmp_path, caplog):
    broken = ["/bin/false", "-m", "ipykernel_launcher", "-f", "c.json"]
    with open(tmp_path / "k.log", "ab") as stream, caplog.at_level(logging.WARNING, logger=warmkernels.__name__):
        assert warmkernels.fork_kernel(broken, {}, warm, str(tmp_path), stream, stream) is None
        assert warmkernels.fork_kernel(broken, {}, warm, str(tmp_path), stream, stream) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("a warm kernel process failed (OSError: the warm process did "
                                                   "not start (exit 1; its log: ")
    assert lines[0].endswith("kernels of false start cold from now on")


def test_off_starts_cold(warm, tmp_path):
    cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "c.json"]
    with open(tmp_path / "k.log", "ab") as stream:
        assert warmkernels.fork_kernel(cmd, {}, {**warm, warmkernels.ENABLED_ENV: "0"}, None, stream, stream) is None
    assert not list(Path(os.environ["XDG_RUNTIME_DIR"]).glob("*/*.sock"))


def test_a_timed_out_forked_kernel_is_killed_with_what_it_started(warm, tmp_path, monkeypatch):
    """The kit's kill reaches a forked kernel's session as it reaches a cold one's: nothing of it is left."""
    from support import write_notebook

    monkeypatch.setattr(warmkernels, "COMMON_IMPORTS", ("scrapbook",))
    pids = tmp_path / "pids.json"
    nb = write_notebook(tmp_path / "nb.ipynb", "import json, os, subprocess, sys\n"
                        f"child = subprocess.Popen(['sleep', '300'])\n"
                        f"json.dump([os.getpid(), os.getppid(), child.pid, 'scrapbook' in sys.modules], "
                        f"open({str(pids)!r}, 'w'))", "import time\ntime.sleep(300)")
    outcome = run_notebook(nb, tmp_path / "out.ipynb", {}, "parity-kit", 20, tmp_path / "kernel.log")
    kernel, parent, child, preloaded = json.loads(pids.read_text())
    assert outcome.timed_out and outcome.kind == "timeout"
    assert parent != os.getpid() and preloaded  # it was forked
    assert gone(kernel) and gone(child)


def gone(pid: int) -> bool:
    """No such process, or a zombie (dead, its reaper's wait still to come)."""
    proc = processes._read_stat(pid)
    return proc is None or not proc.alive


# ---------------------------------------------------------------- serving only its owner, never stalled by one


def warm_socket() -> Path:
    return next(Path(os.environ["XDG_RUNTIME_DIR"]).glob("*/*.sock"))


def raw_request(sock: Path, module: str, args: list, env: dict, cwd: str, close: bool = False) -> str | None:
    """A request sent as a client of the protocol would send it, outside warmkernels.fork; the answer's first line
    (None when ``close``: the client hangs up at once)."""
    payload = json.dumps({"module": module, "args": args, "env": env, "cwd": cwd}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(sock))
    null = os.open(os.devnull, os.O_RDWR)
    try:
        socket.send_fds(conn, [len(payload).to_bytes(8, "big")], [null, null, null])
        conn.sendall(payload)
        if close:
            return None
        conn.settimeout(30)
        return conn.makefile().readline().strip()
    finally:
        os.close(null)
        conn.close()


@pytest.mark.parametrize("sends", ["nothing", "half a request"])
def test_a_silent_client_holds_up_no_other_and_is_dropped(warm, tmp_path, monkeypatch, sends):
    """One process that connects and sends nothing (or stops half way) stalled every gate of the node: the warm
    process waited on it. Now the next client is served meanwhile, and the silent one is dropped."""
    monkeypatch.setattr(warmkernels, "REQUEST_TIMEOUT_S", 2.0)
    monkeypatch.setattr(warmkernels, "ANSWER_TIMEOUT_S", 30.0)  # before, the next client waited for ever
    _, first, _ = forked(warm, tmp_path, "a")
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(str(warm_socket()))
    try:
        if sends == "half a request":
            null = os.open(os.devnull, os.O_RDONLY)
            socket.send_fds(silent, [(1000).to_bytes(8, "big")], [null, null, null])
            silent.sendall(b'{"module": ')
            os.close(null)
        kernel, second, _ = forked(warm, tmp_path, "b")
        assert kernel.returncode == 0 and second["ppid"] == first["ppid"]  # served by the same warm process
        silent.settimeout(30)
        assert silent.recv(100) == b""  # then dropped: its connection closed by the warm process
    finally:
        silent.close()


def test_a_request_whose_client_has_gone_is_not_served(warm, tmp_path):
    """A gate that gave up waiting leaves its request behind: it must not become a kernel nobody will stop."""
    _, first, _ = forked(warm, tmp_path, "a")
    left = tmp_path / "left.json"
    os.kill(first["ppid"], signal.SIGSTOP)  # so that the whole request and the hang-up are there before it reads
    try:
        raw_request(warm_socket(), "ipykernel_launcher", ["-f", str(left)], warm, str(tmp_path), close=True)
    finally:
        os.kill(first["ppid"], signal.SIGCONT)
    _, after, _ = forked(warm, tmp_path, "b")  # accepted after it: by now the left request has been dealt with
    assert after["ppid"] == first["ppid"]
    assert not left.exists()


def asker_script(env: str, then: str, first: str = "") -> str:
    """A process that asks the warm process for a kernel (argv: the environment as JSON, the connection file, the
    log), its environment given by the Python expression ``env``; ``first`` runs before the kit is imported (a
    confinement), ``then`` after the kernel is forked."""
    return (f"import json, os, sys\n{first}"
            "from kit.run import warmkernels\n"
            "warmkernels.COMMON_IMPORTS = ()\n"
            "env = json.loads(sys.argv[1])\n"
            "key = warmkernels.Key.of((sys.executable,), env, ('wave',))\n"
            "log = open(sys.argv[3], 'ab')\n"
            "kernel = warmkernels.fork(key, [sys.executable, '-m', 'ipykernel_launcher', '-f', sys.argv[2]],\n"
            f"                          {env}, os.getcwd(), log, log)\n{then}")


def test_a_kernel_whose_asker_dies_ends(warm, tmp_path):
    """A cold kernel ends when the process that started it goes (ipykernel watches its parent); a forked one's
    parent is the warm process, which ends it instead when its asker's connection closes."""
    out = tmp_path / "orphan.json"
    script = asker_script("{**env, 'CHILD_HOW': 'sleep'}", "print(kernel.pid, flush=True)\nos._exit(0)\n")
    asker = subprocess.run([sys.executable, "-c", script, json.dumps(warm), str(out), str(tmp_path / "o.log")],
                           env=warm, capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert asker.returncode == 0, asker.stderr
    pid = int(asker.stdout.split()[0])
    deadline = time.monotonic() + 30
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(pid)


@pytest.mark.parametrize("module, args", [
    ("foreign", ["-f", "{out}"]),  # a module of the asker's own
    ("ipykernel_launcher", ["-f", "{out}", "--extra"]),
    ("ipykernel_launcher", ["--ip=0.0.0.0", "-f", "{out}"]),
    ("runpy", ["-f", "{out}"]),
])
def test_only_a_kernel_launch_is_run(warm, tmp_path, module, args):
    """The warm process took the module from the request and ran it; a probe had a module of its own run there."""
    (tmp_path / "site" / "foreign.py").write_text(CHILD)
    forked(warm, tmp_path, "a")
    out = tmp_path / "ran.json"
    answer = raw_request(warm_socket(), module, [a.format(out=out) for a in args], warm, str(tmp_path))
    assert answer.startswith("refused ") and ("only ipykernel_launcher" in answer or "only -f FILE" in answer)
    assert not out.exists()
    key = warmkernels.Key.of((sys.executable,), warm, ("wave",))
    with open(tmp_path / "k.log", "ab") as stream, pytest.raises(OSError, match="the warm process refused"):
        warmkernels.fork(key, [sys.executable, "-m", module, *[a.format(out=out) for a in args]], warm,
                         str(tmp_path), stream, stream)
    assert not out.exists()


def test_a_client_in_another_namespace_is_refused(warm, tmp_path):
    """A process of the same user confined more narrowly (here another user and network namespace, as a container
    sharing the folder would be) gets nothing run outside it."""
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "--user", "--map-root-user", "--net", "true"], capture_output=True).returncode != 0:
        pytest.skip("no unprivileged namespaces here; test_credentials_are_compared_with_the_warm_process's own "
                    "checks the rule")
    forked(warm, tmp_path, "a")
    out = tmp_path / "inside.json"
    client = ("import json, os, socket, sys\n"
              "payload = json.dumps({'module': 'ipykernel_launcher', 'args': ['-f', sys.argv[2]], "
              "'env': dict(os.environ), 'cwd': os.getcwd()}).encode()\n"
              "c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); n = os.open(os.devnull, os.O_RDWR)\n"
              "try:\n"
              "    socket.send_fds(c, [len(payload).to_bytes(8, 'big')], [n, n, n]); c.sendall(payload)\n"
              "except BrokenPipeError:\n"
              "    pass  # refused on accept, before the request: the answer is there to read\n"
              "c.settimeout(30); print(c.makefile().readline().strip())\n")
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--net", sys.executable, "-c", client,
                           str(warm_socket()), str(out)], env=warm, capture_output=True, text=True, timeout=60,
                          cwd=str(tmp_path))
    assert proc.stdout.startswith("refused client ") and "namespace" in proc.stdout, proc.stderr
    assert not out.exists()


LIMITS = ("Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max cpu time              unlimited            unlimited            seconds   \n"
          "Max open files            {nofile}                 20000                files     \n")


def test_credentials_are_compared_with_the_warm_process_own(tmp_path):
    """The rule itself, on a /proc of the test's making: another user, a pid outside the namespace, another
    namespace or control group, a narrower confinement (fewer capabilities, no_new_privs, seccomp, a lower
    resource limit), or a client gone before it is read: each refused, saying which. A client confined less
    narrowly is served: its kernel has the warm process's confinement, and its own key starts another."""
    from kit.run import zygote

    def proc(pid: str, net: str = "7", cgroup: str = "0::/user.slice\n", eff: str = "1ff", bnd: str = "1ff",
             nnp: str = "0", seccomp: str = "0", nofile: str = "4096") -> None:
        (tmp_path / pid / "ns").mkdir(parents=True)
        for ns in zygote.NAMESPACES:
            os.symlink(f"{ns}:[{net if ns == 'net' else '1'}]", tmp_path / pid / "ns" / ns)
        (tmp_path / pid / "cgroup").write_text(cgroup)
        (tmp_path / pid / "status").write_text(f"Name:\tpython\nCapInh:\t0000000000000000\nCapEff:\t{eff:0>16}\n"
                                               f"CapBnd:\t{bnd:0>16}\nNoNewPrivs:\t{nnp}\nSeccomp:\t{seccomp}\n")
        (tmp_path / pid / "limits").write_text(LIMITS.format(nofile=nofile))

    proc("self", eff="0ff")
    proc("10")
    proc("11", net="8")
    proc("12", cgroup="0::/other.scope\n")
    proc("14", eff="0fe")
    proc("15", bnd="0ff")
    proc("16", nnp="1")
    proc("17", seccomp="2")
    proc("18", nofile="1024")
    proc("19", eff="fff", nofile="8192")
    own = {"uid": 1000, **zygote.proc_context("self", str(tmp_path))}
    check = functools.partial(zygote.credentials_problem, own=own, proc=str(tmp_path))
    assert check(10, 1000) is None
    assert check(10, 1001) == "a client of uid 1001, not 1000"
    assert check(0, 1000) == "a client outside this process's pid namespace"
    assert check(11, 1000) == "client 11 is in another net namespace"
    assert check(12, 1000) == "client 12 is in another control group"
    assert check(13, 1000).startswith("client 13 cannot be read")
    assert check(14, 1000) == "client 14 lacks capabilities this process has (CapEff 0x1)"
    assert check(15, 1000) == "client 15 lacks capabilities this process has (CapBnd 0x100)"
    assert check(16, 1000) == "client 16 runs with no_new_privs, this process without"
    assert check(17, 1000) == "client 17 runs under seccomp mode 2, this process under 0"
    assert check(18, 1000) == "client 18 has a lower limit of open files (1024/20000, this process 4096/20000)"
    assert check(19, 1000) is None  # more capabilities and a higher limit than the warm process: served


def test_planted_and_stale_lock_files_are_never_signalled(warm, tmp_path, monkeypatch):
    """Liveness was `kill(pid, 0)` on a pid file's number, and a start sent SIGTERM to the least recently used:
    four planted files naming unrelated processes, and the oldest got it. Now a warm process is alive while it
    holds its lock, and only the pid the kernel shows holding it is ever signalled."""
    monkeypatch.setattr(warmkernels, "MAX_WARM", 2)
    bystanders = [subprocess.Popen(["sleep", "120"]) for _ in range(4)]
    try:
        where = warmkernels.folder()
        for i, p in enumerate(bystanders[:3]):
            for suffix in (".pid", ".lock"):  # the old name and the new
                planted = where / f"{i:024x}{suffix}"
                planted.write_text(f"{p.pid}\n")
                os.utime(planted, (1, 1))  # the least recently used of all
        held = where / f"{9:024x}.lock"  # held, but by this test, while it names another process
        held.write_text(f"{bystanders[3].pid}\n")
        os.utime(held, (1, 1))
        with open(held) as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            assert warmkernels.warm_holder(held) is None
            _, first, _ = forked(warm, tmp_path, "a")
            _, second, _ = forked({**warm, "OMP_NUM_THREADS": "2"}, tmp_path, "b")
            assert [p.poll() for p in bystanders] == [None] * 4  # nobody was signalled
            assert not (where / f"{0:024x}.lock").exists() and held.exists()  # the unheld ones were cleared away
        assert {w.pid for w in warmkernels.running(where)} == {first["ppid"], second["ppid"]}
    finally:
        for p in bystanders:
            p.kill()
            p.wait()


def test_a_killed_warm_process_is_replaced_and_its_files_are_not_trusted(warm, tmp_path):
    _, first, _ = forked(warm, tmp_path, "a")
    os.kill(first["ppid"], signal.SIGKILL)  # as the out-of-memory killer would: its files stay behind
    deadline = time.monotonic() + 30
    while not gone(first["ppid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert warmkernels.running(warmkernels.folder()) == []
    _, second, _ = forked(warm, tmp_path, "b")
    assert second["ppid"] != first["ppid"]


@pytest.mark.parametrize("mode, used", [(0o777, False), (0o1777, True), (0o700, True), (0o775, False)])
def test_a_base_others_could_replace_the_folder_in_is_passed_over(monkeypatch, mode, used):
    """A world-writable runtime folder without the sticky bit let another user replace the warm folder."""
    base = Path(tempfile.mkdtemp(prefix="pk-", dir="/tmp"))
    try:
        os.chmod(base, mode)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
        assert (warmkernels.folder().parent == base) is used
        assert (warmkernels.base_problem(str(base)) is None) is used
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_base_of_another_user_is_passed_over():
    if os.getuid() != 0:
        pytest.skip("giving a folder to another user takes root; the mode cases check the same rule's other half")
    base = Path(tempfile.mkdtemp(prefix="pk-", dir="/tmp"))
    try:
        os.chown(base, 65534, 65534)
        assert warmkernels.base_problem(str(base)) == f"{base} belongs to uid 65534"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_socket_is_the_users_alone(warm, tmp_path):
    old = os.umask(0o022)  # the common umask: a socket bound under it was srwxr-xr-x
    try:
        forked(warm, tmp_path, "a")
    finally:
        os.umask(old)
    assert stat.S_IMODE(warm_socket().stat().st_mode) == 0o600


def test_the_warm_process_keeps_no_secret_and_each_kernel_gets_its_own(warm, tmp_path):
    """The warm process kept the first asker's whole environment, tokens included, for 90 s after it ended."""
    _, first, _ = forked({**warm, "HF_TOKEN": "hf_first", "AWS_SECRET_ACCESS_KEY": "s3cr3t"}, tmp_path, "a")
    _, second, _ = forked({**warm, "HF_TOKEN": "hf_second"}, tmp_path, "b")
    assert first["token"] == "hf_first" and second["token"] == "hf_second"
    assert second["ppid"] == first["ppid"]  # a secret is not part of the key: one warm process for both
    environ = Path(f"/proc/{first['ppid']}/environ").read_bytes().split(b"\0")
    names = {e.partition(b"=")[0] for e in environ}
    assert b"OMP_NUM_THREADS" in names and not names & {b"HF_TOKEN", b"AWS_SECRET_ACCESS_KEY"}


@pytest.mark.parametrize("name, secret", [
    ("HF_TOKEN", True), ("HUGGING_FACE_HUB_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True),
    ("AWS_ACCESS_KEY_ID", True), ("OPENAI_API_KEY", True), ("PGPASSWORD", True), ("MYSQL_PWD", True),
    ("SSH_AUTH_SOCK", True), ("GOOGLE_APPLICATION_CREDENTIALS", True), ("github_token", True),
    ("TOKENIZERS_PARALLELISM", False), ("PWD", False), ("OLDPWD", False), ("OMP_NUM_THREADS", False),
    ("CUDA_VISIBLE_DEVICES", False), ("PATH", False), ("XLA_FLAGS", False), ("KEYRING_BACKEND", False),
])
def test_secret_looking_names(name, secret):
    assert warmkernels.secret_looking(name) is secret


def test_a_kernel_ends_with_its_warm_process(warm, tmp_path):
    """A warm process killed (by the out-of-memory killer, say) left its kernels running, their asker told they had
    ended (exit status unknown): a kernel of a cold start ends with its parent."""
    kernel, seen = sleeping(warm, tmp_path, "k")
    os.kill(seen["ppid"], signal.SIGKILL)
    assert kernel.wait(30) == 1  # its status went with the warm process
    deadline = time.monotonic() + 30
    while not gone(seen["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(seen["pid"])


# ---------------------------------------------------------------- the next ring: confinement, modules, descriptors,
# a stopped warm process, what it keeps, whom it signals


CONFINED_CLIENT = """
import ctypes, json, os, resource, socket, sys
how, sock, out = sys.argv[1:4]
libc = ctypes.CDLL(None, use_errno=True)
if how == "no_new_privs":
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
elif how == "open files":
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
elif how == "capabilities":
    assert libc.prctl(24, 21, 0, 0, 0) == 0  # PR_CAPBSET_DROP, CAP_SYS_ADMIN
payload = json.dumps({"module": "ipykernel_launcher", "args": ["-f", out], "env": dict(os.environ),
                      "cwd": os.getcwd()}).encode()
c = socket.socket(socket.AF_UNIX); c.connect(sock); n = os.open(os.devnull, os.O_RDWR)
try:
    socket.send_fds(c, [len(payload).to_bytes(8, "big")], [n, n, n]); c.sendall(payload)
except BrokenPipeError:
    pass  # refused on accept, before the request: the answer is there to read
c.settimeout(30); print(c.makefile().readline().strip())
"""


def may_drop_capabilities() -> bool:
    """Whether this process may drop a capability from its bounding set (CAP_SETPCAP, and CAP_SYS_ADMIN to drop)."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return bool(int(status["CapEff"], 16) & (1 << 8) and int(status["CapBnd"], 16) & (1 << 21))


@pytest.mark.parametrize("how, says", [
    ("no_new_privs", "runs with no_new_privs, this process without"),
    ("open files", "has a lower limit of open files (512/"),
    ("capabilities", "lacks capabilities this process has (CapBnd 0x200000)"),
])
def test_a_client_confined_more_narrowly_is_refused(warm, tmp_path, how, says):
    """A client of the same user in the same namespaces was served whatever its confinement: one with no_new_privs,
    a lower resource limit or fewer capabilities had a kernel run with the warm process's, more than its own."""
    if how == "capabilities" and not may_drop_capabilities():
        pytest.skip("dropping a capability takes CAP_SETPCAP; the /proc rule test covers capabilities")
    forked(warm, tmp_path, "a")
    out = tmp_path / "confined.json"
    proc = subprocess.run([sys.executable, "-c", CONFINED_CLIENT, how, str(warm_socket()), str(out)], env=warm,
                          capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert proc.stdout.startswith("refused client ") and says in proc.stdout, (proc.stdout, proc.stderr)
    assert not out.exists()


def test_a_confined_gate_gets_kernels_confined_the_same_way(warm, tmp_path):
    """A gate started with no_new_privs was served by the warm process an unconfined gate had started: its
    kernels ran without it. Confinement is part of the key: such a gate starts a warm process of its own."""
    _, free, _ = forked(warm, tmp_path, "a")
    out = tmp_path / "confined.json"
    script = asker_script("env", "print(kernel.wait(60), flush=True)\n",
                          first="import ctypes\nassert ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) == 0\n")
    gate = subprocess.run([sys.executable, "-c", script, json.dumps(warm), str(out), str(tmp_path / "o.log")],
                          env=warm, capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert gate.returncode == 0 and gate.stdout.strip() == "0", gate.stderr
    seen = json.loads(out.read_text())
    assert free["nnp"] == 0 and seen["nnp"] == 1
    assert seen["ppid"] != free["ppid"]


def test_the_module_is_found_where_the_warm_process_finds_it(warm, tmp_path):
    """The kernel ran ``-m ipykernel_launcher`` with the request's folder first on its path: a folder holding a
    planted ipykernel_launcher.py had it run."""
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "planted-ran"
    (planted / "ipykernel_launcher.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    out = tmp_path / "k.json"
    key = warmkernels.Key.of((sys.executable,), warm, ("wave",))
    with open(tmp_path / "k.log", "ab") as stream:
        kernel = warmkernels.fork(key, [sys.executable, "-m", "ipykernel_launcher", "-f", str(out)], warm,
                                  str(planted), stream, stream)
    assert kernel.wait(60) == 0
    seen = json.loads(out.read_text())
    assert not marker.exists()
    assert seen["file"] == str(tmp_path / "site" / "ipykernel_launcher.py") and seen["cwd"] == str(planted)


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_descriptors_before_a_whole_header_are_refused_and_closed(warm, tmp_path, monkeypatch):
    """Clients sending their header a byte at a time, three descriptors with each byte, pushed the warm process past
    1023 descriptors: select() failed and the warm process died with the kernel it ran. Now a descriptor that comes
    before the header is whole is closed at once and the connection refused."""
    monkeypatch.setattr(warmkernels, "REQUEST_TIMEOUT_S", 20.0)  # longer than this test: nothing is dropped for time
    kernel, seen = sleeping(warm, tmp_path, "running")
    parent = seen["ppid"]
    before = open_descriptors(parent)
    null = os.open(os.devnull, os.O_RDONLY)
    clients, heard = [], []
    try:
        for _ in range(60):  # 60 connections of 7 bytes with 3 descriptors each: 1260 descriptors
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(str(warm_socket()))
            clients.append(client)
            for _ in range(HEADER_BYTES - 1):
                try:
                    socket.send_fds(client, [b"\0"], [null, null, null])
                except (BrokenPipeError, ConnectionResetError):
                    break
        for client in clients:  # each is answered and closed at once, not left pending with what it sent
            client.settimeout(10)
            data = b""
            with contextlib.suppress(ConnectionResetError):
                while chunk := client.recv(4096):
                    data += chunk
            heard.append(data)
    finally:
        os.close(null)
        for client in clients:
            client.close()
    assert all(h in (b"", b"refused descriptors before a whole header\n") for h in heard), set(heard)
    assert b"refused descriptors before a whole header\n" in heard
    assert not gone(parent) and kernel.poll() is None  # the warm process and its kernel live on
    assert open_descriptors(parent) <= before + 2
    _, after, _ = forked(warm, tmp_path, "b")
    assert after["ppid"] == parent
    kernel.kill()
    assert kernel.wait(30) == -signal.SIGKILL


HEADER_BYTES = 8


def test_a_request_buffer_is_zeroed_after_use():
    """The bytes of a request (a kernel's environment, its secrets) stayed in the warm process's buffer."""
    from kit.run import zygote

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    payload = json.dumps({"module": "ipykernel_launcher", "env": {"HF_TOKEN": "hf_secret"}}).encode()
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        socket.send_fds(theirs, [len(payload).to_bytes(8, "big")], [null, null, null])
        theirs.sendall(payload)
        ours.setblocking(False)
        pending = zygote.Pending(ours, time.monotonic() + 5)
        request = None
        while request is None:
            request = zygote.receive(pending)
        assert request["env"] == {"HF_TOKEN": "hf_secret"} and len(pending.fds) == 3
        assert len(pending.body) == len(payload) and not any(pending.body)
        pending.drop()
    finally:
        os.close(null)
        theirs.close()


@pytest.mark.parametrize("backlog_full", [False, True])
def test_a_stopped_warm_process_never_holds_a_gate(warm, tmp_path, caplog, backlog_full):
    """A warm process stopped (SIGSTOP) with its backlog full held a gate for 504 s, past its case's timeout and
    SIGTERM: connect() waited for it. Now the asker gives up within seconds and starts cold, saying so."""
    _, first, _ = forked(warm, tmp_path, "a")  # its imports are done
    held, result = [], []
    cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", str(tmp_path / "c.json")]
    os.kill(first["ppid"], signal.SIGSTOP)
    try:
        while backlog_full and len(held) < 1000:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.setblocking(False)
            try:
                conn.connect(str(warm_socket()))
            except BlockingIOError:
                conn.close()
                break
            held.append(conn)
        with open(tmp_path / "k.log", "ab") as stream, caplog.at_level(logging.WARNING, logger=warmkernels.__name__):
            started = time.monotonic()
            asker = threading.Thread(target=lambda: result.append(warmkernels.fork_kernel(
                cmd, {}, warm, str(tmp_path), stream, stream, imports=("wave",))), daemon=True)
            asker.start()
            asker.join(20)
            took = time.monotonic() - started
            assert not asker.is_alive(), "the asker still waits on a stopped warm process"
    finally:
        os.kill(first["ppid"], signal.SIGCONT)
        for conn in held:
            conn.close()
    assert result == [None] and took < 10  # a cold start instead
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "(TimeoutError: the warm process" in lines[0] and "stopped or wedged" in lines[0]


def test_the_warm_process_keeps_only_what_kernels_need(warm, tmp_path):
    """Secrets were left out by their names' look: a database's address, a package index's credentials, an error
    reporter's key and a CI job's token stayed in the warm process's environment. Now it keeps only what kernels
    read as they load; each kernel still gets everything in its own request."""
    others = {"DATABASE_URL": "postgres://u:pw@db/x", "PIP_INDEX_URL": "https://u:pw@index/simple",
              "SENTRY_DSN": "https://key@sentry/1", "CI_JOB_JWT": "eyJ.x.y", "HF_TOKEN": "hf_x"}
    _, seen, _ = forked({**warm, **others}, tmp_path, "a")
    assert seen["db"] == others["DATABASE_URL"] and seen["token"] == "hf_x"
    names = {e.partition(b"=")[0].decode() for e in Path(f"/proc/{seen['ppid']}/environ").read_bytes().split(b"\0")}
    assert {"PATH", "PYTHONPATH", "OMP_NUM_THREADS"} <= names and not names & set(others)


@pytest.mark.parametrize("name, kept", [
    ("PATH", True), ("HOME", True), ("LANG", True), ("LC_ALL", True), ("PYTHONPATH", True), ("JUPYTER_PATH", True),
    ("PARITY_KIT_COMPILE_CACHE", True), ("OMP_NUM_THREADS", True), ("CUDA_VISIBLE_DEVICES", True),
    ("XLA_FLAGS", True), ("JAX_PLATFORMS", True), ("ATEN_CPU_CAPABILITY", True), ("HF_HOME", True),
    ("HF_TOKEN", False), ("DATABASE_URL", False), ("PIP_INDEX_URL", False), ("SENTRY_DSN", False),
    ("CI_JOB_JWT", False), ("AWS_ACCESS_KEY_ID", False), ("PARITY_KIT_API_KEY", False),
])
def test_what_a_warm_process_keeps(name, kept):
    assert warmkernels.kept(name) is kept


IMPOSTOR = """
import fcntl, os, sys, time
f = open(sys.argv[1], "w"); f.write(f"{os.getpid()}\\n"); f.flush()
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


def test_a_lock_held_by_a_process_not_a_warm_one_is_never_signalled(warm, tmp_path, monkeypatch):
    """A process of the user that held a lock file naming itself was taken for a warm process, and a start with no
    room sent it SIGTERM. Now only a warm process of the kit (its command line) is ever signalled."""
    monkeypatch.setattr(warmkernels, "MAX_WARM", 1)
    lock = warmkernels.folder() / f"{7:024x}.lock"
    impostor = subprocess.Popen([sys.executable, "-c", IMPOSTOR, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert impostor.stdout.readline().strip() == "held"
        os.utime(lock, (1, 1))  # the least recently used of all
        assert warmkernels.warm_holder(lock) is None
        forked(warm, tmp_path, "a")
        time.sleep(0.5)
        assert impostor.poll() is None  # not signalled
    finally:
        impostor.kill()
        impostor.wait()


def test_a_link_in_place_of_the_log_is_not_followed(warm, tmp_path, caplog):
    """The warm process's log was opened through whatever stood at its path: a planted link had the log appended
    to the file it names."""
    target = tmp_path / "target"
    target.write_text("")
    key = warmkernels.Key.of((sys.executable,), warm, ("wave", "no_such_module_of_this_test"))
    log_path = warmkernels.folder() / f"{key.digest}.log"
    log_path.symlink_to(target)
    cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", str(tmp_path / "c.json")]
    with open(tmp_path / "k.log", "ab") as stream, caplog.at_level(logging.WARNING, logger=warmkernels.__name__):
        result = warmkernels.fork_kernel(cmd, {}, warm, str(tmp_path), stream, stream,
                                         imports=("wave", "no_such_module_of_this_test"))
    assert result is None and target.read_text() == ""  # a cold start, the link not followed
    assert "a warm kernel process failed" in caplog.records[0].getMessage()
