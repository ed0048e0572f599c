"""The localizer's figure: each prompt's per-point difference from the reference beside the clean run's.

The clean run's difference is the noise at each point; the dotted line is k times it, the threshold a
point must pass to leave the noise, and the named point is marked.
"""

from __future__ import annotations

import math
from pathlib import Path

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records import resultcheck
from kit.core.records.recordcheck import Wrong, listing, mapping, number, text

FLOOR = 1e-12  # a bit-exact clean run has difference 0: keep it on a log axis
FIGURE = "localize-curve"  # figures/<FIGURE>.png and .svg beside localize.json, for `report --markdown`


def load(localize_json: str | Path | None = None) -> tuple[dict, Path]:
    """A localize.json and the folder it is in: the one given, or with None the newest localize run's under the
    project's runs/ (kit.core.records.paths.runs_root), never one in the folder JupyterLab starts the kernel in. A path
    that holds none is refused in one line."""
    import json

    from kit.views.summary import latest_run

    if localize_json is None:
        try:
            path = latest_run(kind="localize") / rundir.LOCALIZE
        except FileNotFoundError as exc:
            raise BadInput(f"{exc} (or set localize_json to a localize.json)") from None
    else:
        path = Path(localize_json).expanduser()
        if path.is_dir():
            path = path / rundir.LOCALIZE
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BadInput(f"localize_json {path}: cannot be read as a localize.json "
                       f"({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("localizations"), list):
        raise BadInput(f"localize_json {path}: not a localize.json written by `parity-kit localize`")
    return doc, path.resolve().parent


def curve(doc: dict, title: str | None = None):
    """The curves of a localize.json (kit.localize.run)."""
    import matplotlib.pyplot as plt

    locs = doc["localizations"]
    labels = [p["point"] for p in locs[0]["points"]]
    x = list(range(len(labels)))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels)), 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, loc in enumerate(locs):
        c = colors[i % len(colors)]
        metric = loc["metric"]
        cand = [max(p["candidate"][metric], FLOOR) for p in loc["points"]]
        clean = [max(p["clean"][metric], FLOOR) for p in loc["points"]]
        ax.plot(x, cand, marker="o", color=c, label=f"{loc['prompt']}: candidate")
        ax.plot(x, clean, marker=".", linestyle="--", color=c, alpha=0.6, label=f"{loc['prompt']}: clean run (noise)")
        ax.plot(x, [max(p["threshold"], FLOOR) for p in loc["points"]], linestyle=":", color=c, alpha=0.6,
                label=f"{loc['prompt']}: {loc['k']:g} x noise")
        first = loc["first_divergent"]
        if first:
            at = labels.index(first["label"])
            ax.scatter([at], [cand[at]], s=160, facecolors="none", edgecolors="red", linewidths=2, zorder=5)
    if doc.get("first_divergent"):
        ax.axvline(labels.index(doc["first_divergent"]["label"]), color="red", linewidth=1, alpha=0.5)
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel(f"{locs[0]['metric']} against float32 reference")
    ax.set_title(title or f"{doc['case']}: {doc['verdict']}")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def save_curve(fig, folder: str | Path) -> None:
    """The curve as ``folder/figures/localize-curve.png`` and ``.svg``; a folder opened read-only keeps its
    notebook and only misses the files."""
    from kit.views import plots

    plots.save_figure_or_say(fig, Path(folder) / rundir.FIGURES, FIGURE)


def markdown_report(folder: str | Path) -> str:
    """A localize directory for an issue comment: the verdict, each localized prompt's points (its difference
    from the reference beside the clean run's) and the curve, linked where the folder is uploaded."""
    from kit.gate.report import md

    folder = Path(folder)
    doc = read_localize(folder / rundir.LOCALIZE)
    lines = [f"## Localize `{md(doc['case'])}` ({md(doc['backend'])}): **{md(doc['verdict'])}**", "",
             f"Candidate {md(doc['model'], code=True)}; reference {md(doc['reference'])}; noise: "
             f"{md(doc['clean'])}; a point leaves the noise above {doc['k']:g} x it.", ""]
    for loc in doc["localizations"]:
        lines += [f"**{md(loc['prompt'], code=True)}**: {md(loc['verdict'])}", "",
                  f"| point | candidate {loc['metric']} | clean {loc['metric']} | ratio | left the noise |",
                  "| --- | ---: | ---: | ---: | --- |"]
        lines += [f"| {md(p['point'])} | {p['candidate'][loc['metric']]:.4g} | {p['clean'][loc['metric']]:.4g} | "
                  f"{_ratio(p['ratio'])} | {'**yes**' if p['diverged'] else 'no'} |" for p in loc["points"]]
        lines.append("")
    if (folder / rundir.FIGURES / f"{FIGURE}.png").is_file():
        figures = rundir.FIGURES
        lines.append(f"[![the per-point curves]({figures}/{FIGURE}.png)]({figures}/{FIGURE}.svg)")
    return "\n".join(lines).rstrip() + "\n"


def _ratio(ratio: float | None) -> str:
    # localize.json writes an infinite ratio (a bit-exact clean run, a candidate that is not) as null.
    return "inf" if ratio is None else f"{ratio:.3g}"


def read_localize(path: Path) -> dict:
    """A localize.json as the report reads it, or one line naming the file and the first key it lacks (a damaged
    file, or one an older kit wrote)."""
    return resultcheck.read_checked(path, check_localize)


def check_localize(doc: object) -> None:
    """Raises Wrong at the first value the report needs that ``doc`` does not hold as localize.json writes it."""
    top = _keys(doc, "", ("case", "backend", "verdict", "model", "reference", "clean", "k", "localizations"))
    for key in ("case", "backend", "verdict", "model", "reference", "clean"):
        text(top[key], key)
    number(top["k"], "k", 1.0, math.inf)
    for i, loc in enumerate(listing(top["localizations"], "localizations")):
        _check_localization(loc, f"localizations[{i}]")


def _check_localization(value: object, key: str) -> None:
    loc = _keys(value, key, ("prompt", "verdict", "metric", "points"))
    for part in ("prompt", "verdict", "metric"):
        text(loc[part], f"{key}.{part}")
    for i, item in enumerate(listing(loc["points"], f"{key}.points")):
        where = f"{key}.points[{i}]"
        point = _keys(item, where, ("point", "candidate", "clean", "ratio", "diverged"))
        text(point["point"], f"{where}.point")
        for run in ("candidate", "clean"):
            number(mapping(point[run], f"{where}.{run}").get(loc["metric"]), f"{where}.{run}.{loc['metric']}",
                   0.0, math.inf)
        if point["ratio"] is not None:
            number(point["ratio"], f"{where}.ratio", 0.0, math.inf)
        if not isinstance(point["diverged"], bool):
            raise Wrong(f"{where}.diverged", "expected true or false", point["diverged"])


def _keys(value: object, key: str, required: tuple[str, ...]) -> dict:
    """``value`` as an object holding at least ``required`` (more is a newer kit's, and is left alone)."""
    doc = mapping(value, key)
    missing = next((k for k in required if k not in doc), None)
    if missing is not None:
        raise Wrong(f"{key}.{missing}" if key else missing, "missing")
    return doc
