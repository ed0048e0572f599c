"""The plots of the case and summary notebooks, and their files for places that show no notebook."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from kit.core.records.records import BoundKind
from kit.core.verdict.decode import worst_decode_step

FLOOR = 1e-9  # bit-exact cases have error 0; keep them visible on a log axis
# File stems of the summary's figures in a run's figures/ folder.
BY_BUCKET = "error-by-bucket"
VS_LENGTH = "error-vs-length"
HEADROOM = "headroom"
DETECTABLE = "detectable-effect"


def save_figure(fig, folder: Path, stem: str) -> list[Path]:
    """``fig`` as ``folder/stem.png`` (an issue comment shows it inline once uploaded) and
    ``stem.svg`` (zooms without blur). Each file is written whole or not at all, and the SVG
    carries no date, so an unchanged figure gives unchanged bytes."""
    import matplotlib

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt, metadata in (("png", {}), ("svg", {"Date": None})):
        path = folder / f"{stem}.{fmt}"
        tmp = path.with_name(f".{path.name}.tmp")
        # "tight", as the notebook's inline display: titles and outside legends are not cut off;
        # a fixed salt, else the SVG's element ids are random on every save.
        with matplotlib.rc_context({"svg.hashsalt": stem}):
            fig.savefig(tmp, format=fmt, dpi=120, bbox_inches="tight", metadata=metadata)
        tmp.replace(path)
        written.append(path)
    return written


def save_figure_or_say(fig, folder: Path, stem: str) -> None:
    """``save_figure``, saying so in one line where it cannot write: a run opened read-only still shows its
    notebook; only the files are missing."""
    try:
        save_figure(fig, folder, stem)
    except OSError as exc:
        print(f"figure {stem} not written to {folder}: {exc}")


def error_vs_length(prompts: pd.DataFrame, title: str = "max probability error per prompt"):
    """Each prompt's max probability error against its length, one colour per case, bounds dashed."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(9, 4.2))
    if prompts.empty:
        ax.text(0.5, 0.5, "no scored prompts", ha="center", va="center", transform=ax.transAxes)
        return fig
    cases = list(dict.fromkeys(prompts["case"]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, case in enumerate(cases):
        rows = prompts[prompts["case"] == case]
        err = rows["max_probability_error"].map(_plotted)
        ok = rows["passed"].astype(bool)
        c = colors[i % len(colors)]
        ax.scatter(rows["n_tokens"][ok], err[ok], s=14, color=c, label=f"{case}")
        if (~ok).any():
            ax.scatter(rows["n_tokens"][~ok], err[~ok], s=40, color=c, marker="x", label=f"{case} (failed)")
        for bound in sorted({b for b in rows["bound"] if b is not None and not pd.isna(b)}):
            ax.axhline(bound, color=c, linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_yscale("log")
    ax.axhline(FLOOR, color="0.6", linewidth=0.6)
    ax.annotate("bit-exact (0)", (0.01, FLOOR), xycoords=("axes fraction", "data"), xytext=(0, 3),
                textcoords="offset points", fontsize=7, color="0.4")
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("max |p_backend - p_golden|")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def _plotted(err) -> float:
    """Unscorable (non-finite) prompts sit at the worst possible error, 1; exact zeros at the floor."""
    if err is None or not math.isfinite(err):
        return 1.0
    return max(err, FLOOR)


def control_vs_bound(rows: list, title: str = "control and candidate against the bound"):
    """Per case, the control's and the candidate's max probability error side by side, with the bound."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.8))
    if not rows:
        ax.text(0.5, 0.5, "no cases", ha="center", va="center", transform=ax.transAxes)
        return fig
    x = range(len(rows))
    width = 0.38
    for offset, side, color in ((-width / 2, "control", "tab:blue"), (width / 2, "candidate", "tab:orange")):
        values = [_plotted(getattr(r, f"{side}_error")) for r in rows]
        failed = [getattr(r, f"{side}_status") != "passed" for r in rows]
        bars = ax.bar([i + offset for i in x], values, width, color=color, label=side)
        for bar, bad in zip(bars, failed):
            if bad:
                bar.set_hatch("//")
                bar.set_edgecolor("black")
    for i, r in enumerate(rows):
        if r.bound is not None:
            ax.hlines(r.bound, i - 0.45, i + 0.45, color="black", linewidth=1.5,
                      label="bound" if i == next(j for j, q in enumerate(rows) if q.bound is not None) else None)
    ax.set_yscale("log")
    ax.set_xticks(list(x), [r.case for r in rows], rotation=20, ha="right")
    ax.set_ylabel("max |p_backend - p_golden|")
    ax.set_title(f"{title} (hatched: not passed; exact cases have no bound)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def error_by_bucket(prompts: pd.DataFrame, title: str = "largest error per bucket against its bound"):
    """One panel per backend: each case's largest error in each bucket, and the bound of that bucket."""
    import matplotlib.pyplot as plt

    if prompts.empty:
        fig, ax = plt.subplots(figsize=(9, 3))
        ax.text(0.5, 0.5, "no scored prompts", ha="center", va="center", transform=ax.transAxes)
        return fig
    backends = list(dict.fromkeys(prompts["backend"])) if "backend" in prompts else ["all"]
    buckets = sorted(set(prompts["bucket"]))
    fig, axes = plt.subplots(1, len(backends), figsize=(min(4.5 * len(backends), 14), 3.6), sharey=True,
                             squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, backend in zip(axes[0], backends):
        rows = prompts[prompts["backend"] == backend] if "backend" in prompts else prompts
        for i, case in enumerate(dict.fromkeys(rows["case"])):
            of_case = rows[rows["case"] == case]
            worst = of_case.groupby("bucket")["max_probability_error"].max().map(_plotted)
            failed = of_case.groupby("bucket")["passed"].min() == False  # noqa: E712 (a pandas Series)
            x = [buckets.index(b) for b in worst.index]
            c = colors[i % len(colors)]
            ax.plot(x, worst.values, marker="o", color=c, label=case)
            bad = [xi for xi, b in zip(x, worst.index) if failed[b]]
            ax.scatter(bad, [worst[buckets[xi]] for xi in bad], s=90, marker="x", color="black", zorder=3)
            bounds = of_case.groupby("bucket")["bound"].max()
            bounds = bounds[bounds.notna()]
            # A dash across each bucket: a step line through one bucket would draw nothing.
            xb = [buckets.index(b) for b in bounds.index]
            ax.hlines(bounds.values, [xi - 0.4 for xi in xb], [xi + 0.4 for xi in xb], colors=c,
                      linestyles="--", linewidth=1)
        ax.set_xticks(range(len(buckets)), [str(b) for b in buckets])
        ax.set_xlim(-0.6, len(buckets) - 0.4)
        ax.set_yscale("log")
        ax.set_title(backend)
        ax.set_xlabel("bucket (tokens)")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("max |p_backend - p_golden|")
    fig.suptitle(f"{title} (dashed: bound; x: a failed prompt)", fontsize=10)
    fig.tight_layout()
    return fig


def calibration_samples(entries: list[dict], title: str = "max probability error of each clean variant"):
    """Every clean sample's error per prompt, prompts in bucket order: how far variants scatter around
    each other (the noise the bounds come from), and whether one variant stands apart."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.2))
    if not entries:
        ax.text(0.5, 0.5, "no samples yet", ha="center", va="center", transform=ax.transAxes)
        return fig
    prompts = sorted(entries[0]["sample"]["errors"])
    for e in entries:
        s = e["sample"]
        label = s["variant"] + (f" (launch {s['launch']})" if s["launch"] > 1 else "")
        ax.scatter(range(len(prompts)), [max(s["errors"][p], FLOOR) for p in prompts], s=10, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("prompt")
    ax.set_ylabel("max probability error")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig


def headroom_bars(results: dict, title: str = "headroom: each case's largest error / its bound"):
    """One bar per case with a bound, the line at 1 where a prompt fails; the bar says where the
    bound came from (calibrated or hand-set), so a wide hand-set bound shows as the blind spot it is.
    A decode case has a second bar, "<case> decode": its worst step against that step's own bound
    (kit.core.verdict.decode.worst_decode_step), so that a failing step shows as plainly as a failing first token."""
    import matplotlib.pyplot as plt

    rows = headroom_rows(results)
    fig, ax = plt.subplots(figsize=(9, 0.5 + 0.45 * max(len(rows), 1)))
    if not rows:
        ax.text(0.5, 0.5, "no case with a bound", ha="center", va="center", transform=ax.transAxes)
        return fig
    colors = {BoundKind.CALIBRATED: "tab:blue", BoundKind.HAND_SET: "tab:orange"}
    finite = [r[1] for r in rows if math.isfinite(r[1])]
    right = max(1.1, max(finite, default=1.0) * 1.05)
    for i, (_name, value, kind) in enumerate(rows):
        # An unscorable step (error / bound infinite) reaches the right edge, hatched.
        ax.barh(i, min(value, right), color=colors.get(kind, "0.5"), label=kind,
                hatch=None if math.isfinite(value) else "//")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.axvline(1.0, color="red", linewidth=1)
    ax.set_xlim(0, right)
    ax.set_xlabel("largest error / bound (1: at the bound; decode: the worst step / its own bound)")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8, loc="lower right")
    ax.set_title(title)
    return fig


def headroom_rows(results: dict) -> list[tuple[str, float, BoundKind]]:
    """The headroom figure's bars: (label, error / bound, where the bound came from) per case with a bound, and
    per decode case a "<case> decode" bar of its worst step."""
    rows = []
    for name, r in results.items():
        kind = r.bound_kind
        if r.headroom is not None:
            rows.append((name, r.headroom, kind))
        step = worst_decode_step(r)
        if step is not None:
            rows.append((f"{name} decode", step.ratio, kind))
    return rows


def detectable(results: dict, title: str = "detectable effect: the smallest fault each case catches (x clean error)"):
    """Per case, one bar per fault family: the smallest fault caught in 80 % of the case's clean variants, in
    units of its clean error; a family caught at no magnitude tried is drawn at the largest tried, hatched. A
    case's limit, where its descriptor states one, is a red tick: a bar beyond it makes the case inconclusive."""
    import matplotlib.pyplot as plt

    rows = []
    for name, r in results.items():
        for family, p in sorted(((r.detectable or {}).get("families") or {}).items()):
            tried = p.get("tried") or [[0.0, 0.0, 0.0]]
            clean = (r.detectable or {}).get("clean_error") or 1.0
            value = p["ratio"] if p.get("ratio") is not None else tried[-1][1] / clean
            rows.append((f"{name}: {family}", value, p.get("ratio") is None))
    fig, ax = plt.subplots(figsize=(9, 0.5 + 0.32 * max(len(rows), 1)))
    if not rows:
        ax.text(0.5, 0.5, "no case with a measured detectable effect", ha="center", va="center",
                transform=ax.transAxes)
        return fig
    for i, (_label, value, missed) in enumerate(rows):
        ax.barh(i, value, color="0.75" if missed else "tab:blue", hatch="//" if missed else None)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="0.4", linewidth=1, linestyle=":")
    # Log scale: a float32 case's figures (its clean error is a millionth) are decades beside a bfloat16 case's.
    ax.set_xscale("log")
    ax.set_xlabel("float32 effect of the smallest fault caught / the case's clean error (1: as large as its noise)")
    ax.set_title(title)
    return fig
