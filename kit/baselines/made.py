"""What one `baseline make` works with, and each baseline it makes: shared by its makers (kit.baselines.make for
exact goldens and calibration records, kit.baselines.makepower for power records), so that each maker sees what
the ones before it made (a power record is measured against the calibration record made before it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from kit.baselines.backtest import Backtest
from kit.baselines.steps import StepClock
from kit.core.baselines.baselinekind import BaselineKind
from kit.core.baselines.lineageclaims import Movement
from kit.descriptor.load import LoadedDescriptor
from kit.descriptor.plan import Plan


@dataclass(frozen=True)
class Made:
    """One baseline made for this runtime, where it waits until blessed, and what it would supersede."""

    kind: BaselineKind  # a makeable one: a calibration record, an exact golden, a power record
    case: str  # the case (a record) or the [goldens] entry (a golden)
    runtime: str  # where it holds: a golden's runtime key, a record's (and its power record's) class of hardware
    staged: Path | None
    superseded: Path | None = None  # the same runtime's baseline in use now, if any
    error: str | None = None
    backtest: Backtest | None = None
    bounds: dict[str, float] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    moves: list[Movement] = field(default_factory=list)  # each bucket's bound against the record it supersedes
    # Each bucket's bound against the record its chain last agreed on (the first, or the last accepted looser), when
    # that is not the one it supersedes, and that record: small steps add up, and are judged against it.
    drift: list[Movement] = field(default_factory=list)
    agreed: Path | None = None
    reused: bool = False  # staged by an earlier call of this make (--resume), not made again


@dataclass
class Making:
    """One call of a make: the descriptor and the selected cases, the working directory, the command its baselines
    keep, the clock of its steps, the fault families its power records measure (None: ``--no-power``), and what it
    has made so far."""

    desc: LoadedDescriptor
    plan: Plan
    work_dir: Path
    command: list[str]
    clock: StepClock
    families: Mapping[str, tuple[str, ...]] | None
    made: list[Made] = field(default_factory=list)

    def made_of(self, kind: BaselineKind, case: str) -> Made | None:
        """What this make staged of ``kind`` for ``case`` (None: nothing, or it failed)."""
        return next((m for m in self.made if m.kind is kind and m.case == case and m.staged is not None), None)
