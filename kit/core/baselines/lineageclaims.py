"""What a calibration record's lineage entry claims, re-derived from the records themselves.

A new record reaches the gate as two files, the record and its entry, so the entry's word is what a reviewer of
a pin PR would otherwise take: its bounds, and how far they moved from the record it supersedes. Neither is
taken on its word here. The bounds an entry states must be its record's own (re-derived from the record's
samples when it is loaded), and a record whose bounds are looser than its parent's by more than the parent's own
margin (the parent's bound less its largest clean error, per bucket) is refused, unless the command that made
it said so with ``--accept-looser REASON``: loosening is allowed, never silent. Nor is it allowed in steps: a record
is also held to the record its chain's bounds were last agreed on (the chain's first, or the latest one whose
command accepted looser bounds), so six records each loosening within its parent's margin cannot take a bound four
times wider without one of them saying why. And a record heads only a chain of the class of hardware it measured:
as the head of another class's chain, every host of that class would use bounds it never measured, without the
drift test of its own class.

Stdlib only, like every record format of kit.core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from kit.core.noise.calibration import CalibrationRecord, measured_on
from kit.core.baselines.lineage import BoundMove, LineageEntry, normal_runtime

ACCEPT_LOOSER = "--accept-looser"  # the flag of `parity-kit baseline make` that lets a record loosen its bounds


@dataclass(frozen=True)
class Movement(BoundMove):
    """One bucket's bound, from the parent record to its successor, with the parent's own margin."""

    margin: float = 0.0  # the parent's bound less its largest clean error in the bucket

    @property
    def beyond_margin(self) -> bool:
        """Looser than the parent's bound by more than the parent's own margin."""
        return self.after > self.before + self.margin + 1e-12


def movements(parent: CalibrationRecord, head: CalibrationRecord) -> list[Movement]:
    """Each bucket both records bound, in the parent's order."""
    out = []
    for bucket, stats in parent.buckets.items():
        if bucket in head.buckets:
            before = float(stats["bound"])
            out.append(Movement(bucket, before, float(head.buckets[bucket]["bound"]),
                                before - float(stats["largest"])))
    return out


def movement_text(moves: Sequence[Movement]) -> str:
    """The buckets that moved, as ratios ("bucket 256 0.015 -> 0.061 (4.07x)"); "bounds unchanged" when none did."""
    moved = [m.text for m in moves if m.after != m.before]
    return "; ".join(moved) if moved else "bounds unchanged"


def bounds_claim(entry: LineageEntry, record: CalibrationRecord) -> str | None:
    """What is wrong with the bounds ``entry`` states for ``record`` (None: they are the record's own)."""
    stated, own = dict(entry.bounds), record.bounds
    if set(stated) == set(own) and all(math.isclose(stated[b], own[b], rel_tol=1e-12) for b in own):
        return None
    return f"states bounds {_shown(stated)}, but its record's own, from its samples, are {_shown(own)}"


def accepted_looser(entry: LineageEntry) -> str | None:
    """The reason the command that made ``entry`` gave with ``--accept-looser`` (None: it gave none, or gave
    something that is no reason: ``reason_problem``)."""
    command = list(entry.command)
    for i, word in enumerate(command):
        given = command[i + 1] if word == ACCEPT_LOOSER and i + 1 < len(command) else (
            word.split("=", 1)[1] if word.startswith(ACCEPT_LOOSER + "=") else None)
        if given is not None and reason_problem(given) is None:
            return given
    return None


def reason_problem(reason: str) -> str | None:
    """Why ``reason`` (given with --reason, --accept-looser, --accept-flips) is no reason, or None: a reason is
    words, not nothing, and not the next flag of the command line (``--accept-looser --case x``)."""
    stripped = reason.strip()
    if not stripped:
        return "empty"
    if stripped.startswith("-"):
        return f"{stripped!r} is a flag, not a reason"
    if not any(c.isalpha() for c in stripped):
        return f"{stripped!r} says nothing in words"
    return None


def loosening(moves: Sequence[Movement], whose: str = "its parent's") -> str | None:
    """The buckets loosened beyond the margin of the record the moves start from (``whose``), in words (None:
    none)."""
    beyond = [m for m in moves if m.beyond_margin]
    if not beyond:
        return None
    return "; ".join(f"{m.text}, beyond {whose} margin of {m.margin:.2g}" for m in beyond)


def agreed(chain: Sequence[LineageEntry]) -> LineageEntry:
    """Of a chain (oldest first, up to a new record's parent), the entry whose bounds the new record is held to
    beside its parent's: the latest whose command accepted looser bounds with a reason (a reviewer read why), else
    the chain's first. A loosening beyond its margin needs a reason in the entry that crosses it, however small
    each step to it was."""
    return next((e for e in reversed(chain) if accepted_looser(e) is not None), chain[0])


def class_claim(entry: LineageEntry, record: CalibrationRecord) -> str | None:
    """What is wrong with the class of hardware ``entry`` keys its chain by, for ``record`` (None: the class the
    record measured its noise on, or a record that names none)."""
    measured = measured_on({"fingerprint": record.fingerprint})
    if measured is None or normal_runtime(measured) == normal_runtime(entry.runtime):
        return None
    return (f"puts its record in the chain of {normal_runtime(entry.runtime)}, but the record measured its noise on "
            f"{measured}: a record heads only a chain of the class it measured (every host of "
            f"{normal_runtime(entry.runtime)} would use bounds measured elsewhere, without its drift test)")


def _shown(bounds: Mapping[str, float]) -> str:
    return "{" + ", ".join(f"{b}: {v:g}" for b, v in bounds.items()) + "}"
