"""The localizer's figure: each prompt's per-point difference from the reference beside the clean run's.

The clean run's difference is the noise at each point; the dotted line is k times it, the threshold a
point must pass to leave the noise, and the named point is marked.
"""

from __future__ import annotations

FLOOR = 1e-12  # a bit-exact clean run has difference 0: keep it on a log axis


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
