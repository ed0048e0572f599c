"""The plots of the case and summary notebooks."""

from __future__ import annotations

import math

import pandas as pd

FLOOR = 1e-9  # bit-exact cases have error 0; keep them visible on a log axis


def error_vs_length(prompts: pd.DataFrame, title: str = "max probability error per prompt"):
    """Each prompt's max probability error against its length, one colour per case, bounds dashed."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    if prompts.empty:
        ax.text(0.5, 0.5, "no scored prompts", ha="center", va="center", transform=ax.transAxes)
        return fig
    cases = list(dict.fromkeys(prompts["case"]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, case in enumerate(cases):
        rows = prompts[prompts["case"] == case]
        err = rows["max_probability_error"].map(lambda e: FLOOR if (e is None or not math.isfinite(e) or e < FLOOR) else e)
        ok = rows["passed"].astype(bool)
        c = colors[i % len(colors)]
        ax.scatter(rows["n_tokens"][ok], err[ok], s=14, color=c, label=f"{case}")
        if (~ok).any():
            ax.scatter(rows["n_tokens"][~ok], err[~ok], s=40, color=c, marker="x", label=f"{case} (failed)")
        for bound in sorted({b for b in rows["bound"] if b is not None and not pd.isna(b)}):
            ax.axhline(bound, color=c, linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("max |p_backend - p_golden|")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig
