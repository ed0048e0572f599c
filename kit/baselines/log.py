"""`parity-kit baseline log`: each case's chain of baselines, oldest first, with why each one was made.

A bound that only ever widens, a golden re-made three times in a month, a record made on a host nobody can
name: these read from the chain, so the chain is shown as it is kept, once its claims have been re-derived from
the records (`LoadedDescriptor.baselines.verify_lineage`): each bucket's move as a ratio, and a loosening with the
reason its command gave.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Sequence

from kit.core.baselines.baselinekind import BaselineKind
from kit.core.baselines.lineage import LineageEntry, bound_changes, bound_moves, chain, heads
from kit.core.baselines.lineageclaims import accepted_looser


@dataclass(frozen=True)
class Chain:
    """One case's baselines of one kind on one runtime, oldest first."""

    kind: BaselineKind
    case: str
    runtime: str
    steps: tuple[LineageEntry, ...]

    def to_dict(self) -> dict:
        """The chain as `baseline log --json` prints it: each entry with its digest, and how the bounds moved
        along it."""
        return {"kind": self.kind.name, "case": self.case, "runtime": self.runtime,
                "bounds_moved": bound_moves(self.steps).text,
                "steps": [{**s.to_dict(), "sha256": s.sha256} for s in self.steps]}


def chains(entries: Sequence[LineageEntry], cases: Sequence[str] | None = None) -> list[Chain]:
    """Every chain of ``entries`` (of ``cases`` only, when given), sorted by case, kind and runtime."""
    keys = sorted({(e.case, e.kind) for e in entries if cases is None or e.case in cases},
                  key=lambda k: (k[0], k[1].name))
    out = []
    for case, kind in keys:
        for runtime, head in sorted(heads(entries, kind, case).items()):
            out.append(Chain(kind, case, runtime, tuple(chain(entries, head))))
    return out


def chain_lines(c: Chain) -> list[str]:
    """A chain as text: a heading, then one line per baseline (oldest first) and what it changed."""
    # A chain of baselines with bounds (calibration records) says how they moved; a golden's or a power record's
    # has none to say.
    moved = f", bounds {bound_moves(c.steps).text}" if any(s.bounds for s in c.steps) else ""
    lines = [f"{c.case}: {c.kind} on {c.runtime} ({len(c.steps)} baseline{'s' if len(c.steps) != 1 else ''}{moved})"]
    before: LineageEntry | None = None
    for step in c.steps:
        tested = _backtest_text(step)
        change = _bounds_change(before, step)
        lines.append(f"  {step.created_at[:19]}  {step.file}  {step.reason}")
        lines.append(f"      by `{shlex.join(step.command)}`; {tested}{change}")
        before = step
    return lines


def _backtest_text(step: LineageEntry) -> str:
    bt = step.backtest
    if bt is None:
        return "no backtest (made before baselines kept one)"
    gate = f"evidence gate {bt['evidence_gate']}" if bt.get("evidence_gate") else ""
    if "replayed" not in bt:  # a golden: judged bit for bit by the evidence gate, no bounds to replay
        return gate or "no backtest"
    accepted = f", flips accepted: {bt['accepted']}" if bt.get("accepted") else ""
    tested = f"backtest over {bt['replayed']} observations, {bt.get('flips', 0)} verdicts flipped{accepted}"
    return f"{tested}; {gate}" if gate else tested


def _bounds_change(before: LineageEntry | None, step: LineageEntry) -> str:
    if before is None or not step.bounds:
        return f"; bounds {dict(step.bounds)}" if step.bounds else ""
    moved = [m.text for m in bound_changes(before.bounds, step.bounds)]
    looser = f" (looser, because: {why})" if (why := accepted_looser(step)) else ""
    return f"; bounds moved: {', '.join(moved)}{looser}" if moved else "; bounds unchanged"
