"""`parity-kit baseline verify --archive DIR`: each calibration record's backtest run again over an archive.

A lineage entry states the backtest its record passed ("over 42 observations, 0 verdicts flipped"), over the runs
the machine that made it could read. What a reviewer can check is what that backtest protects: run again over the
archive given here, no known-bad run may pass under the record, and a known-good run it would now fail must have
been accepted, with a reason, when the record was made. The other claims of an entry (its file, its bounds, how far
they moved) are re-derived without an archive (kit.descriptor.baselines).

A lineage whose every entry re-derives can still name baselines the gate would refuse (a record of another case at
the head of a chain): what `baseline status` and `check` refuse, `baseline verify` refuses too, by running the
very checks they run (the plan's resolution and the gate's preflight of its inputs), never copies of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kit.baselines.archive import read_archive
from kit.baselines.backtest import backtest
from kit.core.baselines.baselinekind import CALIBRATION
from kit.core.noise.calibration import load_record
from kit.core.errors import BadInput
from kit.core.baselines.lineage import LineageEntry
from kit.core.records.paths import display
from kit.descriptor.load import LoadedDescriptor
from kit.descriptor.plan import resolve
from kit.gate.preflight import check_inputs


def preflight_problems(desc: LoadedDescriptor) -> list[str]:
    """The line `baseline status` or `check` would refuse ``desc`` with (none when both pass): the lineage's
    heads resolved into the cases' baselines as the gate resolves them, and every record a case then lists
    held to the case's inputs by the gate's own preflight."""
    try:
        check_inputs(resolve(desc))
    except BadInput as exc:
        return [str(exc)]
    return []


def backtest_problems(entries: Sequence[LineageEntry], lineage: Path, archives: Sequence[str | Path]) -> list[str]:
    """One line per calibration entry (of ``entries``, kept in the folder ``lineage``) whose record, backtested
    again over ``archives``, would pass a known-bad run, or fail a known-good one that its entry accepted no flips
    for. A run of the archive that cannot be read is passed over, as `baseline make --skip-unreadable` does."""
    problems = []
    roots = [Path(a) for a in archives]
    shown = ", ".join(display(r) for r in roots)
    for entry in (e for e in entries if e.kind is CALIBRATION):
        where = f"lineage entry {display(entry.path or lineage)}"
        try:
            record = load_record((lineage / entry.file).resolve())
        except BadInput as exc:
            problems.append(f"{where}: {exc}")
            continue
        again = backtest(record, read_archive(roots, entry.case), skip_unreadable=True)
        problems += [f"{where}: backtest over {shown}: {f.source}: known bad ({f.why}), would pass under its record"
                     for f in again.refusals]
        if not (entry.backtest or {}).get("accepted"):
            problems += [f"{where}: backtest over {shown}: {f.source}: known good ({f.why}), would fail under its "
                         "record, and its entry accepted no flips" for f in again.needs_acceptance]
    return problems
