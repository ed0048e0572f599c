"""`parity-kit power`: measure what each case can detect, and write it as a power record.

For each fault family (one representative fault of the catalogue each, ``FAMILIES``) the fault is written into
the case's model at the catalogue's graded magnitudes; the faulted model is scored by every clean variant and
launch of the case's calibration (the calibrate notebook, one kernel per launch: what calibrating measures, on
the faulted weights), and each faulted sample is judged by the calibration record this host uses
(kit.core.noise.power). The float32 effect of each magnitude (hf in float32, cheap) picks where to start: the first
magnitude whose effect reaches the case's clean error. From there the search steps down while the fault is
still caught (at most ``STEPS_DOWN`` steps) and up until it is, so a family costs two or three faulted
calibrations, not seven. It assumes a fault caught at one magnitude is caught at every larger one, and the
record keeps every magnitude tried, so a reader can see where that held. With ``refine`` the gap between the
highest miss and the lowest catch is then bisected in log space (the catalogue's rungs are 2-10x apart). On a
CPU every engine is deterministic, so a variant's second launch repeats its first bit for bit (as the records
show): there each variant is scored in one launch.

Every finished sample is kept in the run directory (``<case>-<fault>-<magnitude>.samples.jsonl``), so a
measurement cut short continues with ``--resume DIR``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from kit.calibrate.run import measure_variants, reproducing_command, variants_for
from kit.core.records import paths, rundir
from kit.core.noise.calibration import case_device, hardware_change, measured_on
from kit.core.errors import BadInput, ParityKitError
from kit.core.records.jsonio import atomic_write_bytes
from kit.core.noise.power import (DETECTION_PROBABILITY, FaultedSample, PowerRecord, Trial, caught_fraction,
                                  caught_from, clean_error, family_lines, headline, load_power, merged,
                                  named_calibration, read_power)
from kit.core.records.results import now_iso
from kit.core.host.runtime import numeric_fingerprint, numerics_fingerprint
from kit.core.model.faultcopy import on_model
from kit.core.records.spec import CaseSpec
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import outline, resolve
from kit.faults.catalogue import BY_NAME, Fault
from kit.faults.effect import FLOAT32_CASE, EmbeddedCases, embedded_cases
from kit.faults.ladder import EFFECTS_FILE, Ladder
from kit.run import lifecycle, output
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

# One fault per family of engine bug: where positions are encoded, how attention is scaled, the MLP's
# nonlinearity, normalization, and the output logits. Each is the family's most graded fault of the catalogue
# (docs/fault-catalogue.md), then the one measured where a backend cannot load the first (Levanter 1.1
# hard-codes its RoPE base, so it refuses a checkpoint asking for another); `--family NAME=FAULT` measures any.
FAMILIES: dict[str, tuple[str, ...]] = {
    "position": ("rope_base", "rotary_interleave"), "attention": ("attention_scale", "head_order"),
    "mlp": ("activation", "mlp_noise"), "normalization": ("norm_offset", "rms_norm_eps"),
    "output": ("logit_scale", "tied_embeddings")}
STEPS_DOWN = 1  # below the first magnitude caught: enough to see where detection stops, not the whole ladder
# Midpoints tried between the highest miss and the lowest catch: none by default, so a record measured before
# refining existed is measured again by the same command; each halves the gap in log space at one faulted
# calibration's cost (the catalogue's magnitudes are 2-2.5x apart, a decade added below it 10x: 2 midpoints leave
# at most 10^(1/4) = 1.8x).
REFINE = 0


@dataclass
class CasePower:
    case: str
    record: PowerRecord | None
    path: Path | None
    error: str | None = None


def parse_families(given: Sequence[str] | None, flag: str = "--family") -> dict[str, tuple[str, ...]]:
    """``--family NAME=FAULT`` (or a bare family of FAMILIES); every family by default. ``flag``: the option's
    name in the command that was given it, for the refusal."""
    if not given:
        return dict(FAMILIES)
    out = {}
    for item in given:
        name, _, fault = item.partition("=")
        faults = (fault,) if fault else FAMILIES.get(name, ("",))
        if any(f not in BY_NAME for f in faults):
            known = ", ".join(f"{f}={x[0]}" for f, x in FAMILIES.items())
            raise BadInput(f"{flag} {item}: no such family or fault (families: {known}; faults: "
                           f"{', '.join(BY_NAME)})")
        out[name] = faults
    return out


@dataclass(frozen=True)
class PowerRequest:
    """`parity-kit power` as asked: the descriptor, its cases (None: every calibrated case) and fault families
    (None: all), the run directory (``out``) or one to ``resume``, the folder records go to (``to``), the float32
    case, the command records keep, the search's depth and refinement, and earlier records whose trials are reused."""

    descriptor: str | Path
    cases: Sequence[str] | None = None
    families: Sequence[str] | None = None
    out: str | Path | None = None
    resume: str | Path | None = None
    to: str | Path = "calibrations/power"
    float32_case: str = FLOAT32_CASE
    command: Sequence[str] | None = None
    steps_down: int = STEPS_DOWN
    refine: int = REFINE
    reuse: Sequence[str | Path] = ()


def measure(request: PowerRequest) -> list[CasePower]:
    """Measure the power of the descriptor's calibrated cases (or ``cases``): each fault family's ladder tried
    against the record the host uses, resumable from ``resume``, one power record per case written to ``to``."""
    descriptor, cases, families, out = request.descriptor, request.cases, request.families, request.out
    resume, to, float32_case, command = request.resume, request.to, request.float32_case, request.command
    steps_down, refine, reuse = request.steps_down, request.refine, request.reuse
    output.ensure()
    # The environment as this measurement was given it: the float32 effects run hf in this process, and a record's
    # runtime is what was given, never what an engine set for itself (kit.core.host.runtime.numerics_fingerprint).
    environ = dict(os.environ)
    chosen = parse_families(families)
    desc = load_descriptor(descriptor)
    stated = outline(desc)
    names = list(cases) if cases else [n for n, c in stated.cases.items() if c.calibrated]
    judged = resolve(desc, names)  # bounds, step bounds and drift test as this host's gate uses them
    for name in names:
        if judged.cases[name].spec.calibration is None:
            raise BadInput(f"case {name} of {paths.display(judged.path)} has no calibration record: its detectable "
                           "effect is measured against one (parity-kit calibrate first)")
    known = reused(judged, names, reuse)
    clean = resolve(desc, names, resolve_calibration=False)
    effects = embedded_cases(descriptor, tuple(names), float32_case, loaded=desc)
    run_dir = Path(resume) if resume else _new_dir(judged.name, out)
    to = Path(to)
    command = reproducing_command(command or ["parity-kit", "power", str(descriptor)])
    done = []
    with lifecycle.owned(run_dir, command, "power measurement"):
        paths.make_dir(to, "--to")
        for name in names:
            # Judged at the drift rate the record was reviewed with (as the descriptor re-derives it on loading),
            # whatever share of the gate's false-failure rate this descriptor gives the case.
            used = judged.cases[name].spec.calibration or {}
            own = {r.sha256: r for r in judged.cases[name].records}[used["sha256"]]
            done.append(measure_case(CasePowerRequest(
                judged, clean.cases[name].spec, judged.cases[name].spec, own.reference(), chosen, effects, run_dir,
                to, command, steps_down, refine, known.get(name), environ)))
    return done


def reused(judged, names: Sequence[str], files: Sequence[str | Path]) -> dict[str, PowerRecord]:
    """The earlier power records whose trials a measurement takes as measured (``--reuse``), by case, each judged
    by its evidence against the calibration record the case uses now. A record of a case not measured here is
    passed over (one list of records serves a call that measures its cases one by one)."""
    out: dict[str, PowerRecord] = {}
    for f in files:
        shown = paths.display(Path(f))
        stated = read_power(f)
        case = str(stated.get("case")) if isinstance(stated, dict) else ""
        if case not in names:
            log.info(f"power: --reuse {shown}: a record of case {case}, which this measurement does not measure")
            continue
        used = (judged.cases[case].spec.calibration or {}).get("sha256")
        named = named_calibration(stated, shown)
        if named != used:
            raise BadInput(f"--reuse {shown}: measured against calibration record {named[:12]}; case {case} uses "
                           f"{str(used)[:12]}")
        if case in out:
            raise BadInput(f"--reuse {shown}: a second record of case {case} (merge them first)")
        own = {r.sha256: r for r in judged.cases[case].records}[named]
        out[case] = load_power(f, own.reference(), stated)
    return out


def merge(descriptor: str | Path, case: str, files: Sequence[str | Path], to: str | Path = "calibrations/power",
          command: Sequence[str] | None = None) -> CasePower:
    """One power record of the case from the records of one measurement made in several runs
    (kit.core.noise.power.merged), each judged by its evidence against the calibration record it names, which the case
    must list."""
    output.ensure()
    judged = resolve(load_descriptor(descriptor), [case])
    listed = {r.sha256: r for r in judged.cases[case].records}
    records = []
    for f in files:
        stated = read_power(f)
        named = named_calibration(stated, paths.display(Path(f)))
        if named not in listed:
            raise BadInput(f"{paths.display(Path(f))}: measured against calibration record {named[:12]}, "
                           f"which case {case} of {paths.display(judged.path)} does not list")
        records.append(load_power(f, listed[named].reference(), stated))
        if records[-1].case != case:
            raise BadInput(f"{paths.display(Path(f))}: a power record of case {records[-1].case}, not {case}")
    # The parts are named by their file names (their SHA-256s), wherever they were read from: a record names
    # records, not the folders of the machine that merged them.
    given = {str(f) for f in files}
    command = [Path(c).name if c in given else c for c in
               (command or ["parity-kit", "power", str(descriptor), "--case", case, "--merge", *map(str, files)])]
    record = merged(records, listed[records[0].record_sha256].reference(), command, now_iso())
    return _write(record, Path(to))


def _write(record: PowerRecord, to: Path) -> CasePower:
    paths.make_dir(to, "--to")
    path = to / f"{record.sha256}.json"
    if not path.exists():
        atomic_write_bytes(path, record.canonical())
    record = dataclasses.replace(record, path=path)
    summary = record.summary
    log.log(NOTICE, f"power {record.case}: {headline({**summary, 'same_class': True})}; record "
            f"{paths.display(path)}\n  " + "\n  ".join(family_lines(summary)), extra=MARKUP)
    return CasePower(record.case, record, path)


def _new_dir(name: str, out: str | Path | None) -> Path:
    return lifecycle.claim(Path(out) if out else rundir.new_run_dir("power", name), "--out", "power measurement",
                           hint="use --resume to continue a measurement")


@dataclass(frozen=True)
class CasePowerRequest:
    """One case's power measurement asked for: the plan its clean variants run in, the clean case and the case as
    the gate judges it, its calibration record (``reference``), the fault families, the float32 effects, the run
    directory, the folder the record goes to (``to``), the command it keeps, the search's depth and refinement, an
    earlier record whose trials it reuses (``known``) and the environment it was given (``environ``)."""

    plan: Any
    clean_spec: CaseSpec
    judged: CaseSpec
    reference: dict
    families: dict[str, tuple[str, ...]]
    effects: Any
    run_dir: Path
    to: Path
    command: list[str]
    steps_down: int = STEPS_DOWN
    refine: int = REFINE
    known: PowerRecord | None = None
    environ: dict[str, str] | None = None


def measure_case(request: CasePowerRequest) -> CasePower:
    """One case's power record: refused where its record measured other hardware or an earlier record another
    runtime; otherwise each family's ladder climbed, its samples judged, the record written."""
    plan, clean_spec, judged, reference = request.plan, request.clean_spec, request.judged, request.reference
    families, effects, run_dir, to = request.families, request.effects, request.run_dir, request.to
    command, steps_down, refine, known = request.command, request.steps_down, request.refine, request.known
    environ = request.environ
    change = hardware_change(reference, judged.options)
    if change:
        return CasePower(judged.name, None, None, f"its record measured noise on {change[0]}, this host is "
                                                  f"{change[1]}: calibrate the case here first, then measure its power")
    fingerprint = {"runtime": numerics_fingerprint(case_device(judged.options), environ)}
    if known is not None and numeric_fingerprint(known.fingerprint) != numeric_fingerprint(fingerprint):
        # Its trials become this record's: they must be of the runtime this record states, as a merge asks.
        return CasePower(judged.name, None, None, f"--reuse {paths.display(known.path or Path('?'))} was measured "
                         "on another runtime than this host's (its fingerprint differs): measure without it")
    noise = clean_error(reference)
    log.log(NOTICE, f"power {judged.name}: {len(families)} fault families against record {reference['sha256'][:12]} "
            f"(clean error {noise:.3g})", extra=MARKUP)
    trials: list[Trial] = []
    measured: dict[str, str] = {}
    climb = Climb(plan, clean_spec, reference, noise, effects, run_dir, steps_down, refine)
    try:
        for family, faults in families.items():
            for name in faults:
                try:
                    trials += search_magnitudes(climb, family, BY_NAME[name], known.trials if known is not None else ())
                except _Refused as exc:
                    log.warning(f"power {judged.name}: {family}: the backend cannot load {exc}; next fault")
                    continue
                measured[family] = name
                break
    except _Stopped as exc:
        log.error(f"power {judged.name}: [red]error[/red]: {exc} (continue with --resume {paths.display(run_dir)})",
                  extra=MARKUP)
        return CasePower(judged.name, None, None, str(exc))
    record = PowerRecord.measured(
        reference, case=judged.name, backend=judged.backend, record_sha256=reference["sha256"],
        measured_on=measured_on(reference) or "unknown",
        fingerprint=fingerprint, families=measured, trials=trials, command=command, created_at=now_iso())
    return _write(record, to)


class _Stopped(ParityKitError):
    pass


class _Refused(ParityKitError):
    """The case's backend refused the faulted checkpoint (a config it cannot express): no measurement."""


@dataclass(frozen=True)
class Climb:
    """What each fault family's ladder of one case is climbed with: the plan its clean variants run in, the clean
    case, the calibration record judged against (``reference``) and its clean error (``noise``), the float32
    effects, the run directory, and how far the search goes down (``steps_down``) and how finely it refines."""

    plan: Any
    clean_spec: CaseSpec
    reference: dict
    noise: float
    effects: Any
    run_dir: Path
    steps_down: int = STEPS_DOWN
    refine: int = REFINE


def search_magnitudes(climb: Climb, family: str, fault: Fault, known: Sequence[Trial] = ()) -> list[Trial]:
    """The family's trials: from the first magnitude whose float32 effect reaches the clean error, down while
    caught (at most ``steps_down``), else up until caught; then, where a magnitude missed lies directly under the
    lowest caught, ``refine`` geometric midpoints between them, each between the highest miss and the lowest catch
    so far (bisection in log space: the figure is then measured to within the square root of what is left of the
    gap). ``known``: trials of this fault an earlier record of the case measured, taken as measured (their
    magnitudes join the ladder, their effects the run's effects file) and kept in this record. Faulted copies are
    written when first needed, into the run directory, and removed when the family is done: a 1B model's copy is
    gigabytes."""
    plan, clean_spec, reference, noise, effects = climb.plan, climb.clean_spec, climb.reference, climb.noise, \
        climb.effects
    run_dir, steps_down, refine = climb.run_dir, climb.steps_down, climb.refine
    ladder = Ladder(fault, clean_spec.model_path, on_prompts_of(effects, clean_spec), run_dir / "faulted" / fault.name,
                    run_dir / EFFECTS_FILE)
    # Under this measurement's family name, which --family NAME=FAULT may give otherwise than the earlier record.
    earlier = {float(t.magnitude): dataclasses.replace(t, family=family) for t in known if t.fault == fault.name}
    try:
        for m, t in sorted(earlier.items()):
            ladder.insert(m, t.effect)
        start = ladder.start(noise)
        trials: dict[float, Trial] = {}
        outcomes: dict[float, bool] = {}  # every magnitude decided, a twin's included

        def deciding(i: int) -> float:
            """The magnitude whose trial decides magnitude ``i``: its own (measured before, or now) or its twin's."""
            m = ladder.magnitudes[i]
            if m in earlier:
                trials[m] = earlier[m]
                log.info(f"power {clean_spec.name}: {fault.name} at {m:g}: measured before, caught in "
                         f"{caught_fraction(trials[m], reference):.0%} of {len(trials[m].samples)} samples")
                return m
            twin = ladder.twin(i, [ladder.magnitudes.index(k) for k in trials])
            if isinstance(twin, float):
                # The same bytes as a magnitude already tried: the same faulted model, so the same outcome. Tried
                # again it would cost a faulted calibration and could only repeat itself.
                log.info(f"power {clean_spec.name}: {fault.name} at {m:g} is the faulted model of {twin:g} "
                         f"(the checkpoint's precision rounds them alike): not tried again")
                return twin
            trials[m] = run_trial(plan, family, fault, m, ladder.effect(i), ladder.folder(i), ladder.digest(i),
                                  clean_spec, run_dir)
            log.info(f"power {clean_spec.name}: {fault.name} at {m:g} (float32 effect {ladder.effect(i):.3g}, "
                     f"{ladder.effect(i) / noise:.2g}x): caught in {caught_fraction(trials[m], reference):.0%} of "
                     f"{len(trials[m].samples)} samples")
            return m

        def caught(i: int) -> bool:
            m = ladder.magnitudes[i]
            outcomes[m] = caught_fraction(trials[deciding(i)], reference) >= DETECTION_PROBABILITY
            return outcomes[m]

        if caught(start):
            i = start
            while i > 0 and start - i < steps_down and caught(i - 1):
                i -= 1
        else:
            i = start + 1
            while i < len(ladder.magnitudes) and not caught(i):
                i += 1
        gap = bracket(outcomes)
        for _ in range(refine):
            if gap is None:
                break
            missed, hit = gap
            middle = midpoint(missed, hit)
            if not missed < middle < hit:
                break  # no number of three significant digits lies between them
            gap = (missed, middle) if caught(ladder.insert(middle)) else (middle, hit)
        return [trials[k] for k in sorted(trials)]
    finally:
        ladder.remove()


def bracket(outcomes: dict[float, bool]) -> tuple[float, float] | None:
    """The highest magnitude missed and the lowest caught above it, from which every larger magnitude decided is
    caught (the rule kit.core.noise.power takes the detectable effect by); None where no miss lies under the catches."""
    ordered = sorted(outcomes)
    k = caught_from([outcomes[m] for m in ordered])
    return None if not k else (ordered[k - 1], ordered[k])


def midpoint(low: float, high: float) -> float:
    """The geometric mean of two magnitudes, to three significant digits (a magnitude names its faulted copy and
    its samples file, so it is a short number)."""
    return float(f"{math.sqrt(low * high):.3g}")


def on_prompts_of(effects: EmbeddedCases, spec: CaseSpec) -> EmbeddedCases:
    """The float32 effect measured on the case's own prompts: a case of the 128-token bucket alone (a decode case)
    never sees what a RoPE fault does at 1024 tokens, and an effect taken over the whole fixture would state its
    power against a fault it could not have seen."""
    return dataclasses.replace(effects, float32=dataclasses.replace(effects.float32, buckets=spec.buckets,
                                                                    prompt_ids=spec.prompt_ids))


def faulted_sample(entry: dict) -> FaultedSample:
    """A samples line of a faulted model: a prompt whose golden winner was lost has no shift to keep."""
    sample, lost = entry["sample"], set(entry.get("no_shift", []))
    steps = sample.get("steps")
    return FaultedSample(sample["variant"], int(sample["launch"]), dict(sample["errors"]),
                         {p: x for p, x in sample["shifts"].items() if p not in lost},
                         tuple(entry.get("failed_prompts", [])),
                         None if steps is None else {p: tuple(e) for p, e in steps.items()},
                         tuple(entry.get("decode_failed", [])))


def run_trial(plan, family: str, fault: Fault, magnitude: float, effect: float, folder: Path, digest: str,
              clean_spec: CaseSpec, run_dir: Path) -> Trial:
    """Score one faulted copy with the case's clean variants (on a CPU, the first launch of each): the trial that
    says whether this magnitude is caught."""
    spec = on_model(clean_spec, folder, digest)
    variants = [{**v, "faulted": True} for v in variants_for(clean_spec)
                if int(v.get("launch", 1)) == 1 or case_device(clean_spec.options) != "cpu"]
    stem = f"{clean_spec.name}-{fault.name}-{magnitude!r}"
    entries, why, raised = measure_variants(plan, spec, variants, run_dir, stem)
    if why and raised == BadInput.__name__ and not entries:
        raise _Refused(f"{fault.name} at {magnitude:g} ({why})")
    if why:
        raise _Stopped(f"{fault.name} at {magnitude:g}: {why}")
    samples = tuple(faulted_sample(e) for e in entries)
    return Trial(family, fault.name, float(magnitude), float(effect), samples)
