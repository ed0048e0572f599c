"""What people read of a run, held to the verdict `parity-kit verify` re-derived.

The seal covers the case results and their evidence; a reader reads other files: ``evidence.md`` pasted into an
issue, ``summary.html`` and its notebook, and ``result.json``, whose per-case figures (counts, largest error,
headroom) the console, the history and the trend read. Each is held to the run's re-derived verdict and sealed case
results (themselves held, field for field, to the cases judged again):

- ``evidence.md`` is written again by the kit's own writer (kit.gate.report.evidence_markdown) from them, the
  run's recorded duration and its trend steps, and must be that text line for line (the run's folder, which its
  commands may name, excepted; the root digest it quotes is compared on its own);
- ``result.json`` is written again by the kit's own writer (``result_document``) and must be that document, per
  case and for its counts and missing cases (its verdict and statuses are compared on their own);
- ``summary.html`` and ``summary.ipynb`` must state the verdict in their title and in every gate banner: a
  notebook cannot be executed again without its kernels, but what it says of the verdict can be read.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from kit.core.noise.calibration import first_difference
from kit.core.records import rundir
from kit.core.records.jsonio import json_safe
from kit.core.records.records import CaseResult
from kit.core.records.results import Verdict
from kit.core.records.results import status_counts
from kit.gate.report import ROOT_DIGEST_LABEL, evidence_markdown, false_failure_part, result_document
from kit.gate.trend import evidence_line, read_steps
from kit.gate.verify.rederive import said
from kit.gate.verify.safeio import read_limited

# Where the writer names the run's folder (a resume command) or its descriptor, relative to the folder it ran in:
# any text matches there.
RUN_DIR = "RUN-DIR-OF-THE-RUN"
DESCRIPTOR = "DESCRIPTOR-OF-THE-RUN"
LISTED = re.compile(r", | · |goldens ")  # the pieces of the digests line (kit.gate.report)
BANNER = re.compile(r'Gate (?:[^<]|</?code>){1,400}?: <span style=\\?"color:#[0-9a-fA-F]{6}\\?">([^<]*)</span>')
TITLE = re.compile(r"<title>([^<]*)</title>")


def check_readable(run_dir: Path, manifest: Mapping[str, Any], verdict: str, expected: Sequence[str],
                   results: Mapping[str, CaseResult], problems: list[str]) -> None:
    """evidence.md, result.json and the summary against the verdict and results (see the module)."""
    recorded = _json(run_dir, rundir.RESULT)
    duration = recorded.get("duration_s") if isinstance(recorded, dict) else None
    duration = duration if isinstance(duration, (int, float)) and not isinstance(duration, bool) else 0.0
    counts = status_counts(expected, results)
    if isinstance(recorded, dict):
        problems += _result_problems(recorded, {**result_document(str(manifest.get("name")), verdict, counts,
                                                                  duration, expected, results),
                                                **false_failure_part(dict(manifest))})
    try:
        problems += _evidence_problems(run_dir, manifest, verdict, counts, duration, results)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a manifest value of a shape no kit writes
        problems.append(f"{rundir.EVIDENCE}: cannot be written again from the run's manifest ({type(exc).__name__}: "
                        f"{exc}): what it says of the verdict cannot be compared")
    for name in (rundir.SUMMARY_HTML, rundir.SUMMARY_NOTEBOOK):
        problems += _summary_problems(run_dir, name, str(manifest.get("name")), verdict)


def _json(run_dir: Path, rel: str) -> Any:
    data = read_limited(run_dir, rel)
    try:
        return json.loads(data) if data is not None else None
    except ValueError:
        return None


def _result_problems(recorded: dict, again: dict) -> list[str]:
    """result.json against the document the kit writes for the run's results, less what is compared on its own."""
    out = []
    for key in ("counts", "missing", "false_failure_rate"):
        differs = first_difference(recorded.get(key), again.get(key), key)
        if differs:
            out.append(f"{rundir.RESULT}: {differs[0]} is {said(differs[1])}; the cases judged again give "
                       f"{said(differs[2])}")
    stated = recorded.get("cases")
    cases: dict = stated if isinstance(stated, dict) else {}
    for name, doc in again["cases"].items():
        was = cases.get(name)
        was = {k: v for k, v in was.items() if k != "status"} if isinstance(was, dict) else was
        # As write_json writes it: tuples as lists, a NaN or an infinity as null.
        differs = first_difference(was, json.loads(json.dumps(json_safe(
            {k: v for k, v in doc.items() if k != "status"}))), f"cases.{name}")
        if differs:
            out.append(f"{rundir.RESULT}: {differs[0]} is {said(differs[1])}; its sealed result "
                       f"({rundir.CASES}/{name}{rundir.CASE_RESULT}) gives {said(differs[2])}")
    return out


def _evidence_problems(run_dir: Path, manifest: Mapping[str, Any], verdict: str, counts: dict, duration: float,
                       results: Mapping[str, CaseResult]) -> list[str]:
    """evidence.md against the text the kit writes for the verdict and results (its first line that differs)."""
    data = read_limited(run_dir, rundir.EVIDENCE)
    if data is None:
        return []  # said where the root digest it quotes is compared
    trend = evidence_line(read_steps(run_dir), verdict == Verdict.PASSED)
    again = evidence_markdown({**manifest, "descriptor": DESCRIPTOR}, verdict, counts, duration, results, trend,
                              Path(RUN_DIR))
    wanted = [line for line in again.splitlines() if not line.startswith(ROOT_DIGEST_LABEL)]
    found = [line for line in data.decode("utf-8", "replace").splitlines() if not line.startswith(ROOT_DIGEST_LABEL)]
    for n, (want, got) in enumerate(zip(wanted, found), 1):
        if not _same_line(want, got):
            return [f"{rundir.EVIDENCE}: line {n} is {said(got)}; the verdict and results judged again give "
                    f"{said(want)}"]
    if len(wanted) != len(found):
        return [f"{rundir.EVIDENCE}: {len(found)} lines; the verdict and results judged again give {len(wanted)}"]
    return []


def _same_line(want: str, got: str) -> bool:
    """Whether ``got`` is the line ``want``, any text where it names the run's folder or descriptor; a list of a
    table the manifest keeps (its goldens) in either order, since the manifest is written with its keys sorted."""
    pattern = ".+".join(map(re.escape, re.split(f"{RUN_DIR}|{DESCRIPTOR}", want)))
    return bool(re.fullmatch(pattern, got)) or sorted(re.split(LISTED, want)) == sorted(re.split(LISTED, got))


def _summary_problems(run_dir: Path, name: str, run_name: str, verdict: str) -> list[str]:
    """A summary's title and gate banners against the verdict (none for a run written without a summary)."""
    data = read_limited(run_dir, name)
    if data is None:
        return []
    text = data.decode("utf-8", "replace")
    out = []
    # The summary's page title as kit.views.audit.page_title writes it (views sit above the gate: not imported).
    title = html.escape(f"{run_name}: {verdict} — parity gate", quote=False)
    titles = TITLE.findall(text)
    if name == rundir.SUMMARY_HTML and titles != [title]:
        out.append(f"{name}: its title is {said(' | '.join(titles) or 'absent')}; the verdict judged again gives "
                   f"{said(title)}")
    marks = BANNER.findall(text)
    wrong = sorted({m for m in marks if m != verdict.upper()})
    if wrong or not marks:
        out.append(f"{name}: its gate banner says {said(', '.join(wrong) or 'nothing')}; the verdict judged again "
                   f"is {verdict}")
    return out
