"""Ray for tests, inside a network namespace that holds only loopback.

Ray binds the machine's own address unless it has no other: a fresh namespace
(``unshare -n``, as root) keeps every test's traffic on 127.0.0.1. A small head
process (``ray_head.py``) starts Ray there and holds the namespace; the gate
under test joins it with ``nsenter``. Each Ray gets its own short temp dir, and
stopping it stops only what it started.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
HEAD = HERE / "ray_head.py"
IN_LOOPBACK_NS = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']


def ray_env(temp: Path, **extra: str) -> dict:
    # Token auth protects a Ray reachable from other machines; in a loopback-only namespace it only
    # adds a token file every client would have to find. A raylet on a loaded 2-core runner (the suite's
    # other worker starting engines beside it) can take longer to come up than Ray's default wait. The checkout's
    # kit comes first on the path: an environment shared by two checkouts has only one of them installed, and a gate
    # run from the other would read that one's descriptors (its paths then differ in every case's inputs digest).
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": str(temp),
            "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE.parents[1])]),
            "RAY_raylet_start_wait_time_s": "180", **extra}


def require_namespaces() -> None:
    """Fail, never skip: without a loopback-only namespace the Ray tests would talk beyond this machine."""
    try:
        proc = subprocess.run([*IN_LOOPBACK_NS, "true"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError as exc:
        pytest.fail(f"the Ray tests need `unshare` and `ip` (util-linux, iproute2): {exc}", pytrace=False)
    if proc.returncode != 0:
        pytest.fail("the Ray tests run Ray in a loopback-only network namespace and need root (or "
                    f"CAP_SYS_ADMIN) for `unshare -n`: it failed: {proc.stderr.strip()}", pytrace=False)


@contextlib.contextmanager
def short_temp(name: str) -> Iterator[Path]:
    """A Ray temp dir with a short path (Ray's Unix sockets live under it: 107-character limit),
    removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=f"pk{name}-"))
    (path / "ray").mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class RayInNamespace:
    """A running Ray (one node, or ``nodes`` fake nodes on this machine) that commands can join."""

    def __init__(self, temp: Path, nodes: int = 1, num_cpus: int = 2):
        require_namespaces()
        self.temp = temp
        self.proc = subprocess.Popen(
            [*IN_LOOPBACK_NS, sys.executable, str(HEAD), "--temp-dir", str(temp), "--nodes", str(nodes),
             "--num-cpus", str(num_cpus)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(temp / "head.log", "wb"),
            text=True, env=ray_env(temp))
        line = self.proc.stdout.readline().strip()
        if not line.startswith("ADDRESS "):
            self.proc.kill()
            pytest.fail(f"Ray did not start in its namespace: {(temp / 'head.log').read_text()[-2000:]}")
        self.address = line.split()[1]

    def run(self, *cmd, timeout: float = 600, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*cmd), capture_output=True, text=True, timeout=timeout,
                              env=env or self.env(), **kw)

    def command(self, *cmd) -> list[str]:
        return ["nsenter", "-t", str(self.proc.pid), "-n", *map(str, cmd)]

    def env(self, **extra: str) -> dict:
        return ray_env(self.temp, RAY_ADDRESS=self.address, **extra)

    def gate(self, *args, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
        return self.run(sys.executable, "-m", "kit.cli", "gate", "--executor", "ray", *args, timeout=timeout,
                        cwd=HERE.parent, env=self.env(**env))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the head shuts its Ray down when its stdin closes
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def gate_in_own_namespace(*args, temp: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """The gate with no RAY_ADDRESS, so it starts (and must stop) a Ray of its own, in temp."""
    require_namespaces()
    env = ray_env(temp, PARITY_KIT_RAY_TMPDIR=str(temp))
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([*IN_LOOPBACK_NS, sys.executable, "-m", "kit.cli", "gate", "--executor", "ray",
                           *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=HERE.parent)


def processes_under(temp: Path) -> list[str]:
    """Command lines of processes that still use a Ray temp dir (a stopped Ray leaves none)."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if str(temp) in cmd:
            found.append(cmd[:200])
    return found
