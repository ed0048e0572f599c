"""The names of the files a run directory holds (docs/architecture.md, Data formats), in one place.

Gate runs, control directories and refresh directories are read back by the summary, the
report and resume; every reader and writer takes the names from here.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from kit.core.recordcheck import Wrong, mapping, text

MANIFEST = "manifest.json"        # gate run: descriptor, digests, kit version, host, times
RESULT = "result.json"            # gate run: the verdict and every case result
EVIDENCE = "evidence.md"          # a paragraph for an issue comment or a pin PR
SUMMARY_NOTEBOOK = "summary.ipynb"
SUMMARY_HTML = "summary.html"
CASES = "cases"                   # cases/<case>.ipynb, cases/<case>.json, cases/<case>.log
MODEL_DIGESTS = "model-digests.json"  # gate run: the preflight's file digests, which the kernels reuse
CONTROL = "control.json"          # control directory: the control's record
CONTROL_NOTEBOOK = "control.ipynb"
DIAGNOSIS = "diagnosis.json"
REFRESH = "refresh.json"          # refresh directory: the refresh's record
BISECT = "bisect.json"            # bisect directory: the inputs, every state and every finished step
SUMMARY_MARKDOWN = "summary.md"   # bisect directory: the answer and every step, for people
LOCALIZE = "localize.json"        # localize directory: the curves, the named point, the case's verdict
REGEN_REPORT = "regen.md"
FIGURES = "figures"               # the summary's plots as PNG and SVG files
LOCK = ".lock"
TREND = "trend.json"              # gate run: the steps up in a case's error this run completed (kit.gate.trend)
BAD_MARK = "bad.json"             # gate run: a person's mark that the run is known bad, and why (kit.baselines.marks)
PUBLISHED = "published.json"     # run or control: where and when it was copied to a store, or why not


def new_run_dir(kind: str, name: str, root: str = "runs") -> Path:
    """A fresh directory name under ``root`` for one command's run: ``<kind>-<name>-<time>-<4 hex>``
    (no kind prefix for a gate run, whose directories are the most common). The random suffix keeps two
    runs started in the same second apart; the time keeps a listing in the order they ran."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root) / "-".join(filter(None, (kind, name, stamp, os.urandom(2).hex())))


def control_run_names(doc: Any) -> tuple[str, str]:
    """The folders of a control's current and candidate runs, as its record (``control.json``) names them;
    Wrong at the first key that is not what a control writes. A name is one folder inside the control
    directory: a record that points elsewhere would make its readers read another run as this control's."""
    d = mapping(doc, "")
    current, candidate = text(d.get("current"), "current"), text(d.get("candidate"), "candidate")
    runs = mapping(d.get("runs"), "runs")
    names = tuple(text(runs.get(release), f"runs.{release}") for release in (current, candidate))
    for release, name in zip((current, candidate), names):
        if Path(name).name != name or name in (".", ".."):
            raise Wrong(f"runs.{release}", "expected the name of a folder in the control directory", name)
    return names[0], names[1]
