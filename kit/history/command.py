"""`parity-kit history`: the gate over time, from every run directory of a store.

It brings the index up to date (kit.history.index), selects one descriptor's runs, some cases, runs since a
date, and answers in one of three ways: the history notebook rendered to HTML in a new folder (the plots of
each case and bucket over time, releases and baseline changes marked), or, for CI, a Markdown table or a JSON
document of the margins (bound - error) and the lines about what could not be read, without starting a kernel.

Bad input is refused in one line only where nothing can be shown (a store that cannot be reached or holds no
run, a selection that matches no run); a run that cannot be read is a line among the results.
"""

from __future__ import annotations

import datetime as _dt
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kit.core.records import paths, rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import write_json
from kit.history import index as history_index
from kit.history import queries
from kit.history.steps import flag_rows
from kit.core.records.store import open_store
from kit.run import lifecycle

log = logging.getLogger(__name__)

NOTEBOOK = paths.NOTEBOOKS / "history.ipynb"
RENDERED = "history.ipynb"
DOCUMENT = "history.json"  # the JSON document, beside the rendered notebook too
NOTEBOOK_TIMEOUT_S = 600


@dataclass
class History:
    """What the history shows for one selection of one store."""

    store: str
    index: Path
    selection: queries.Selection
    runs: int
    margins: list[queries.MarginRow]
    changes: list[dict]
    lines: list[dict]
    indexed: history_index.Update
    out_dir: Path | None = None
    notebook_error: str | None = None

    @property
    def shrinking(self) -> list[queries.MarginRow]:
        """The case-buckets whose margin is going: a step up in their error, or a falling trend."""
        return [r for r in self.margins if r.flag or r.shrinking]

    def to_dict(self) -> dict:
        """The history as `history --json` prints it: the store, the selection, the runs and every margin row."""
        sel = self.selection
        return {"store": self.store, "index": str(self.index),
                "selection": {"descriptor": sel.name, "cases": list(sel.cases),
                              "since": sel.since.isoformat() if sel.since else None},
                "runs": self.runs, "margins": [r.to_dict() for r in self.margins],
                "shrinking": [{"case": r.case, "check": r.check, "bucket": r.bucket} for r in self.shrinking],
                "new_steps": [{"case": r.case, "check": r.check, "bucket": r.bucket, "flag": r.flag}
                              for r in self.margins if r.new_step],
                "changes": self.changes, "lines": self.lines}


def parse_since(text: str | None) -> _dt.datetime | None:
    """``--since``: a date or an ISO time (UTC unless it says otherwise), as the naive UTC the index keeps."""
    if text is None:
        return None
    try:
        t = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(f"--since {text}: expected a date (2026-11-30) or an ISO time") from None
    return t.astimezone(_dt.timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def descriptor_name(descriptor: str | Path | None) -> str | None:
    """The name the runs of ``descriptor`` carry in their manifests (None: every descriptor's runs)."""
    if descriptor is None:
        return None
    from kit.descriptor.load import load_descriptor

    try:
        found = paths.descriptor_path(descriptor)
    except BadInput:  # not a file here: the name itself (a store outlives the descriptors it ran)
        return str(descriptor)
    return load_descriptor(found).name


def gather(runs: str | None = None, descriptor: str | Path | None = None, cases: Sequence[str] = (),
           since: str | None = None, rebuild: bool = False) -> History:
    """The history of the store at ``runs`` (default: this checkout's runs/), brought up to date first."""
    url = runs or str(paths.runs_root())
    store = open_store(url)
    selection = queries.Selection(descriptor_name(descriptor), tuple(cases or ()), parse_since(since))
    with history_index.reading(store, rebuild) as (indexed, con):
        found = queries.count_runs(con, selection)
        if not found:
            raise BadInput(f"{url}: no run matches {selection_words(selection)} (of {indexed.found} run location(s))")
        margins = flag_rows(queries.margins(con, selection))
        return History(url, indexed.path, selection, found, margins, queries.changes(con, selection),
                       queries.lines(con), indexed)


def selection_words(sel: queries.Selection) -> str:
    """The selection in words (descriptor, cases, since), for the lines that say what matched or that nothing did."""
    parts = [f"descriptor {sel.name}" if sel.name else "any descriptor"]
    if sel.cases:
        parts.append(f"case {', '.join(sel.cases)}")
    if sel.since:
        parts.append(f"since {sel.since.isoformat()}")
    return ", ".join(parts)


def render(history: History, out: str | Path | None = None) -> History:
    """The history notebook over ``history``'s selection, executed in the main kernel and rendered to HTML in a
    new folder (``out``, or runs/history-<descriptor>-<time>); a failed cell is kept and said in one line."""
    from kit.run.notebook import run_and_render  # Jupyter's machinery: not for --markdown and --json

    out_dir = lifecycle.claim(out or rundir.new_run_dir("history", history.selection.name or "all",
                                                        str(paths.runs_root())), "--out", "history")
    write_json(out_dir / DOCUMENT, history.to_dict())
    sel = history.selection
    params = {"runs": history.store, "index": str(history.index), "descriptor": sel.name,
              "cases": list(sel.cases), "since": sel.since.isoformat() if sel.since else None}
    notebook = out_dir / RENDERED
    built = run_and_render(NOTEBOOK, notebook, params, NOTEBOOK_TIMEOUT_S, rundir.kernel_log(out_dir, "history"))
    history.out_dir = out_dir
    history.notebook_error = built.error
    if built.error:  # history.json is written; the same command builds the page again
        log.error(f"history not rendered in full: {built.error}; {DOCUMENT} is written; "
                  f"see {paths.display(notebook)}")
    return history


def markdown(history: History) -> str:
    """The margin table for a CI log or a pull request (a decode case's worst step a series of its own, "<case>
    decode"), then every line about what was not read."""
    out = [f"## Parity history: {selection_words(history.selection)}", "",
           f"{history.runs} run(s) from {history.store}; {len(history.shrinking)} case-bucket(s) losing margin.",
           "", "| case | bucket | runs | last largest error | bound | margin | error / bound | trend per run "
               "| flag |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in history.margins:
        trend = r.trend + (" (shrinking)" if r.shrinking else "")
        flag = (r.flag or "") + (" (new with the last run)" if r.new_step else "")
        out.append(f"| {r.series} | {r.bucket} | {r.runs} | {_g(r.max_error)} | {_g(r.bound)} | {_g(r.margin)} | "
                   f"{_g(r.ratio, '.2f')} | {trend} | {flag} |")
    if history.changes:
        out += ["", "Releases and baselines changed:", ""]
        out += [f"- {c['started_at'] or '?'} {c['case'] or 'every case'}: {c['text']} (run {c['run']})"
                for c in history.changes]
    if history.lines:
        out += ["", "Not read, or not trusted:", ""]
        out += [f"- {line['kind']}: {line['text']}" for line in history.lines]
    return "\n".join(out) + "\n"


def _g(value: float | None, spec: str = ".3g") -> str:
    return "—" if value is None else format(value, spec)
