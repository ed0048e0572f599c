#!/usr/bin/env python
"""Point a descriptor's case at a calibration record: its ``bound`` line (or an earlier ``calibration``
line) becomes ``calibration = "<record, relative to the descriptor>"``.

``parity-kit calibrate`` prints the line to use; a script that calibrates and then runs the gate in one
go (scripts/gpu-checks.sh) needs it written, without a TOML writer that would drop the comments.

    python scripts/use_calibration.py DESCRIPTOR CASE RECORD
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kit.core.noise.calibration import load_record  # noqa: E402
from kit.core.errors import BadInput  # noqa: E402

SETTING = re.compile(r"^(bound|calibration)\s*=")
TABLE = re.compile(r"^\s*\[")


def point(descriptor: Path, case: str, record: Path) -> str:
    """The descriptor's text with ``[cases.<case>]`` taking its bounds from ``record``."""
    load_record(record)  # a record the case could not load is refused here, before anything is written
    relative = Path(os.path.relpath(record.resolve(), descriptor.resolve().parent)).as_posix()
    lines = descriptor.read_text(encoding="utf-8").splitlines(keepends=True)
    header = f"[cases.{case}]"
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == header)
    except StopIteration:
        raise BadInput(f"{descriptor}: no table {header}") from None
    end = next((i for i in range(start + 1, len(lines)) if TABLE.match(lines[i])), len(lines))
    hits = [i for i in range(start + 1, end) if SETTING.match(lines[i])]
    if not hits:
        raise BadInput(f"{descriptor}: {header} has neither a bound nor a calibration line to replace")
    if any(lines[i].split("=", 1)[1].strip().startswith("[") for i in hits):
        raise BadInput(f"{descriptor}: {header} lists one record per class of hardware; add {relative} to its "
                       "list by hand (this script replaces a single record)")
    lines[hits[0]] = f'calibration = "{relative}"\n'
    for i in reversed(hits[1:]):
        del lines[i]
    text = "".join(lines)
    tomllib.loads(text)
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    descriptor, case, record = Path(args[0]), args[1], Path(args[2])
    try:
        text = point(descriptor, case, record)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    descriptor.write_text(text, encoding="utf-8")
    print(f"{descriptor}: [cases.{case}] calibration = {os.path.relpath(record, descriptor.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
