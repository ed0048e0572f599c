"""What a `baseline make` shows a reviewer: how each case stood before, what was made, the backtest's every
turned verdict, the evidence gate, and the bounds beside the ones they replace.

Read from the working directory's ``baseline.json`` (kit.baselines.make), so the rendered notebook is the
evidence a pull request that adds the baselines attaches.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kit.core.baselines.baselinekind import CALIBRATION, baseline_kind_named
from kit.core.noise.calibration import load_record
from kit.core.records.jsonio import read_json

RECORD = "baseline.json"


def load(work_dir: str | Path) -> dict:
    """`baseline make`'s record in its working folder, for its notebook."""
    return read_json(Path(work_dir) / RECORD)


def before_table(doc: dict) -> pd.DataFrame:
    """How each case stood before `baseline make`: its baselines, their standing and the rule behind it."""
    rows = [{"case": r["case"], "baseline": r["kind"], "standing": r["standing"], "rule": r["rule"],
             "made on": r.get("made_on") or ""} for r in doc["before"]]
    return pd.DataFrame(rows).set_index(["case", "baseline"]) if rows else pd.DataFrame()


def made_table(doc: dict) -> pd.DataFrame:
    """Each baseline `baseline make` made, with its backtest's figures and any error."""
    rows = []
    for m in doc["made"]:
        bt = m.get("backtest") or {}
        rows.append({"case": m["case"], "kind": m["kind"], "runtime": m["runtime"],
                     "file": Path(m["staged"]).name if m.get("staged") else "", "error": m.get("error") or "",
                     "replayed": bt.get("replayed"), "known bad passed": bt.get("refusals"),
                     "known good failed": bt.get("needs_acceptance")})
    return pd.DataFrame(rows).set_index(["case", "kind"]) if rows else pd.DataFrame()


def flip_table(doc: dict) -> pd.DataFrame:
    """Every archived run whose verdict a new record would change."""
    rows = [{"case": m["case"], **f} for m in doc["made"] for f in (m.get("backtest") or {}).get("flips", [])]
    return pd.DataFrame(rows) if rows else pd.DataFrame()


def bounds_frame(doc: dict) -> pd.DataFrame:
    """Per made record and bucket: its bound beside the bound of the record the case used before (its own
    runtime's, or the one it fell back to), where that record can still be read."""
    rows = []
    # Read by kind, not by spelling: a record written before the kinds had one spelling reads the same.
    used = {r["case"]: r.get("file") for r in doc["before"] if baseline_kind_named(r["kind"]) is CALIBRATION}
    for m in doc["made"]:
        if baseline_kind_named(m["kind"]) is not CALIBRATION or not m.get("bounds"):
            continue
        old = {}
        if used.get(m["case"]) and Path(used[m["case"]]).is_file():
            old = load_record(used[m["case"]]).bounds
        for bucket, bound in m["bounds"].items():
            rows.append({"case": m["case"], "bucket": int(bucket), "new": bound, "before": old.get(bucket)})
    return pd.DataFrame(rows).sort_values(["case", "bucket"]) if rows else pd.DataFrame()


def bounds_plot(frame: pd.DataFrame):
    """Each case's bounds before and after, bucket by bucket, one panel a case."""
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(frame["case"]))
    fig, axes = plt.subplots(1, len(cases), figsize=(4.5 * len(cases), 3.2), squeeze=False)
    for ax, case in zip(axes[0], cases):
        part = frame[frame["case"] == case]
        x = range(len(part))
        ax.bar([i - 0.2 for i in x], part["before"].fillna(0), width=0.4, label="before", color="#bbbbbb")
        ax.bar([i + 0.2 for i in x], part["new"], width=0.4, label="new", color="#3070b0")
        ax.set_xticks(list(x), [str(b) for b in part["bucket"]])
        ax.set_xlabel("bucket (tokens)")
        ax.set_ylabel("bound (max probability error)")
        ax.set_title(case)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def show(work_dir: str | Path) -> dict:
    """The whole evidence, displayed; returns the record for the notebook's scraps."""
    import matplotlib.pyplot as plt
    from IPython.display import HTML, Markdown, display

    doc = load(work_dir)
    verdict = "blessed" if doc["blessed"] else "refused"
    display(Markdown(f"## Baselines {verdict}"))
    display(Markdown("### How each case stood on this runtime before"))
    display(before_table(doc).style.set_properties(**{"text-align": "left"}))
    display(Markdown("### What was made, and its backtest over the archived runs"))
    display(made_table(doc))
    flips = flip_table(doc)
    display(Markdown(f"### Verdicts the new baselines would turn ({len(flips)})"))
    if not flips.empty:
        display(flips)
    frame = bounds_frame(doc)
    if not frame.empty:
        fig = bounds_plot(frame)
        display(fig)
        plt.close(fig)
    gate = doc.get("gate") or {}
    if gate.get("verdict"):
        display(HTML(f"<p>Evidence gate: <b>{gate['verdict']}</b> (its summary: "
                     f"<code>{gate['run']}/summary.html</code>)</p>"))
    for line in doc.get("refusals", []):
        print(f"refused: {line}")
    return doc
