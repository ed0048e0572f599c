"""Progress of a running case, from its kernel to the gate: one JSON line per finished bucket.

A CI log shows nothing of a case between its start and its verdict, which for a large model can be
an hour. The kernel appends a line to a file beside the case's other logs (the executor names the
prefix in ``contract.LOG_PREFIX_ENV``) and the gate relays each new line. A file rather than the
kernel's stdout: it works alike in every kernel (Levanter's environment, on pydantic 1) and under
every executor, and it never mixes into the executed notebook, which is the audit artifact.
Kernel-safe: stdlib only.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.core.records.contract import LOG_PREFIX_ENV

SUFFIX = ".progress.jsonl"  # cases/<case>.progress.jsonl


@dataclass(frozen=True)
class BucketDone:
    bucket: int
    prompts: int
    seconds: float
    index: int  # 1-based: the how-manieth bucket of the case this is
    total: int  # buckets the case scores

    def to_line(self) -> str:
        """The event as one compact JSON line, newline included: one append the gate's reader cannot see torn."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")) + "\n"

    @classmethod
    def from_line(cls, line: str) -> "BucketDone | None":
        """None for a line this version cannot read (a kernel of another kit version): progress is
        advisory, so an unreadable line is skipped, never an error."""
        try:
            doc = json.loads(line)
            return cls(int(doc["bucket"]), int(doc["prompts"]), float(doc["seconds"]), int(doc["index"]),
                       int(doc["total"]))
        except (ValueError, KeyError, TypeError):
            return None


def progress_path(prefix: str | Path) -> Path:
    """The progress file of the case whose log prefix is ``prefix`` (``cases/<case>``)."""
    return Path(f"{prefix}{SUFFIX}")


class ProgressWriter:
    """The kernel's side. Writes nothing when the case runs outside the executor (by hand, in a
    benchmark), and stops writing at the first failed write: progress must never fail a case."""

    def __init__(self, prefix: str | None = None) -> None:
        prefix = prefix if prefix is not None else os.environ.get(LOG_PREFIX_ENV)
        self.path = progress_path(prefix) if prefix else None

    def bucket_done(self, event: BucketDone) -> None:
        """Append a finished bucket's line to the progress file, where the executor gave one; a failed write
        never fails the case (progress is for people)."""
        if self.path is None:
            return
        try:
            with open(self.path, "a", encoding="utf-8") as f:  # one short append per line: never torn
                f.write(event.to_line())
        except OSError:
            self.path = None
