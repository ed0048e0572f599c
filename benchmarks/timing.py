"""What the gate benchmarks share: timing a command from the repo root and printing label/value rows."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of ``cmd`` run from the repo root, and its completed process (output captured)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)
    return time.perf_counter() - t0, proc


def print_rows(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
