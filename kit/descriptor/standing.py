"""Which baseline each case stands on here, and whether it was made here (`parity-kit baseline status`, and
every run's manifest and summary).

Every verdict rests on a case's baselines: its golden (exact or semantic) and, for a calibrated case, the
record its bounds come from. A baseline holds on the runtime that made it; on another host a case either
uses it by a rule the descriptor states (a fallback, always named), or has none and cannot be judged. This
module answers that for every case of a plan, before anything runs, so that the gap is seen and closed
(`parity-kit baseline make`) instead of discovered as a red gate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from kit.core import paths
from kit.core.calibration import CalibrationRecord, hardware_change, measured_on
from kit.core.golden import load_golden
from kit.core.lineage import LineageEntry, bound_moves, chain, entry_of
from kit.core.spec import CaseSpec
from kit.descriptor.plan import Plan

# How a case stands on one baseline here.
MATCH = "matches"  # made on this runtime (or, for a semantic golden, judged within bounds on any)
FALLBACK = "falls back"  # made elsewhere, used here by a rule the descriptor states
MISSING = "missing"  # none this host may use: the case cannot be judged here
HAND_SET = "hand-set"  # a bound written in the descriptor, no measurement behind it
IN_KERNEL = "in-kernel"  # compared with its own reference in the same kernel: no file to hold


@dataclass(frozen=True)
class BaselineRow:
    """One baseline of one case, as this host would use it."""

    case: str
    kind: str  # exact golden, semantic golden, calibration, bound, reference
    standing: str  # one of MATCH, FALLBACK, MISSING, HAND_SET, IN_KERNEL
    rule: str  # why it stands so, in words
    file: str | None = None
    sha256: str | None = None
    made_on: str | None = None
    made_at: str | None = None
    lineage: str | None = None  # "first of its chain", "3rd of its chain, bounds moved 2 times (2 wider)"
    remedy: str | None = None  # what makes it, where it is missing or falls back

    def to_dict(self) -> dict:
        return asdict(self)


def case_rows(spec: CaseSpec, entries: Sequence[LineageEntry] = (),
              records: Sequence[CalibrationRecord] = ()) -> list[BaselineRow]:
    """The baselines one resolved case uses on this host (a GPU case's hardware is asked of nvidia-smi);
    ``records``: the records it lists, to say when the chosen one was made."""
    rows = [_golden_row(spec, entries)]
    if spec.calibration is not None:
        made_at = next((r.created_at for r in records if r.sha256 == spec.calibration.get("sha256")), None)
        rows.append(_calibration_row(spec, entries, made_at))
    elif spec.golden_kind == "semantic":
        bounds = spec.bucket_bounds or {}
        said = f"bound = {spec.bound:g}" if spec.bound is not None else f"bucket_bounds = {dict(bounds)}"
        rows.append(BaselineRow(spec.name, "bound", HAND_SET, f"{said}, set by hand in the descriptor",
                                remedy=f"parity-kit calibrate --case {spec.name}"))
    return rows


def plan_rows(plan: Plan, entries: Sequence[LineageEntry] | None = None) -> list[BaselineRow]:
    """Every selected case's rows; ``entries``: the lineage to date them by (default: the plan's own)."""
    entries = plan.outline.lineage if entries is None else entries
    return [row for case in plan.cases.values() for row in case_rows(case.spec, entries, case.records)]


def _golden_row(spec: CaseSpec, entries: Sequence[LineageEntry]) -> BaselineRow:
    if spec.reference is not None:
        return BaselineRow(spec.name, "reference", IN_KERNEL,
                           f"compared bit for bit with its reference ({spec.reference.get('model')}, "
                           f"{spec.reference.get('options')}) computed in the same kernel")
    kind = f"{spec.golden_kind} golden"
    if spec.no_baseline:
        return BaselineRow(spec.name, kind, MISSING, spec.no_baseline.split(";")[0], made_on=None,
                           remedy=_command_in(spec.no_baseline))
    golden = load_golden(spec.golden_path)
    prov = golden.provenance
    if spec.golden_kind == "exact":
        rule = f"made on this runtime ({spec.runtime}); an exact golden never falls back"
    else:
        rule = "judged within bounds, so it holds on any runtime"
    return BaselineRow(spec.name, kind, MATCH, rule, paths.display(golden.path), golden.sha256,
                       str(prov.get("runtime") or prov.get("hardware") or "not recorded"), prov.get("created_at"),
                       _lineage_text(entries, golden.sha256))


def _calibration_row(spec: CaseSpec, entries: Sequence[LineageEntry], made_at: str | None) -> BaselineRow:
    cal = spec.calibration or {}
    where = paths.display(cal["path"]) if cal.get("path") else None
    made_on = measured_on(cal) or "not recorded"
    lineage = _lineage_text(entries, cal.get("sha256"))
    change = hardware_change(cal, spec.options)
    remedy = f"parity-kit baseline make --case {spec.name} --reason \"...\""
    if change is None:
        return BaselineRow(spec.name, "calibration", MATCH, f"noise measured on this class of hardware ({made_on})",
                           where, cal.get("sha256"), made_on, made_at, lineage)
    measured, here = change
    fallback = cal.get("fallback") or {}
    if fallback.get("rule") == "device":
        return BaselineRow(spec.name, "calibration", FALLBACK,
                           f"fallback order {fallback.get('order')} took it by its rule \"device\": noise measured on "
                           f"{measured}, this host is {here}; its bounds apply, its drift test does not", where,
                           cal.get("sha256"), made_on, made_at, lineage, remedy)
    if "hardware" in cal.get("accept", []):
        return BaselineRow(spec.name, "calibration", FALLBACK,
                           f"accept_noise_changes = [\"hardware\"]: noise measured on {measured}, this host is "
                           f"{here}; its bounds apply, its drift test does not", where, cal.get("sha256"), made_on,
                           made_at, lineage, remedy)
    return BaselineRow(spec.name, "calibration", MISSING,
                       f"no record measured on {here} (listed: {measured}), and the case accepts no hardware change",
                       where, cal.get("sha256"), made_on, made_at, lineage, remedy)


def _command_in(message: str) -> str | None:
    """The command a "no baseline for this runtime" message names (between backticks)."""
    parts = message.split("`")
    return parts[1] if len(parts) > 2 else None


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
    return [r for r in rows if r.standing in (MISSING, FALLBACK)]


def table_markdown(rows: Sequence[BaselineRow]) -> str:
    """The rows as a Markdown table (for a summary, an issue or a terminal without rich)."""
    lines = ["| case | baseline | standing | made on | made at | file | lineage |", "|" + " --- |" * 7]
    for r in rows:
        cells = [r.case, r.kind, f"**{r.standing}**: {r.rule}", r.made_on or "", (r.made_at or "")[:10],
                 f"`{Path(r.file).name}`" if r.file else "", r.lineage or ""]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
