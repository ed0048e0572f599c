"""What the history notebook shows: each case and bucket's errors against its bound over time (a decode case's worst
step against that step's bound too, as a series of its own), with the releases, baseline changes and steps in its
error marked where they happened, and the table of margins (bound - error) being lost.

Read from the history's index (kit.history.index), which `parity-kit history` has brought up to date before the
notebook runs, so the notebook only queries.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from kit.history import index as history_index
from kit.history import queries
from kit.history.rows import Check
from kit.history.steps import flag_rows

# Marker colours: a release, a baseline (golden or calibration record), a step up in the error.
RELEASE, BASELINE, STEP = "#3070b0", "#d08020", "#c03030"


def selection(descriptor: str | None, cases: Sequence[str] | None, since: str | None) -> queries.Selection:
    """The history's selection from the notebook's parameters (``since`` as an ISO date)."""
    return queries.Selection(descriptor, tuple(cases or ()), _dt.datetime.fromisoformat(since) if since else None)


def load(index: str | Path, sel: queries.Selection) -> dict[str, Any]:
    """Everything the notebook shows, read from the index once."""
    con = history_index.connect(Path(index), read_only=True)
    try:
        return {"series": queries.series(con, sel), "margins": flag_rows(queries.margins(con, sel)),
                "changes": queries.changes(con, sel), "lines": queries.lines(con)}
    finally:
        con.close()


def margin_table(rows: Sequence[queries.MarginRow]) -> pd.DataFrame:
    """The margin table of the history notebook: per case and bucket, its runs, last error, bound, margin,
    trend and flag."""
    frame = pd.DataFrame([{"case": r.series, "bucket": r.bucket, "runs": r.runs, "last largest error": r.max_error,
                           "bound": r.bound, "margin": r.margin, "error / bound": r.ratio,
                           "least margin": r.least_margin, "trend per run": r.trend,
                           "trend p": "—" if r.p_value is None else f"{r.p_value:.2g}",
                           "shrinking": r.shrinking, "flag": r.flag or "", "new with the last run": r.new_step}
                          for r in rows])
    return frame.set_index(["case", "bucket"]) if not frame.empty else frame


def case_plot(series: pd.DataFrame, case: str, changes: Sequence[dict], steps: dict[int, str],
              check: Check = Check.FIRST_TOKEN) -> Any:
    """One case: per bucket, its largest and mean error and its bound over the runs' start times; releases and
    baseline changes as vertical lines, the run after a step up in the error as a red triangle. With ``check``
    Check.DECODE, its worst decode step's error and that step's own bound instead (no mean: each step has its bound)."""
    import matplotlib.pyplot as plt

    part = series[(series["case"] == case) & (series["check"] == check)]
    buckets = sorted(part["bucket"].unique())
    fig, axes = plt.subplots(1, len(buckets), figsize=(4.2 * len(buckets), 3.2), squeeze=False, sharey=False)
    marks = [c for c in changes if c["case"] in (case, None)]
    for ax, bucket in zip(axes[0], buckets):
        b = part[part["bucket"] == bucket]
        x = pd.to_datetime(b["started_at"])
        decode = check == Check.DECODE
        ax.plot(x, b["max_error"], marker=".", lw=1, label="worst step's error" if decode else "largest error",
                color="#202020")
        if not decode:
            ax.plot(x, b["mean_error"], lw=1, ls="--", label="mean error", color="#808080")
        if b["bound"].notna().any():
            ax.step(x, b["bound"], where="post", lw=1.2, label="its step's bound" if decode else "bound",
                    color="#30a030")
        for mark in marks:
            at = pd.to_datetime(mark["started_at"])
            release = mark["kind"] == "release"
            ax.axvline(at, color=RELEASE if release else BASELINE, ls=":", lw=1,
                       label="new release" if release else "new golden or calibration record")
        step_run = steps.get(int(bucket))
        if step_run is not None:
            hit = b[b["run"] == step_run]
            ax.scatter(pd.to_datetime(hit["started_at"]), hit["max_error"], marker="^", s=80, color=STEP,
                       zorder=5, label="error stepped up")
        ax.set_title(f"{queries.series_name(case, check)}, bucket {bucket}")
        ax.set_ylabel("max probability error")
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    legend: dict[str, Any] = {}  # each label once, from whichever bucket drew it
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=3, frameon=False,
               bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    return fig


def show(runs: str, index: str | Path, descriptor: str | None = None, cases: Sequence[str] | None = None,
         since: str | None = None) -> dict:
    """The whole history, displayed; returns what the notebook glues."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    sel = selection(descriptor, cases, since)
    data = load(index, sel)
    rows: list[queries.MarginRow] = data["margins"]
    display(Markdown(f"## Parity history of {descriptor or 'every descriptor'}\n\nRuns from `{runs}`; "
                     f"{data['series']['run'].nunique() if not data['series'].empty else 0} runs shown. "
                     "Vertical lines: a new release (blue), a new golden or calibration record (orange)."))
    losing = [r for r in rows if r.flag or r.shrinking]
    display(Markdown(f"### Losing margin ({len(losing)})"))
    if losing:
        display(margin_table(losing))
    shown = data["series"][["case", "check"]].drop_duplicates() if not data["series"].empty else pd.DataFrame()
    for case, check in shown.itertuples(index=False):
        steps = {r.bucket: r.step_run for r in rows if r.case == case and r.check == check and r.step_run}
        fig = case_plot(data["series"], case, data["changes"], steps, check)
        display(fig)
        plt.close(fig)
    display(Markdown("### Margin (bound - largest error) of every case and bucket"))
    display(margin_table(rows))
    if data["changes"]:
        display(Markdown("### Releases and baselines changed"))
        display(pd.DataFrame(data["changes"]))
    display(Markdown(f"### Not read, or not trusted ({len(data['lines'])})"))
    for line in data["lines"]:
        print(f"{line['kind']}: {line['text']}")
    return {"margins": [r.to_dict() for r in rows], "lines": data["lines"], "changes": data["changes"]}
