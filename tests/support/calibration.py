"""Calibration measured in the test's own process: for tests and benchmarks that need the noise of the host they
run on (no kernel, no file under calibrations/). The command itself (kit.calibrate.run) runs each case in a
kernel of its own; these build the same record from the same halves."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from kit.calibrate.run import build_record, variants_for
from kit.core.noise.calibration import CalibrationRecord
from kit.core.records.spec import CaseSpec


def measure_in_process(spec: CaseSpec, samples_path: str | Path, command: Sequence[str] = ("in-process",)
                       ) -> CalibrationRecord:
    """A record of ``spec`` measured in this process (no kernel, no file under calibrations/)."""
    from kit.case.calibrate import variant_samples

    variants = variants_for(spec)
    entries = variant_samples(spec, variants, samples_path)
    return build_record(spec, variants, entries, list(command))


def on_this_hardware(spec: CaseSpec, samples_path: str | Path) -> CaseSpec:
    """``spec`` as it is, when its calibration was measured on this host's class of hardware; else with a
    calibration measured here, in process (a record of another instruction-set level has other noise)."""
    from kit.core.noise.calibration import hardware_change

    if spec.calibration is None or hardware_change(spec.calibration, spec.options) is None:
        return spec
    record = measure_in_process(spec, samples_path)
    return dataclasses.replace(spec, calibration={**record.reference(), "accept": []}, bucket_bounds=record.bounds)
