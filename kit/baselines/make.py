"""`parity-kit baseline make`: make the baselines this runtime lacks, and bless them only on evidence.

On a host of a class the descriptor has no baselines for, an exact case has no golden and a calibrated case
either falls back to another class's bounds or cannot be judged. This command closes that gap in one step,
from the pinned release: an exact golden for each exact entry (`golden make`, as the refusal's own command
says), a calibration record for each calibrated case (`calibrate`'s clean variants), and a power record for
each calibrated case that keeps one (`power`'s fault families, against the record the case now uses). Nothing
it makes is trusted on being made:

1. the **backtest** replays each new record over every archived observation of its case that can be read
   (run directories, controls, the superseded record's samples; no engine runs): a known-bad run that would
   now pass refuses the bless, a known-good run that would now fail needs ``--accept-flips`` with a reason;
2. the **evidence gate** runs every case of the descriptor against the new baselines, every backend on its own
   engine: a case fails, errors, is inconclusive or passes only on borrowed bounds, and the bless is refused; a
   case it was not asked to make that has no baseline here stands as such, and refuses nothing.

Only then are the files placed (never over another: each is named by its content) and one lineage entry per
baseline written (kit.core.baselines.lineage), which is what makes the gate use them: a pull request shows the new
files and nothing else. The working directory keeps every sample, notebook, gate run, the time of each step
over every call (kit.baselines.steps) and the evidence (``baseline.json``, ``evidence.md``) whatever the
outcome; a make cut short continues there (``--resume``), reusing what it finished: staged goldens and records,
calibration and power samples, the evidence gate's finished cases.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kit.backends import registry
from kit.baselines import makepower, steps
from kit.baselines.adopt import first_entry
from kit.baselines.archive import Archive, read_archive
from kit.baselines.backtest import Backtest, backtest
from kit.baselines.made import Made, Making
from kit.baselines.signed import sign_entry
from kit.descriptor.standing import BaselineRow, Standing, plan_rows
from kit.calibrate.run import calibrate_case, reproducing_command, variants_for
from kit.core.records import paths, rundir
from kit.core.baselines.baselinekind import CALIBRATION, EXACT_GOLDEN, KINDS, POWER, BaselineKind
from kit.core.noise.calibration import CalibrationRecord, hardware_change, load_record, measured_on
from kit.core.errors import BadInput
from kit.core.baselines.golden import load_golden
from kit.core.records.jsonio import atomic_write_bytes, read_json, sha256_file, write_json
from kit.core.baselines.lineage import LineageEntry, chain, heads, normal_runtime, write_entry
from kit.core.baselines.lineageclaims import (ACCEPT_LOOSER, agreed, loosening, movement_text, movements,
                                              reason_problem)
from kit.core.noise.power import headline
from kit.core.records.records import GoldenMode, Status
from kit.core.records.results import now_iso
from kit.core.records.spec import CaseSpec
from kit.descriptor.load import LoadedDescriptor, load_descriptor, with_baselines
from kit.descriptor.plan import Plan, resolve
from kit.gate.executor import RunRequest, check_plan, check_run
from kit.gate.session import gate_once
from kit.goldens.make import flag_keywords, make_golden_apart
from kit.run import lifecycle
from kit.run.notebook import run_and_render
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

RECORD = "baseline.json"
EVIDENCE = "evidence.md"
MAKING = "making.json"  # written first: what --resume checks
MAKING_FORMAT = "parity-kit-baseline-make/1"
EVIDENCE_NOTEBOOK = paths.NOTEBOOKS / "baseline.ipynb"
GOLDEN_LOG = "golden-make.log"  # what each golden's maker printed
GATE = "gate"  # the evidence gate's run directory (a resumed make continues it)

__all__ = ["MAKERS", "Made", "MakeOutcome", "MakeRequest", "make_baselines", "with_made"]


@dataclass(frozen=True)
class MakeOutcome:
    work_dir: Path | None
    before: list[BaselineRow]
    made: list[Made]
    gate_dir: Path | None = None
    gate_verdict: str | None = None
    refusals: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    # Cases of the evidence gate it was not asked to make that have no baseline here: case -> why (they refuse nothing).
    not_judged: dict[str, str] = field(default_factory=dict)
    power: str = ""  # what of power was measured, in words ("skipped (--no-power)", "families: output")
    times: list[steps.StepTotal] = field(default_factory=list)  # each step's time over every call of the make
    calls: int = 0  # how many calls the make took so far (the first, and each --resume)

    @property
    def blessed(self) -> bool:
        """Whether the made baselines were placed: something was made and nothing refused it."""
        return bool(self.made) and not self.refusals

    def to_dict(self) -> dict[str, Any]:
        """The outcome as the working folder's record keeps it (and its notebook shows it): the standing
        before, each baseline made with its backtest and bound moves, the evidence gate, the refusals."""
        return {"before": [r.to_dict() for r in self.before],
                "made": [{"kind": m.kind.name, "case": m.case, "runtime": m.runtime, "staged": _shown(m.staged),
                          "superseded": _shown(m.superseded), "error": m.error, "bounds": m.bounds,
                          "reused": m.reused,
                          "moves": [{"bucket": v.bucket, "before": v.before, "after": v.after, "ratio": v.ratio,
                                     "beyond_margin": v.beyond_margin} for v in m.moves],
                          "backtest": m.backtest.to_dict() if m.backtest else None} for m in self.made],
                "gate": {"run": _shown(self.gate_dir), "verdict": self.gate_verdict, "not_judged": self.not_judged},
                "power": self.power, "steps": [t.to_dict() for t in self.times], "calls": self.calls,
                "wall_s": round(sum(t.wall_s for t in self.times), 1),
                "refusals": self.refusals, "blessed": self.blessed, "written": [_shown(p) for p in self.written]}


def _shown(path: Path | None) -> str | None:
    return paths.display(path) if path is not None else None


@dataclass(frozen=True)
class MakeRequest:
    """`parity-kit baseline make` as asked: the descriptor; the cases ``only`` (None: all); the reason each baseline
    keeps; ``again``: remake what this runtime has too; the reasons given to accept flipped runs and looser bounds;
    the archives to backtest over and whether to skip what cannot be read; the evidence gate's ``jobs``; the working
    directory (``out``) or one to ``resume``; the command the records keep (None: this make's own); the fault
    families of power records (None: all) or ``no_power``; and a ``signer`` of each lineage entry (None:
    unsigned)."""

    descriptor: str | Path
    only: Sequence[str] | None = None
    reason: str = ""
    again: bool = False
    accept_flips: str | None = None
    archives: Sequence[str | Path] = ()
    skip_unreadable: bool = False
    jobs: int | None = None
    out: str | Path | None = None
    command: Sequence[str] | None = None
    resume: str | Path | None = None
    accept_looser: str | None = None
    power_families: Sequence[str] | None = None
    no_power: bool = False
    signer: Any = None  # kit.run.signing.load_signer


def make_baselines(request: MakeRequest) -> MakeOutcome:
    """Make what this runtime lacks among the cases ``only`` (None: all), or with ``again`` remake what it has;
    bless it on the evidence above. A record looser than the one it supersedes beyond that one's margin is
    refused unless ``accept_looser`` gives the reason (kept in its lineage entry's command). Power records are
    measured over ``power_families`` (power's ``--family``; every family by default), or not at all with
    ``no_power``. With ``signer`` (kit.run.signing.load_signer), each lineage entry written is signed
    (kit.baselines.signed). Bad input (no reason, no [baselines] table, an archive that cannot be read without
    ``skip_unreadable``, a case of the descriptor its evidence gate could not run) is refused before anything is
    made, and nothing is written. The descriptor is loaded here, once: what follows reads the plan."""
    r = request
    descriptor, reason, accept_flips, accept_looser = r.descriptor, r.reason, r.accept_flips, r.accept_looser
    if (problem := reason_problem(reason)) is not None:
        raise BadInput(f"--reason: {problem}; a baseline keeps why it was made (\"new CPU class in CI\", "
                       "\"torch 2.14\")")
    if accept_flips is not None and (problem := reason_problem(accept_flips)) is not None:
        raise BadInput(f"--accept-flips: {problem}; accepting a known-good run's new failure needs its reason")
    if accept_looser is not None and (problem := reason_problem(accept_looser)) is not None:
        raise BadInput(f"{ACCEPT_LOOSER}: {problem}; accepting looser bounds needs its reason, in words")
    families = makepower.families(r.power_families, r.no_power)
    desc = load_descriptor(descriptor)
    # As a record keeps a command: what remakes it, without the scratch folder it was made in.
    command = reproducing_command(r.command or ["parity-kit", "baseline", "make", str(descriptor), "--reason", reason,
                                              *([ACCEPT_LOOSER, accept_looser] if accept_looser else [])])
    plan = resolve(desc, r.only)
    folders = _folders(plan)
    before = plan_rows(plan)
    targets = [row for row in before
               if row.standing in (Standing.MISSING, Standing.FALLBACK) or (r.again and row.standing == Standing.MATCH)]
    targets = [row for row in targets if row.kind.makeable]
    remade = {row.case for row in targets if row.kind is CALIBRATION}
    powered = [n for n, case in plan.cases.items() if makepower.needs_power(case, n in remade)]
    if families is None:
        makepower.refuse_limit_without_power(plan, targets)
        powered = []
    if not targets and not powered:
        log.log(NOTICE, "every selected case has baselines of this runtime's own: nothing to make", extra=MARKUP)
        return MakeOutcome(None, before, [])
    # The evidence gate runs every case of the descriptor: one it could not start is bad input now, not a refusal
    # after the measurements.
    if set(plan.cases) == set(plan.outline.cases):  # the plan asked for is the whole descriptor's: not resolved again
        check_plan(plan)
    else:
        check_run(desc)
    roots = [Path(a) for a in r.archives] or ([paths.runs_root()] if paths.runs_root().is_dir() else [])
    # The archive is read before anything is made: a run that cannot be read is bad input, not a late refusal.
    archived = {row.case: _archive(roots, row.case, r.skip_unreadable) for row in targets if row.kind.backtested}
    work_dir = _resumed(Path(r.resume), plan) if r.resume is not None else _begin(
        lifecycle.claim(r.out or rundir.new_run_dir("baseline", plan.name), "--out", "baseline make", command), plan)
    with lifecycle.owned(work_dir, command, "baseline make"):
        planned = len({(row.kind, row.case if row.kind is not EXACT_GOLDEN else plan.outline.cases[row.case].golden)
                       for row in targets if row.kind is not POWER}) + len(powered) + 1  # and the evidence gate
        making = Making(desc, plan, work_dir, command, steps.StepClock(work_dir, planned), families)
        log.log(NOTICE, _plan_line(targets, powered, families, len(plan.outline.cases), work_dir), extra=MARKUP)
        for kind, maker in MAKERS.items():
            making.made += maker(making, [row for row in targets if row.kind is kind])
        outcome = bless(making, Blessing(before, archived, roots, reason, accept_flips, accept_looser, r.jobs,
                                         _power_text(families, powered), signer=r.signer), folders)
    _render_evidence(work_dir)
    return outcome


@dataclass(frozen=True)
class Blessing:
    """What judges the baselines a make staged, besides the making itself: the standing before, the archive and its
    roots for the backtest, the reason and the acceptances given, the evidence gate's jobs, what of power was
    measured (in words), and which cases the evidence gate runs (None: every case of the descriptor)."""

    before: list[BaselineRow]
    archived: Mapping[str, Archive]
    roots: Sequence[Path]
    reason: str
    accept_flips: str | None = None
    accept_looser: str | None = None
    jobs: int | None = None
    power: str = ""
    gate_cases: Sequence[str] | None = None
    signer: Any = None  # signs each lineage entry written (kit.run.signing.load_signer); None: unsigned


def bless(making: Making, b: Blessing, folders: Mapping[str, Path]) -> MakeOutcome:
    """The staged baselines judged (backtest, bound moves, evidence gate) and, on that evidence, placed with their
    lineage; the outcome written to the working directory (``baseline.json``, ``evidence.md``) whatever it is."""
    plan, work_dir = making.plan, making.work_dir
    making.made = [_backtested(m, b.archived, b.roots, plan) for m in making.made]
    refusals = [f"{m.case}: {m.error}" for m in making.made if m.error]
    for m in making.made:
        refusals += _judge_backtest(m.backtest, b.accept_flips) if m.backtest is not None else []
        refusals += _judge_moves(m, b.accept_looser)
    outcome = MakeOutcome(work_dir, b.before, making.made, power=b.power, refusals=refusals)
    if not outcome.refusals:
        outcome = _evidence_gate(making, b.jobs, outcome, b.gate_cases)
    if outcome.blessed:
        outcome = replace(outcome, written=_place(plan, folders, making.made, b.reason, making.command,
                                                  b.accept_flips, outcome.gate_verdict, b.signer))
    times = making.clock.times()
    outcome = replace(outcome, times=steps.totals(times),
                      calls=max((t.call for t in times), default=making.clock.call))
    write_json(work_dir / RECORD, outcome.to_dict())
    atomic_write_bytes(work_dir / EVIDENCE, evidence_markdown(outcome).encode("utf-8"))
    return outcome


def _plan_line(targets: Sequence[BaselineRow], powered: Sequence[str], families: Mapping | None, cases: int,
               work_dir: Path) -> str:
    """What this make will do, in one line, before it starts."""
    parts = [f"{kind.name} of {', '.join(dict.fromkeys(r.case for r in targets if r.kind is kind))}"
             for kind in MAKERS if kind is not POWER and any(r.kind is kind for r in targets)]
    if powered:
        assert families is not None  # none is planned with --no-power
        parts.append(f"power of {', '.join(powered)} ({len(families)} fault families)")
    return (f"baseline make in {paths.display(work_dir)}: {'; '.join(parts)}; then the backtest and an evidence "
            f"gate of all {cases} cases (resume an interrupted make with --resume {paths.display(work_dir)})")


def _power_text(families: Mapping | None, powered: Sequence[str]) -> str:
    if families is None:
        return "skipped (--no-power): no power record was measured"
    if not powered:
        return "nothing to measure: every case that keeps a power record has one against the record it uses"
    return f"measured for {', '.join(powered)}; families {', '.join(f'{k} ({v[0]})' for k, v in families.items())}"


def _render_evidence(work_dir: Path) -> None:
    """The evidence notebook and its HTML, for the pull request; a failure to render loses nothing (the record
    and evidence.md are written) and is said in one line."""
    out = work_dir / EVIDENCE_NOTEBOOK.name.replace("baseline", "evidence")
    built = run_and_render(EVIDENCE_NOTEBOOK, out, {"work_dir": str(work_dir)}, 300,
                           rundir.kernel_log(work_dir, "evidence"))
    if built.error:
        log.error(f"evidence notebook not rendered in full: {built.error}; the record is {work_dir / RECORD}")


def _begin(work_dir: Path, plan: Plan) -> Path:
    """Mark a fresh working directory as this descriptor's, so that --resume may continue it and nothing else."""
    write_json(work_dir / MAKING, {"format": MAKING_FORMAT, "descriptor": str(plan.path),
                                   "descriptor_sha256": plan.sha256, "started_at": now_iso()})
    return work_dir


def _resumed(work_dir: Path, plan: Plan) -> Path:
    """A working directory an interrupted `baseline make` of this very descriptor left: its staged goldens, records
    and power records, its calibration and power samples and its evidence gate's finished cases are reused,
    nothing else."""
    try:
        doc = read_json(work_dir / MAKING)
    except (OSError, ValueError):
        doc = None
    if not isinstance(doc, dict) or doc.get("format") != MAKING_FORMAT:
        raise BadInput(f"--resume {paths.display(work_dir)}: not a working directory of `parity-kit baseline make` "
                       f"(no {MAKING} in it)")
    if doc.get("descriptor_sha256") != plan.sha256:
        raise BadInput(f"--resume {paths.display(work_dir)}: made for {doc.get('descriptor')} as it was then "
                       f"(SHA-256 {str(doc.get('descriptor_sha256'))[:12]}); {paths.display(plan.path)} is now "
                       f"{plan.sha256[:12]}: start afresh")
    return work_dir


def _folders(plan: Plan) -> Mapping[str, Path]:
    if plan.outline.baseline_folders is None:
        raise BadInput(f"{paths.display(plan.path)}: no [baselines] table; `baseline make` writes a lineage entry "
                       "for every baseline it makes: add `[baselines]` with `lineage = \"../baselines\"`")
    if paths.CHECKOUT is None and plan.path.resolve().is_relative_to(paths.DATA_ROOT.resolve()):
        # An installed package's own files: a new baseline there would vanish with the next install.
        raise BadInput(f"{paths.display(plan.path)} is the installed package's own descriptor; copy it with its "
                       "data folders into a folder of yours (or work in a checkout) to make baselines for it")
    root = plan.outline.tree_root
    assert root is not None  # set with the folders
    for kind, folder in plan.outline.baseline_folders.items():
        if not folder.resolve().is_relative_to(root):  # what it makes must show in a diff of the tree
            raise BadInput(f"{paths.display(plan.path)}: [baselines] puts {kind} files in {paths.display(folder)}, "
                           f"outside {paths.display(root)}; name a folder inside the descriptor's tree (or set "
                           "[baselines] root)")
    return plan.outline.baseline_folders


def _make_goldens(making: Making, rows: Sequence[BaselineRow]) -> list[Made]:
    """One exact golden per exact [goldens] entry this runtime lacks, made as `golden make` makes it, with the
    flags the entry's goldens were made with and the case's options that decide the runtime."""
    plan, work_dir = making.plan, making.work_dir
    made: list[Made] = []
    for row in rows:
        spec = plan.case(row.case).spec
        entry = plan.outline.cases[row.case].golden
        assert entry is not None  # an exact golden row belongs to a case with a golden entry
        if any(m.case == entry and m.runtime == spec.runtime for m in made):
            continue  # two cases of one entry and one runtime share its golden
        first = load_golden(plan.goldens[entry].files[0])
        info = registry.get(str(first.provenance.get("backend", registry.REFERENCE)))
        flags = info.remake_flags(first.provenance, spec.options)
        argv = ["golden", "make", *(["--backend", info.name] if info.name != registry.REFERENCE else []),
                "--model", paths.display(spec.model_path), "--fixture", paths.display(spec.fixture_path),
                "--kind", GoldenMode.EXACT, "--top-k", str(first.top_k), *flags, "--out", str(work_dir / "goldens")]
        if info.kernel != paths.MAIN_KERNEL:
            made.append(Made(EXACT_GOLDEN, entry, spec.runtime, None,
                             error=f"its golden is made in {info.name}'s own environment: run `parity-kit "
                                   f"{shlex.join(argv)}` there"))
            continue
        superseded = None if row.standing == Standing.MISSING else Path(spec.golden_path)
        what = f"exact golden of {entry} for {spec.runtime}"
        reused = _staged_golden(work_dir / "goldens", spec.runtime)  # made by an interrupted run of this make
        staged = reused
        if reused is not None:
            making.clock.skip(what)
        else:
            with making.clock.step(EXACT_GOLDEN.name, entry, what):
                # `golden make` called as a function, in a process of its own (make_golden_apart says why)
                golden = make_golden_apart(work_dir / "goldens", paths.display(spec.model_path),
                                           paths.display(spec.fixture_path), GoldenMode.EXACT, first.top_k,
                                           ["parity-kit", "-q", *argv], work_dir / GOLDEN_LOG, backend=info.name,
                                           **flag_keywords(flags))
            staged = golden.path if golden.path is not None and golden.path.is_file() else None
            if staged is None:
                made.append(Made(EXACT_GOLDEN, entry, spec.runtime, None,
                                 error=f"golden make failed: {golden.error or 'no output'}"))
                continue
        made.append(Made(EXACT_GOLDEN, entry, spec.runtime, staged, superseded, command=["parity-kit", *argv[:-2]],
                         reused=reused is not None))
    return made


def _staged_golden(folder: Path, runtime: str) -> Path | None:
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if load_golden(path).provenance.get("runtime") == runtime:
            return path
    return None


def _make_records(making: Making, rows: Sequence[BaselineRow]) -> list[Made]:
    """A calibration record per case, measured here with its clean variants (calibrate's notebooks); one an
    earlier call of this make staged is taken as it is."""
    if not rows:
        return []
    measuring = resolve(making.desc, [r.case for r in rows], resolve_calibration=False)  # as measured: no bounds
    staging = paths.make_dir(making.work_dir / "calibrations", "calibrations directory")
    made = []
    for row in rows:
        spec = measuring.case(row.case).spec
        superseded = Path(row.file) if row.standing == Standing.MATCH and row.file else None
        what = f"calibration record of {row.case}"
        staged = _staged_record(staging, spec)
        if staged is not None:
            making.clock.skip(what)
            made.append(Made(CALIBRATION, row.case, measured_on({"fingerprint": staged.fingerprint}) or "this host",
                             staged.path, superseded, bounds=dict(staged.bounds), command=making.command, reused=True))
            continue
        with making.clock.step(CALIBRATION.name, row.case, f"{what}: {len(variants_for(spec))} clean variants"):
            done = calibrate_case(measuring, spec, paths.make_dir(making.work_dir / "calibrate",
                                  "calibration directory"), staging, making.command)
        runtime = measured_on({"fingerprint": done.record.fingerprint}) if done.record else None
        made.append(Made(CALIBRATION, row.case, runtime or "this host", done.path, superseded, done.error,
                         bounds=dict(done.record.bounds) if done.record else {}, command=making.command))
    return made


def _staged_record(folder: Path, spec: CaseSpec) -> CalibrationRecord | None:
    """The record of the case an earlier call of this make measured and staged (its samples all finished), if
    any; one measured on another class of hardware than this host's is refused: a make continues where it began."""
    for path in sorted(folder.glob("*.json")):
        record = load_record(path)
        if record.case != spec.name:
            continue
        change = hardware_change(record.reference(), spec.options)
        if change is not None:
            raise BadInput(f"--resume: {paths.display(path)} was measured on {change[0]}, this host is {change[1]}: "
                           "continue the make on a host of that class, or start afresh")
        return record
    return None


# How `baseline make` makes each kind it makes (kit.core.baselines.baselinekind says which): making runs the commands
# above the kinds' layer, so it lives here, one maker per makeable kind, in the order they are made (a power record is
# measured against the calibration record made before it).
Maker = Callable[[Making, Sequence[BaselineRow]], list[Made]]
MAKERS: Mapping[BaselineKind, Maker] = {EXACT_GOLDEN: _make_goldens, CALIBRATION: _make_records,
                                        POWER: makepower.make_power}
assert set(MAKERS) == {k for k in KINDS if k.makeable}, "every makeable kind has its maker, and only those"


def _archive(roots: Sequence[Path], case: str, skip_unreadable: bool) -> Archive:
    archive = read_archive(roots, case)
    if archive.unreadable and not skip_unreadable:
        first = archive.unreadable[0]
        more = f" (and {len(archive.unreadable) - 1} more)" if len(archive.unreadable) > 1 else ""
        raise BadInput(f"{first.source}: cannot be read for the backtest of {case}: {first.reason}{more}; "
                       "repair or move it, or give --skip-unreadable to backtest without it")
    return archive


def _backtest(m: Made, archive: Archive, roots: Sequence[Path], alpha: float | None = None) -> Backtest:
    """The new record over the archive and, when it supersedes one, that record's clean samples; its drift test
    at ``alpha``, the one the gate gives the case (None: the record's own)."""
    assert m.staged is not None
    record = load_record(m.staged)
    if m.superseded is not None:
        archive = read_archive(roots, m.case, superseded=load_record(m.superseded))
    # what could not be read was refused or let go above
    return backtest(record, archive, skip_unreadable=True, alpha=alpha)


def _drift_alpha(plan: Plan, case: str) -> float | None:
    """The drift test's alpha the descriptor's false-failure rate gives ``case``; None when it has no drift test."""
    return plan.false_failure.per_case if case in plan.false_failure.cases else None


def _backtested(m: Made, archived: Mapping[str, Any], roots: Sequence[Path], plan: Plan) -> Made:
    """A staged baseline with what the evidence shows of it: a backtested kind's replay over the archive, and
    how far a new record's bounds moved from the record it supersedes."""
    if m.staged is None:
        return m
    if m.kind.backtested:
        m = replace(m, backtest=_backtest(m, archived[m.case], roots, _drift_alpha(plan, m.case)))
    folders = plan.outline.baseline_folders
    return with_moves(m, plan.outline.lineage, folders["lineage"] if folders else None)


def with_moves(m: Made, entries: Sequence[LineageEntry] = (), lineage: Path | None = None) -> Made:
    """A new calibration record with how far its bounds moved from the record it supersedes (``moves``, for the
    evidence and ``_judge_moves``), and from the record its chain last agreed on when that is another (``drift``:
    ``entries`` are the descriptor's lineage, kept in the folder ``lineage``); any other baseline as it is."""
    if m.kind is not CALIBRATION or m.staged is None or m.superseded is None:
        return m
    new = load_record(m.staged)
    m = replace(m, moves=movements(load_record(m.superseded), new))
    parent = heads(entries, CALIBRATION, m.case).get(normal_runtime(m.runtime))
    if parent is None or lineage is None:
        return m
    first = agreed(chain(entries, parent))
    if first is parent:
        return m
    path = (lineage / first.file).resolve()
    return replace(m, drift=movements(load_record(path), new), agreed=path)


def _judge_moves(m: Made, accept_looser: str | None) -> list[str]:
    """The refusal of a new record whose bounds loosen beyond the margin of the record it supersedes (``m.moves``,
    ``_backtested``), or beyond that of the record its chain last agreed on (``m.drift``), that no
    ``accept_looser`` reason covers."""
    if accept_looser is not None:
        return []
    too_loose = loosening(m.moves)
    if too_loose:
        return [f"{m.case}: the new record loosens {too_loose}: find why its noise grew, or bless it with "
                f"{ACCEPT_LOOSER} REASON"]
    drifted = loosening(m.drift, f"{paths.display(m.agreed)}'s") if m.agreed is not None else None
    if drifted:
        return [f"{m.case}: the new record loosens, in steps each within its parent's margin, {drifted} (its "
                f"chain's first record, or the latest whose entry accepted looser bounds): find why its noise grew, "
                f"or bless it with {ACCEPT_LOOSER} REASON"]
    return []


def _judge_backtest(bt: Backtest, accept_flips: str | None) -> list[str]:
    refusals = [f"{bt.case}: backtest: {f.source}: known bad ({f.why}), {f.was} when it ran, would pass under the "
                f"new record" for f in bt.refusals]
    if bt.needs_acceptance and accept_flips is None:
        refusals += [f"{bt.case}: backtest: {f.source}: known good ({f.why}), {f.was} when it ran, would fail: "
                     f"{f.first} (accept with --accept-flips \"why\")" for f in bt.needs_acceptance]
    return refusals


def _evidence_gate(making: Making, jobs: int | None, outcome: MakeOutcome,
                   cases: Sequence[str] | None = None) -> MakeOutcome:
    """Every case of the descriptor against the new baselines, every backend on its own engine: the pinned
    environment must pass with them, and a second backend on the same golden agree. A case this make was not asked
    to make that has no baseline here stands as such (``not_judged`` of the outcome it returns) and refuses
    nothing; any other case that did not pass refuses the bless. A resumed make continues the gate an earlier call
    began: its finished cases whose inputs are unchanged are kept (kit.gate.resume). ``cases`` limits the gate to
    those (a deepened record changes no other case's baselines); None: every case."""
    checked = with_made(making.desc, making.made)
    names = list(cases) if cases is not None else list(making.plan.outline.cases)
    backends = sorted({c.backend for c in making.plan.outline.cases.values()})
    gate_dir = making.work_dir / GATE
    earlier = gate_dir if (gate_dir / rundir.MANIFEST).is_file() else None
    if earlier is None and gate_dir.exists():  # begun and cut before its manifest: a directory of its own
        gate_dir = next(making.work_dir / f"{GATE}-{n}" for n in range(2, 1000)
                        if not (making.work_dir / f"{GATE}-{n}").exists())
    what = f"evidence gate: {len(names)} cases on {len(backends)} backend(s) ({', '.join(backends)}) against the new " \
           f"baselines{' (continued)' if earlier else ''}"
    with making.clock.step("evidence gate", "", what):
        run = gate_once(RunRequest(checked, None if earlier else gate_dir, cases, resume=earlier), making.command, jobs)
    asked = set(making.plan.cases)
    failing, not_judged = [], {}
    for name in names:
        result = run.results.get(name)
        if result is not None and result.status == Status.PASSED:
            continue
        if result is not None and result.status == Status.NO_BASELINE and name not in asked:
            not_judged[name] = result.error or "no baseline here"
            continue
        failing.append(name)
    refused = [f"evidence gate {run.verdict} with the new baselines ({', '.join(failing)}): "
               f"see {paths.display(run.run_dir)}"] if failing else []
    return replace(outcome, gate_dir=run.run_dir, gate_verdict=run.verdict, refusals=[*outcome.refusals, *refused],
                   not_judged={**outcome.not_judged, **not_judged})


def with_made(desc: LoadedDescriptor, made: Sequence[Made]) -> LoadedDescriptor:
    """The descriptor with every made baseline in place of the one of its runtime it supersedes (or beside the
    others), every other list as the lineage resolves it now (kit.descriptor.load.with_baselines)."""
    staged = [(m, m.staged) for m in made if m.staged is not None]
    return with_baselines(desc, {m.case: (path, m.superseded) for m, path in staged if m.kind.golden is not None},
                          {m.case: path for m, path in staged if m.kind is CALIBRATION},
                          {m.case: path for m, path in staged if m.kind is POWER})


def _place(plan: Plan, folders: Mapping[str, Path], made: Sequence[Made], reason: str,
           command: list[str], accept_flips: str | None, gate_verdict: str | None, signer=None) -> list[Path]:
    """Copy each blessed baseline into its folder (named by content: never over another) and write its lineage
    entry, superseding the current head of its runtime (the listed baseline, given a first entry of its own
    when it had none), signed by ``signer`` where one is given. A power record's runtime is the class of hardware
    of the record it was measured against."""
    written = []
    entries = list(plan.outline.lineage)
    for m in made:
        assert m.staged is not None  # a refusal stops before placing
        target = folders[m.kind.name] / m.staged.name
        if not target.exists():
            paths.make_dir(folders[m.kind.name], f"{m.kind} folder")
            shutil.copyfile(m.staged, target)
            written.append(target)
        parent = heads(entries, m.kind, m.case).get(normal_runtime(m.runtime))
        if parent is None and m.superseded is not None:
            parent = first_entry(plan.name, folders["lineage"], m.kind, m.case, m.superseded)
            written.append(write_entry(folders["lineage"], parent))
            if signer is not None:
                written.append(sign_entry(folders["lineage"], parent, signer))
        bt = m.backtest
        entry = LineageEntry(
            descriptor=plan.name, kind=m.kind, case=m.case, baseline=sha256_file(target),
            file=os.path.relpath(target, folders["lineage"]), runtime=normal_runtime(m.runtime),
            supersedes=parent.sha256 if parent else None, reason=reason.strip(), command=tuple(m.command or command),
            created_at=now_iso(), bounds=m.bounds,
            backtest={"evidence_gate": gate_verdict} if bt is None else {
                "replayed": bt.replayed, "flips": len(bt.flips), "skipped": len(bt.skipped),
                "unreadable": len(bt.unreadable), "accepted": accept_flips if bt.needs_acceptance else None,
                "evidence_gate": gate_verdict})
        written.append(write_entry(folders["lineage"], entry))
        if signer is not None:
            written.append(sign_entry(folders["lineage"], entry, signer))
        log.log(NOTICE, f"{m.case}: {m.kind} for {m.runtime} blessed -> {paths.display(target)}", extra=MARKUP)
    return written


def evidence_markdown(o: MakeOutcome) -> str:
    """What a pull request that adds the baselines quotes: what was made, the backtest, the evidence gate, and how
    long each step took over every call of the make."""
    verdict = "blessed" if o.blessed else "refused"
    lines = [f"## Baselines {verdict}", ""]
    for m in o.made:
        what = f"- **{m.case}** ({m.kind}, {m.runtime})"
        if m.error:
            lines.append(f"{what}: not made: {m.error}")
            continue
        bt = m.backtest
        tested = (f"; backtest over {bt.replayed} archived observations, {len(bt.flips)} verdicts flipped"
                  if bt else "")
        bounds = f"; bounds {m.bounds}" if m.bounds else ""
        bounds += f" ({movement_text(m.moves)} against the record it supersedes)" if m.moves else ""
        detects = f"; {headline({**makepower.power_summary(m.staged), 'same_class': True})}" if (
            m.kind is POWER and m.staged is not None) else ""
        lines.append(f"{what}: `{m.staged.name if m.staged else ''}`{bounds}{detects}{tested}")
        for flip in (bt.flips if bt else []):
            lines.append(f"  - {flip.source} ({flip.known}: {flip.why}): {flip.was} -> {flip.now}; {flip.first}")
    if o.power:
        lines.append(f"- power: {o.power}")
    if o.gate_verdict:
        lines.append(f"- evidence gate: **{o.gate_verdict}** ({_shown(o.gate_dir)})")
        lines += [f"  - {case}: not judged here, not asked for: {why}" for case, why in o.not_judged.items()]
    lines += ["", *[f"- refused: {r}" for r in o.refusals]] if o.refusals else []
    if o.times:
        lines += ["", f"### Time ({o.calls} call{'s' if o.calls != 1 else ''})", "",
                  *steps.steps_markdown(o.times, o.calls)]
    return "\n".join(lines) + "\n"
