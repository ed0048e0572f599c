"""Wall time of the embedded gate, cases side by side: local executor against Ray.

    .venv/bin/python benchmarks/gate_wall.py [--descriptor PATH] [--no-netns]

For each executor it runs `parity-kit gate --no-summary` once and prints the sum
of the case times, the gate's wall time (the cases phase, from the run's
result.json, and the whole command), and the ratio of the cases phase to the
slowest case: 1.0 means every case ran side by side with no cost on top; the
target is under 1.3 when there are cores for every case. Ray is measured twice:
started by the gate for the run (its start is part of the wall time; it is also
timed alone), and already up, joined through RAY_ADDRESS, as on a cluster.
As root, Ray runs in a loopback-only network namespace (`unshare -n`) so that it
binds nothing but 127.0.0.1; `--no-netns` runs it on the host's network.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from timing import ROOT, print_rows, timed

NETNS = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']
# A Ray already up (as on a cluster): this process starts it, the gate joins it through RAY_ADDRESS.
ATTACHED = ("import os, subprocess, sys, ray; "
            "ray.init(num_cpus=os.cpu_count(), include_dashboard=False, _temp_dir=os.environ['RAY_TMPDIR'], "
            "logging_level='ERROR'); "
            "env = {**os.environ, 'RAY_ADDRESS': ray.get_runtime_context().gcs_address}; "
            "sys.exit(subprocess.run(sys.argv[1:], env=env).returncode)")
RAY_START_STOP = ("import os, time, ray; t = time.perf_counter(); "
                  "ray.init(num_cpus=os.cpu_count(), include_dashboard=False, _temp_dir=os.environ['RAY_TMPDIR'], "
                  "logging_level='ERROR'); ray.shutdown(); print(time.perf_counter() - t)")



def gate(descriptor: str, out: Path, executor: str, prefix: list[str], env: dict) -> dict:
    """One gate run; ``prefix`` is what the command runs under (a namespace, an attached Ray)."""
    wall, proc = timed([*prefix, sys.executable, "-m", "kit.cli", "gate", descriptor, "--out", str(out),
                        "--no-summary", "--executor", executor], env=env)
    if proc.returncode not in (0, 1):
        sys.exit(f"gate --executor {executor} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    result = json.loads((out / "result.json").read_text())
    times = {name: case["duration_s"] for name, case in result["cases"].items()}
    return {"command_s": wall, "cases_phase_s": result["duration_s"], "case_s": times}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--descriptor", default=str(ROOT / "descriptors" / "tiny-cpu.toml"))
    ap.add_argument("--no-netns", action="store_true", help="run Ray on the host's network")
    args = ap.parse_args()
    prefix = [] if args.no_netns else NETNS
    with tempfile.TemporaryDirectory(prefix="pkwall-") as tmp:
        ray_tmp = Path(tmp) / "ray-tmp"
        (ray_tmp / "ray").mkdir(parents=True)
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": str(ray_tmp)}
        env.pop("RAY_ADDRESS", None)
        local = gate(args.descriptor, Path(tmp) / "local", "local", [], dict(os.environ))
        on_ray = gate(args.descriptor, Path(tmp) / "ray", "ray", prefix, env)
        attached = gate(args.descriptor, Path(tmp) / "attached", "ray", [*prefix, sys.executable, "-c", ATTACHED],
                        env)
        _, p = timed([*prefix, sys.executable, "-c", RAY_START_STOP], env=env)
        ray_start = float(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else float("nan")

    rows = [("cores on this machine", f"{os.cpu_count()}"),
            ("cases", f"{len(local['case_s'])}")]
    for name, r in (("local", local), ("ray, started for the run", on_ray), ("ray, already up", attached)):
        slowest = max(r["case_s"].values())
        rows += [
            (f"{name}: sum of case times", f"{sum(r['case_s'].values()):.1f} s"),
            (f"{name}: slowest case", f"{slowest:.1f} s ({max(r['case_s'], key=r['case_s'].get)})"),
            (f"{name}: gate wall, cases phase", f"{r['cases_phase_s']:.1f} s"),
            (f"{name}: gate wall, whole command", f"{r['command_s']:.1f} s"),
            (f"{name}: ratio cases-phase wall / slowest case", f"{r['cases_phase_s'] / slowest:.2f}"),
        ]
    rows.append(("starting and stopping a Ray, timed alone", f"{ray_start:.1f} s"))
    print_rows(rows)


if __name__ == "__main__":
    main()
