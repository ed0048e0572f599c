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
from kit.core.calibration import CalibrationRecord, load_record, measured_on
from kit.core.errors import BadInput
from kit.core.golden import golden_runtime, load_golden
from kit.core.lineage import FIRST_REASON, LineageEntry, entry_of, write_entry
from kit.core import paths
from kit.descriptor.load import LoadedDescriptor, load_descriptor
from kit.descriptor.schema import golden_kind


def first_entry(desc: LoadedDescriptor, lineage: Path, kind: str, case: str, baseline: Path,
                reason: str | None = None) -> LineageEntry:
    """The first lineage entry of a baseline made before baselines kept one: what its own file says of it."""
    if kind == "calibration":
        record: CalibrationRecord = load_record(baseline)
        return LineageEntry(kind, case, record.sha256, os.path.relpath(baseline, lineage),
                            measured_on({"fingerprint": record.fingerprint}) or "not recorded", None,
                            reason or FIRST_REASON, tuple(reproducing_command(record.command)), record.created_at,
                            dict(record.bounds))
    golden = load_golden(baseline)
    prov = golden.provenance
    runtime = golden_runtime(prov) if kind == "exact-golden" else "any"
    return LineageEntry(kind, case, golden.sha256, os.path.relpath(baseline, lineage),
                        runtime or str(prov.get("hardware") or "not recorded"), None, reason or FIRST_REASON,
                        tuple(str(prov.get("command", "not recorded")).split()), str(prov.get("created_at", "")))



def adopt(descriptor: str | Path, reason: str | None = None) -> list[Path]:
    """Write a first entry for every listed calibration record and golden that has none; the written files."""
    desc = load_descriptor(descriptor)
    folder = desc.lineage_folder()
    if folder is None:
        raise BadInput(f"{paths.display(desc.path)}: no [baselines] table to keep a lineage in: add `[baselines]` "
                       "with `lineage = \"../baselines\"`")
    entries = desc.lineage()
    written = []
    for name in desc.doc.goldens:
        kind = f"{golden_kind(name)}-golden"
        for f in desc.golden_files(name):
            entry = first_entry(desc, folder, kind, name, f, reason)
            if entry_of(entries, entry.baseline) is None:
                written.append(write_entry(folder, entry))
    for name, c in desc.cases.items():
        if c.calibration is None:
            continue
        for record in desc.calibration_records(name, c):
            assert record.path is not None
            if entry_of(entries, record.sha256) is None:
                written.append(write_entry(folder, first_entry(desc, folder, "calibration", name, record.path,
                                                               reason)))
    return written
