"""A gate's wall time with and without a silent client on its warm kernel processes (kit/run/zygote.py).

    .venv/bin/python benchmarks/warm_silent_client.py [--case hf-bf16] [--runs 2]

A warm process once served one connection at a time, reading each request to its end: a process that connected
and sent nothing stalled every gate of the node behind it (324.7 s against 30.8 s for one case, until the case's
own timeout and an infrastructure retry). Now each connection is read as its bytes come, and one silent for
kit.run.warmkernels.REQUEST_TIMEOUT_S is dropped. This runs ``parity-kit gate --case CASE --no-summary`` on the
embedded descriptor once to start the warm processes (in a runtime folder of its own), then ``--runs`` times
each: alone, and with one silent connection held open on every warm process's socket for the whole gate (the
connections made as the gate starts, and again each second, so that a warm process started meanwhile gets its
silent client too). Rows: the median wall seconds of each and their ratio, which should be about 1.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from timing import ROOT, print_rows, timed

sys.path.insert(0, str(ROOT))

from kit.backends import processes  # noqa: E402
from kit.run import warmkernels  # noqa: E402

PARITY_KIT = str(Path(sys.executable).with_name("parity-kit"))


class SilentClients:
    """One connection to each warm socket under ``run``, sending nothing, held until ``stop``."""

    def __init__(self, run: Path):
        self.run, self.conns, self.done = run, {}, threading.Event()
        self.thread = threading.Thread(target=self._hold, daemon=True)

    def __enter__(self) -> "SilentClients":
        self._connect()
        self.thread.start()
        return self

    def _connect(self) -> None:
        for sock in self.run.glob("*/*.sock"):
            if sock in self.conns and self.conns[sock].fileno() >= 0:
                continue
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(str(sock))
            except OSError:
                conn.close()
                continue
            self.conns[sock] = conn

    def _hold(self) -> None:
        while not self.done.wait(1.0):
            self._connect()  # a dropped one (after its seconds) is replaced: the warm process always has one

    def __exit__(self, *_) -> None:
        self.done.set()
        self.thread.join()
        for conn in self.conns.values():
            conn.close()


def gate(case: str, out: Path, env: dict) -> float:
    seconds, proc = timed([PARITY_KIT, "gate", "--case", case, "--no-summary", "--out", str(out)], env=env)
    if proc.returncode != 0:
        raise SystemExit(f"gate exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="hf-bf16")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="silent-bench-") as tmp, \
            tempfile.TemporaryDirectory(prefix="pk-", dir="/tmp") as run_dir:
        folder, run = Path(tmp), Path(run_dir)
        env = {**os.environ, "XDG_RUNTIME_DIR": str(run)}  # warm processes of this benchmark alone
        try:
            gate(args.case, folder / "warmup", env)
            alone, beside = [], []
            for i in range(args.runs):
                alone.append(gate(args.case, folder / f"alone{i}", env))
                with SilentClients(run) as silent:
                    beside.append(gate(args.case, folder / f"beside{i}", env))
                    held = len(silent.conns)
        finally:
            for where in run.glob("*"):
                for warm in warmkernels.running(where):
                    if warm.pid is not None:
                        processes.stop_tree(warm.pid, grace_s=0)
    a, b = statistics.median(alone), statistics.median(beside)
    print(f"{sys.platform}, {os.cpu_count()} CPUs; gate --case {args.case}, median of {args.runs} each; "
          f"{held} warm socket(s) held silent")
    print_rows([("gate alone", f"{a:6.1f} s"), ("gate beside silent clients", f"{b:6.1f} s"),
                ("beside / alone", f"{b / a:6.2f}x")])


if __name__ == "__main__":
    main()
