"""Which baseline each case stands on here, and whether it was made here (`parity-kit baseline status`, and
every run's manifest and summary).

Every verdict rests on a case's baselines: its golden (exact or semantic) and, for a calibrated case, the
record its bounds come from. A baseline holds on the runtime that made it; on another host a case either
uses it by a rule the descriptor states (a fallback, always named), or has none and cannot be judged. This
module answers that for every case of a plan, before anything runs, so that the gap is seen and closed
(`parity-kit baseline make`) instead of discovered as a red gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kit.core.baselines.baselinekind import BaselineRow, LineageText, Standing, of_case
from kit.core.noise.calibration import CalibrationRecord
from kit.core.baselines.lineage import LineageEntry, bound_moves, chain, entry_of
from kit.core.records.spec import CaseSpec
from kit.descriptor.plan import Plan

# The standing and the row are the baseline kinds' (kit.core.baselines.baselinekind); named here too, where callers
# meet them.
__all__ = ["BaselineRow", "Standing", "baseline_rows", "gaps", "plan_rows", "table_markdown"]


def baseline_rows(spec: CaseSpec, entries: Sequence[LineageEntry] = (),
                  records: Sequence[CalibrationRecord] = ()) -> list[BaselineRow]:
    """The baselines one resolved case uses on this host (a GPU case's hardware is asked of nvidia-smi);
    ``records``: the records it lists, to say when the chosen one was made."""
    lineage: LineageText = lambda sha256: _lineage_text(entries, sha256)  # noqa: E731
    made_at = next((r.created_at for r in records if spec.calibration is not None
                    and r.sha256 == spec.calibration.get("sha256")), None)
    return [kind.stand(spec, lineage, made_at) for kind in of_case(spec)]


def plan_rows(plan: Plan, entries: Sequence[LineageEntry] | None = None) -> list[BaselineRow]:
    """Every selected case's rows; ``entries``: the lineage to date them by (default: the plan's own)."""
    entries = plan.outline.lineage if entries is None else entries
    return [row for case in plan.cases.values() for row in baseline_rows(case.spec, entries, case.records)]


def _lineage_text(entries: Sequence[LineageEntry], sha256: str | None) -> str | None:
    """Where a baseline stands in its lineage; said plainly when it has none where its descriptor keeps one (a
    file listed by hand, never backtested), and when its entry predates backtests."""
    entry = entry_of(entries, sha256) if sha256 else None
    if entry is None:
        return "no lineage entry: listed by hand, never backtested" if entries else None
    steps = chain(entries, entry)
    untested = ", made before backtests" if entry.backtest is None else ""
    if len(steps) == 1:
        return f"first of its chain{untested}"
    return f"{_ordinal(len(steps))} of its chain{untested}, bounds {bound_moves(steps).text}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def gaps(rows: Sequence[BaselineRow]) -> list[BaselineRow]:
    """The rows a `baseline make` closes: missing, and fallen back (a baseline of this runtime's own is better)."""
    return [r for r in rows if r.standing in (Standing.MISSING, Standing.FALLBACK)]


def table_markdown(rows: Sequence[BaselineRow]) -> str:
    """The rows as a Markdown table (for a summary, an issue or a terminal without rich)."""
    lines = ["| case | baseline | standing | made on | made at | file | lineage |", "|" + " --- |" * 7]
    for r in rows:
        cells = [r.case, r.kind.name, f"**{r.standing}**: {r.rule}", r.made_on or "", (r.made_at or "")[:10],
                 f"`{Path(r.file).name}`" if r.file else "", r.lineage or ""]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
