"""The power records `baseline make` makes, so that a new class of hardware gets what each case can detect along
with its bounds, in the same run.

A case keeps a power record when it lists power records, has some in its lineage, or is held to a
``detectable_limit``. Such a case needs a new one when none was measured against the calibration record it uses
once this make is blessed: the record made by this make, or the record of this class it already had. The
measurement is `parity-kit power`'s (kit.faults.power.measure_case) against that record, its faulted samples and
float32 effects kept in the working directory's ``power/``, so that a make cut short continues them with
``--resume`` (one family of a 1B model takes most of a GPU node's ten-minute call), and each record made is
staged in ``power-records/`` until the bless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from kit.backends.registry import REFERENCE
from kit.baselines.made import Made, Making
from kit.calibrate.run import variants_for
from kit.core.records import paths
from kit.core.baselines.baselinekind import CALIBRATION, POWER
from kit.core.noise.calibration import CalibrationRecord, case_device, hardware_change, load_record, measured_on
from kit.core.errors import BadInput
from kit.core.host.portable import PORTABLE_DTYPE
from kit.core.noise.power import PowerRecord, named_calibration, read_power
from kit.descriptor.load import LoadedDescriptor
from kit.descriptor.plan import CasePlan, Plan, outline, resolve
from kit.descriptor.standing import BaselineRow
from kit.faults.effect import FLOAT32_CASE, embedded_cases
from kit.faults.power import FAMILIES, CasePowerRequest, measure_case, parse_families

POWER_DIR = "power"  # power's run directory: faulted samples and float32 effects, reused by --resume
STAGED = "power-records"  # the records made, until the bless places them
# The faulted calibrations a family costs: two or three (the first magnitude caught, one step down or up).
TRIALS_PER_FAMILY = 2.5


def families(given: Sequence[str] | None, no_power: bool) -> Mapping[str, tuple[str, ...]] | None:
    """The fault families a make measures (``--power-family``, power's ``--family``; every family by default), or
    None with ``--no-power``; a name that is none is bad input before anything is made."""
    if no_power:
        if given:
            raise BadInput("--no-power with --power-family: measure some families, or none")
        return None
    return parse_families(given, "--power-family") if given else dict(FAMILIES)


def keeps_power(case: CasePlan) -> bool:
    """Whether a calibrated case keeps a power record: it lists some, its lineage has some, or it is held to a
    detectable limit, which only a power record can judge."""
    return case.spec.calibration is not None and (bool(case.power_files) or case.spec.detectable_limit is not None)


def has_power_against(case: CasePlan, record_sha256: str) -> bool:
    """Whether a power record of the case (listed, or a lineage head) was measured against this calibration record."""
    return any(named_calibration(read_power(f), paths.display(f)) == record_sha256 for f in case.power_files)


def own_record(case: CasePlan) -> CalibrationRecord | None:
    """The case's record of this host's class of hardware, as the descriptor and its lineage resolve it; None when
    it has none (it falls back to another class's, or has no baseline here)."""
    cal = case.spec.calibration
    if cal is None or hardware_change(cal, case.spec.options) is not None:
        return None
    return next((r for r in case.records if r.sha256 == cal["sha256"]), None)


def needs_power(case: CasePlan, remade: bool) -> bool:
    """Whether this make measures a power record for the case (``case``: its plan, all that this asks of the run's):
    it keeps one, and its calibration record is made anew here (``remade``) or the record of this class it has has
    none measured against it."""
    if not keeps_power(case):
        return False
    if remade:
        return True
    record = own_record(case)
    return record is not None and not has_power_against(case, record.sha256)


def refuse_limit_without_power(plan: Plan, rows: Sequence[BaselineRow]) -> None:
    """With ``--no-power``, a selected case held to a detectable limit whose power record this make would have to
    measure cannot be blessed: its limit stays unjudged. Said before anything is measured."""
    remade = {r.case for r in rows if r.kind is CALIBRATION}
    for name, case in plan.cases.items():
        limit = case.spec.detectable_limit
        if limit is not None and needs_power(case, name in remade):
            raise BadInput(f"--no-power: case {name} is held to a detectable_limit of {limit:g}x, which only a power "
                           "record measured against its record here judges; leave --no-power out, or make the "
                           "other cases with --case")


def float32_case(desc: LoadedDescriptor) -> str | None:
    """The hf case whose settings measure a fault's effect: ``checkpoint`` where the descriptor has it (the embedded
    descriptor's), else its first uncalibrated hf case in float32 or float64 (a GPU descriptor's ``hf-f32``)."""
    stated = outline(desc)
    hf = [n for n, c in stated.cases.items() if c.backend == REFERENCE and not c.calibrated]
    if FLOAT32_CASE in hf:
        return FLOAT32_CASE
    specs = resolve(desc, hf).cases if hf else {}
    return next((n for n in hf if specs[n].spec.options.get("dtype", "float32") in ("float32", PORTABLE_DTYPE)), None)


def staged_power(folder: Path, case: str, record_sha256: str) -> Path | None:
    """A power record of the case against this calibration record that an earlier call of the make staged."""
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        doc = read_power(path)
        if isinstance(doc, dict) and doc.get("case") == case and doc.get("record_sha256") == record_sha256:
            return path
    return None


def in_use_of_class(plan: Plan, name: str, runtime: str) -> Path | None:
    """The power record the case uses now on ``runtime`` (a class of hardware): what a new one supersedes."""
    return next((f for f in plan.case(name).power_files
                 if (doc := read_power(f)) and isinstance(doc, dict) and doc.get("measured_on") == runtime), None)


def estimate(making: Making, name: str, scored: int, variants: int, n_families: int) -> float | None:
    """About how long the case's power takes: each family's faulted calibrations, each as long as the clean
    calibration this make timed for the case (``scored`` of its ``variants``: on a CPU a second launch is not
    scored again); None where this make did not calibrate the case. The float32 effects come on top."""
    clean = making.clock.finished(CALIBRATION.name, name)  # the label make.py's calibration step is timed under
    return TRIALS_PER_FAMILY * n_families * clean[-1] * scored / variants if clean and variants else None


def make_power(making: Making, rows: Sequence[BaselineRow]) -> list[Made]:
    """A power record for every selected case that needs one (``needs_power``), measured against the record it uses
    once blessed; nothing with ``--no-power``. ``rows``: the status rows of power this make closes (a case held
    to a limit that has none here), each of which ``needs_power`` finds too."""
    if making.families is None:
        return []
    desc, plan = making.desc, making.plan
    names = [n for n, case in plan.cases.items() if needs_power(case, making.made_of(CALIBRATION, n) is not None)]
    if not names:
        return []
    float32 = float32_case(desc)
    run_dir = paths.make_dir(making.work_dir / POWER_DIR, "power directory")
    to = paths.make_dir(making.work_dir / STAGED, "power records directory")
    clean = resolve(desc, names, resolve_calibration=False)  # each case as measured: the faulted model, no bounds
    effects = None
    made = []
    for name in names:
        staged_record = making.made_of(CALIBRATION, name)
        made_record = staged_record.staged if staged_record else None  # the calibration record this make staged
        record = load_record(made_record) if made_record else own_record(plan.case(name))
        assert record is not None  # needs_power found one
        runtime = measured_on({"fingerprint": record.fingerprint}) or "this host"
        superseded = in_use_of_class(plan, name, runtime)
        what = f"power record of {name} ({len(making.families)} fault families against record {record.sha256[:12]})"
        staged = staged_power(to, name, record.sha256)
        if staged is not None:
            making.clock.skip(what)
            made.append(Made(POWER, name, runtime, staged, superseded, command=making.command, reused=True))
            continue
        if float32 is None:
            made.append(Made(POWER, name, runtime, None, error="the descriptor has no hf case in float32 or "
                             "float64 to measure a fault's effect with: add one, or make with --no-power"))
            continue
        spec = clean.cases[name].spec
        variants = variants_for(spec)
        scored = [v for v in variants if int(v.get("launch", 1)) == 1 or case_device(spec.options) != "cpu"]
        with making.clock.step(POWER.name, name, what,
                               estimate(making, name, len(scored), len(variants), len(making.families))):
            if effects is None:  # each fault's float32 effect, on the float32 case's settings
                effects = embedded_cases(desc.path, tuple(names), float32, loaded=desc)
            done = measure_case(CasePowerRequest(clean, spec, spec, record.reference(), dict(making.families), effects,
                                                 run_dir, to, making.command))
        made.append(Made(POWER, name, runtime, done.path, superseded, done.error, command=making.command))
    return made


def power_summary(path: Path) -> dict:
    """What a staged power record says the case detects (its summary), for the evidence."""
    doc = read_power(path)
    return PowerRecord.from_dict(doc, path).summary if isinstance(doc, dict) else {}
