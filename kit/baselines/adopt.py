"""`parity-kit baseline adopt`: give every baseline a descriptor lists a first lineage entry.

Baselines made before the descriptor kept a lineage have none; the first `baseline make` that supersedes one
writes its entry on the way, but until then `baseline log` cannot show where they came from. Adopting writes
what each baseline's own file says of it (its command, its runtime, when it was made, its bounds), marked as
made before backtests, once; a second adoption finds every entry there and writes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from kit.calibrate.run import reproducing_command
from kit.core.baselines.baselinekind import CALIBRATION, POWER, BaselineKind, GoldenKind, of_golden
from kit.core.noise.calibration import CalibrationRecord, load_record, measured_on
from kit.core.errors import BadInput
from kit.backends.registry import golden_runtime
from kit.core.baselines.golden import load_golden
from kit.core.records.jsonio import sha256_file
from kit.core.baselines.lineage import FIRST_REASON, LineageEntry, entry_of, write_entry
from kit.core.noise.power import PowerRecord, read_power
from kit.core.records import paths
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve


def first_entry(descriptor: str, lineage: Path, kind: BaselineKind, case: str, baseline: Path,
                reason: str | None = None) -> LineageEntry:
    """The first lineage entry of a baseline made before baselines kept one: what its own file says of it."""
    if not kind.in_lineage:
        raise BadInput(f"{paths.display(baseline)}: a {kind} keeps no lineage")
    if kind is POWER:  # its chain is the class of hardware of the calibration record it was measured against
        power = PowerRecord.from_dict(read_power(baseline), baseline)
        return LineageEntry(descriptor, kind, case, sha256_file(baseline), os.path.relpath(baseline, lineage),
                            power.measured_on, None, reason or FIRST_REASON, tuple(reproducing_command(power.command)),
                            power.created_at)
    if not isinstance(kind, GoldenKind):  # a calibration record: the one other kind a lineage keeps
        record: CalibrationRecord = load_record(baseline)
        return LineageEntry(descriptor, kind, case, record.sha256, os.path.relpath(baseline, lineage),
                            measured_on({"fingerprint": record.fingerprint}) or "not recorded", None,
                            reason or FIRST_REASON, tuple(reproducing_command(record.command)), record.created_at,
                            dict(record.bounds))
    golden = load_golden(baseline)
    prov = golden.provenance
    runtime = golden_runtime(prov) if kind.per_runtime else "any"
    return LineageEntry(descriptor, kind, case, golden.sha256, os.path.relpath(baseline, lineage),
                        runtime or str(prov.get("hardware") or "not recorded"), None, reason or FIRST_REASON,
                        tuple(str(prov.get("command", "not recorded")).split()), str(prov.get("created_at", "")))



def adopt(descriptor: str | Path, reason: str | None = None) -> list[Path]:
    """Write a first entry for every listed calibration record and golden that has none; the written files."""
    plan = resolve(load_descriptor(descriptor))
    folders = plan.outline.baseline_folders
    if folders is None:
        raise BadInput(f"{paths.display(plan.path)}: no [baselines] table to keep a lineage in: add `[baselines]` "
                       "with `lineage = \"../baselines\"`")
    entries = plan.outline.lineage
    written = []
    for name, golden in plan.goldens.items():
        for f in golden.files:
            entry = first_entry(plan.name, folders["lineage"], of_golden(golden.kind), name, f, reason)
            if entry_of(entries, entry.baseline) is None:
                written.append(write_entry(folders["lineage"], entry))
    for case in plan.cases.values():
        for record in case.records:
            assert record.path is not None  # loaded from the descriptor's files
            if entry_of(entries, record.sha256) is None:
                written.append(write_entry(folders["lineage"], first_entry(plan.name, folders["lineage"],
                                                                           CALIBRATION, case.name, record.path,
                                                                           reason)))
    return written
