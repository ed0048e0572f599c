"""A kernel forked from a warm process is the process a cold start would have given: its own session, the
asker's streams, folder and environment, the warm process's imports, and its exit status (a code or the signal
that ended it) as subprocess gives it. Only a plain ipykernel spec in an equal environment and context is forked;
anything else, a full house of warm processes and a warm process that fails start cold, the last with one line.
"""

from __future__ import annotations

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
           "case": os.environ.get("CASE_VAR"), "shared": os.environ.get("SHARED_VAR"),
           "token": os.environ.get("HF_TOKEN"), "argv": sys.argv[1:], "preloaded": "wave" in sys.modules,
           "name": __name__}, open(out, "w"))
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
    env = {**os.environ, "PYTHONPATH": str(site), "SHARED_VAR": "shared"}
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
    assert seen["cwd"] == str(tmp_path / "a") and seen["case"] == "first" and seen["shared"] == "shared"
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
    _, other_env, _ = forked({**warm, "SHARED_VAR": "x"}, tmp_path, "c")
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
    _, second, _ = forked({**warm, "SHARED_VAR": "2"}, tmp_path, "b")
    time.sleep(0.05)  # file times are coarse: the first is used again, later
    _, first_again, _ = forked(warm, tmp_path, "c")
    _, third, _ = forked({**warm, "SHARED_VAR": "3"}, tmp_path, "d")
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


def test_a_kernel_whose_asker_dies_ends(warm, tmp_path):
    """A cold kernel ends when the process that started it goes (ipykernel watches its parent); a forked one's
    parent is the warm process, which ends it instead when its asker's connection closes."""
    out = tmp_path / "orphan.json"
    script = (
        "import json, os, sys\n"
        "from kit.run import warmkernels\n"
        "warmkernels.COMMON_IMPORTS = ()\n"
        "env = json.loads(sys.argv[1])\n"
        "key = warmkernels.Key.of((sys.executable,), env, ('wave',))\n"
        "log = open(sys.argv[3], 'ab')\n"
        "kernel = warmkernels.fork(key, [sys.executable, '-m', 'ipykernel_launcher', '-f', sys.argv[2]],\n"
        "                          {**env, 'CHILD_HOW': 'sleep'}, os.getcwd(), log, log)\n"
        "print(kernel.pid, flush=True)\n"
        "os._exit(0)\n")
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


def test_credentials_are_compared_with_the_warm_process_own(tmp_path):
    """The rule itself, on a /proc of the test's making: another user, a pid outside the namespace, another
    namespace or control group, or a client gone before it is read: each refused, saying which."""
    from kit.run import zygote

    def proc(pid: str, net: str, cgroup: str) -> None:
        (tmp_path / pid / "ns").mkdir(parents=True)
        for ns in zygote.NAMESPACES:
            os.symlink(f"{ns}:[{net if ns == 'net' else '1'}]", tmp_path / pid / "ns" / ns)
        (tmp_path / pid / "cgroup").write_text(cgroup)

    proc("self", "7", "0::/user.slice\n")
    proc("10", "7", "0::/user.slice\n")
    proc("11", "8", "0::/user.slice\n")
    proc("12", "7", "0::/other.scope\n")
    own = {"uid": 1000, **zygote.proc_context("self", str(tmp_path))}
    check = functools.partial(zygote.credentials_problem, own=own, proc=str(tmp_path))
    assert check(10, 1000) is None
    assert check(10, 1001) == "a client of uid 1001, not 1000"
    assert check(0, 1000) == "a client outside this process's pid namespace"
    assert check(11, 1000) == "client 11 is in another net namespace"
    assert check(12, 1000) == "client 12 is in another control group"
    assert check(13, 1000).startswith("client 13 cannot be read")


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
            assert warmkernels.holder(held) is None
            _, first, _ = forked(warm, tmp_path, "a")
            _, second, _ = forked({**warm, "SHARED_VAR": "2"}, tmp_path, "b")
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
    assert b"SHARED_VAR" in names and not names & {b"HF_TOKEN", b"AWS_SECRET_ACCESS_KEY"}


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
    out = tmp_path / "k.json"
    key = warmkernels.Key.of((sys.executable,), warm, ("wave",))
    with open(tmp_path / "k.log", "ab") as stream:
        kernel = warmkernels.fork(key, [sys.executable, "-m", "ipykernel_launcher", "-f", str(out)],
                                  {**warm, "CHILD_HOW": "sleep"}, str(tmp_path), stream, stream)
    deadline = time.monotonic() + 30
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = json.loads(out.read_text())
    os.kill(seen["ppid"], signal.SIGKILL)
    assert kernel.wait(30) == 1  # its status went with the warm process
    deadline = time.monotonic() + 30
    while not gone(seen["pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(seen["pid"])
