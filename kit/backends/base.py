"""The one small interface every backend implements."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol, Sequence

from kit.fixture import PromptCase
from kit.records import Observation

# Set by the executor for each case kernel: the case's path prefix in the run directory. A backend
# that starts helper processes (an engine server) logs them to `<prefix>.<what>.log`, where the
# executor finds them when the case fails or times out.
LOG_PREFIX_ENV = "PARITY_KIT_LOG_PREFIX"


class Backend(Protocol):
    name: str

    def release(self) -> dict:
        """The identity of what computed the observations: engine versions, build, device."""

    def observe(self, cases: Sequence[PromptCase], top_n: int) -> list[Observation]:
        """Next-token top-n logprobs at the last position of each case, most likely first."""

    def details(self) -> dict:
        """How the last ``observe`` computed its results (attention per bucket, ...); may be empty."""

    def close(self) -> None:
        """Free the engine (processes, memory); observing after close is an error."""


def helper_log_path(case: str, what: str) -> Path:
    """Where a helper process of this case logs: beside the case result, or a temp dir when run by hand."""
    prefix = os.environ.get(LOG_PREFIX_ENV)
    if prefix:
        return Path(f"{prefix}.{what}.log")
    return Path(tempfile.mkdtemp(prefix=f"parity-kit-{case}-")) / f"{what}.log"


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
