"""A kernel forked from a warm process is the process a cold start would have given: its own session, the
asker's streams, folder and environment, the warm process's imports, and its exit status (a code or the signal
that ended it) as subprocess gives it. Only a plain ipykernel spec in an equal environment and context is forked;
anything else, a full house of warm processes and a warm process that fails start cold, the last with one line.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kit.backends import processes
from kit.run import warmkernels
from kit.run.notebook import run_notebook

CHILD = '''
import json, os, sys, signal
out, code, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
json.dump({"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "cwd": os.getcwd(),
           "case": os.environ.get("CASE_VAR"), "shared": os.environ.get("SHARED_VAR"),
           "argv": sys.argv[1:], "preloaded": "wave" in sys.modules, "name": __name__}, open(out, "w"))
print("to stdout", flush=True)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
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
    (site / "childmod.py").write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(site), "SHARED_VAR": "shared"}
    yield env
    for pid_file in run.glob("*/*.pid"):
        processes.stop_tree(int(pid_file.read_text()), grace_s=0)
    shutil.rmtree(run, ignore_errors=True)


def forked(env: dict, tmp_path: Path, name: str, code: int = 0, how: str = "exit", case: str = "one",
           imports=("wave",)) -> tuple[warmkernels.ForkedKernel, dict, Path]:
    out, log = tmp_path / f"{name}.json", tmp_path / f"{name}.log"
    key = warmkernels.Key.of((sys.executable,), env, imports)
    cwd = tmp_path / name
    cwd.mkdir()
    with open(log, "ab") as stream:
        kernel = warmkernels.fork(key, [sys.executable, "-m", "childmod", str(out), str(code), how],
                                  {**env, "CASE_VAR": case}, str(cwd), stream, stream)
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
    assert seen["argv"][1:] == ["0", "exit"] and seen["name"] == "__main__"
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
    assert len(lines) == 1 and lines[0].startswith("a warm kernel process failed (OSError: the warm process just "
                                                   "started does not listen at ")
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
