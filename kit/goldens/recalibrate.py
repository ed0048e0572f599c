"""Calibration records remade for a regenerated golden.

A record's samples are errors against one golden, which it names by digest; a new golden makes every record of
the cases judged against it unfit, so a regen that checked with the old records could never succeed, and one
that kept their bounds would judge the new golden by noise nobody measured against it. Regen therefore measures
this host's record of each calibrated case again, against the new golden, before it checks; the check then
judges the new golden with bounds measured on it. A record of another class of hardware can only be measured on
a host of that class: those are named for the report, never carried over.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from kit.calibrate.run import calibrate_case
from kit.core.records import paths
from kit.core.noise.calibration import CalibrationRecord, measured_on, record_for_host
from kit.descriptor.load import LoadedDescriptor
from kit.descriptor.plan import resolve
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)


@dataclass
class Recalibrated:
    """One calibrated case's records after a regen: this host's measured again, the others named."""

    case: str
    old: Path  # this host's record, made for the old golden
    record: Path | None  # the new record, in the regen directory (None when measuring it failed)
    error: str | None
    elsewhere: list[str] = field(default_factory=list)  # classes of hardware whose records must be re-made there
    placed: Path | None = None  # the new record beside the old one, once the new golden is accepted


def stale_cases(listed: Mapping[str, Sequence[CalibrationRecord]],
                golden_sha256: str) -> dict[str, list[CalibrationRecord]]:
    """The cases of ``listed`` (each calibrated case with every record it lists: kit.descriptor.plan's
    calibration_lists) whose records were made for another golden than ``golden_sha256``."""
    return {name: list(records) for name, records in listed.items()
            if any(r.inputs.get("golden_sha256") != golden_sha256 for r in records)}


def recalibrate(desc: LoadedDescriptor, stale: dict[str, list[CalibrationRecord]], work_dir: Path,
                command: list[str]) -> dict[str, Recalibrated]:
    """Measure each stale case's record again on this host against ``desc``'s golden (the new one), into
    ``work_dir``/calibrations; the samples and notebooks stay in ``work_dir``/calibrate."""
    run_dir = paths.make_dir(work_dir / "calibrate", "regen calibration directory")
    to = paths.make_dir(work_dir / "calibrations", "regen calibrations directory")
    plan = resolve(desc, list(stale), resolve_calibration=False)
    specs = {name: case.spec for name, case in plan.cases.items()}
    out = {}
    for name, records in stale.items():
        here, _ = record_for_host(records, specs[name].options)
        here_class = measured_on({"fingerprint": here.fingerprint})
        elsewhere = sorted({measured_on({"fingerprint": r.fingerprint}) or "an unnamed class of hardware"
                            for r in records if r is not here})
        log.log(NOTICE, f"re-calibrating {name} against the new golden on this host ({here_class}); its records of "
                        f"{', '.join(elsewhere) or 'no other class of hardware'} must be re-made on their own hosts",
                extra=MARKUP)
        done = calibrate_case(plan, specs[name], run_dir, to, command)
        assert here.path is not None  # loaded from the descriptor's files
        out[name] = Recalibrated(name, here.path, done.path, done.error, elsewhere)
    return out


def place(r: Recalibrated) -> Path:
    """The new record beside the old one. Records are named by their bytes' digest, so the copy never replaces
    another record: a file of that name already holds these very bytes."""
    assert r.record is not None
    target = r.old.parent / r.record.name
    if not target.exists():
        shutil.copyfile(r.record, target)
    r.placed = target
    return target
