"""`parity-kit baseline make`: make the baselines this runtime lacks, and bless them only on evidence.

On a host of a class the descriptor has no baselines for, an exact case has no golden and a calibrated case
either falls back to another class's bounds or cannot be judged. This command closes that gap in one step,
from the pinned release: an exact golden for each exact entry (`golden make`, as the refusal's own command
says), a calibration record for each calibrated case (`calibrate`'s clean variants). Nothing it makes is
trusted on being made:

1. the **backtest** replays each new record over every archived observation of its case that can be read
   (run directories, controls, the superseded record's samples; no engine runs): a known-bad run that would
   now pass refuses the bless, a known-good run that would now fail needs ``--accept-flips`` with a reason;
2. the **evidence gate** runs the selected cases against the new baselines, every backend on its own
   engine, and must pass.

Only then are the files placed (never over another: each is named by its content) and one lineage entry per
baseline written (kit.core.lineage), which is what makes the gate use them: a pull request shows the new
files and nothing else. The working directory keeps every sample, notebook, gate run and the evidence
(``baseline.json``, ``evidence.md``) whatever the outcome.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kit.backends import registry
from kit.baselines.adopt import first_entry
from kit.baselines.archive import Archive, read_archive
from kit.baselines.backtest import Backtest, backtest
from kit.descriptor.standing import FALLBACK, MATCH, MISSING, BaselineRow, plan_rows
from kit.calibrate.run import calibrate_case, reproducing_command
from kit.core import paths, rundir
from kit.core.baselinekind import CALIBRATION, EXACT_GOLDEN, KINDS, BaselineKind
from kit.core.calibration import load_record, measured_on
from kit.core.errors import BadInput
from kit.core.golden import load_golden
from kit.core.jsonio import atomic_write_bytes, read_json, sha256_file, write_json
from kit.core.lineage import LineageEntry, heads, write_entry
from kit.core.lineageclaims import ACCEPT_LOOSER, Movement, loosening, movement_text, movements
from kit.core.results import PASSED, now_iso
from kit.descriptor.load import LoadedDescriptor, load_descriptor, with_baselines
from kit.descriptor.plan import Plan, resolve
from kit.gate.session import gate_once
from kit.goldens.make import flag_keywords, make_golden_apart
from kit.run.notebook import run_and_render
from kit.run.output import MARKUP, NOTICE
from kit.core.records import EXACT

log = logging.getLogger(__name__)

RECORD = "baseline.json"
EVIDENCE = "evidence.md"
MAKING = "making.json"  # written first: what --resume checks
MAKING_FORMAT = "parity-kit-baseline-make/1"
EVIDENCE_NOTEBOOK = paths.NOTEBOOKS / "baseline.ipynb"
GOLDEN_LOG = "golden-make.log"  # what each golden's maker printed


@dataclass
class Made:
    """One baseline made for this runtime, where it waits until blessed, and what it would supersede."""

    kind: BaselineKind  # a makeable one: a calibration record, an exact golden
    case: str  # the case (a record) or the [goldens] entry (a golden)
    runtime: str
    staged: Path | None
    superseded: Path | None = None  # the same runtime's baseline in use now, if any
    error: str | None = None
    backtest: Backtest | None = None
    bounds: dict[str, float] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    moves: list[Movement] = field(default_factory=list)  # each bucket's bound against the record it supersedes


@dataclass
class MakeOutcome:
    work_dir: Path | None
    before: list[BaselineRow]
    made: list[Made]
    gate_dir: Path | None = None
    gate_verdict: str | None = None
    refusals: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    @property
    def blessed(self) -> bool:
        return bool(self.made) and not self.refusals

    def to_dict(self) -> dict[str, Any]:
        return {"before": [r.to_dict() for r in self.before],
                "made": [{"kind": m.kind.name, "case": m.case, "runtime": m.runtime, "staged": _shown(m.staged),
                          "superseded": _shown(m.superseded), "error": m.error, "bounds": m.bounds,
                          "moves": [{"bucket": v.bucket, "before": v.before, "after": v.after, "ratio": v.ratio,
                                     "beyond_margin": v.beyond_margin} for v in m.moves],
                          "backtest": m.backtest.to_dict() if m.backtest else None} for m in self.made],
                "gate": {"run": _shown(self.gate_dir), "verdict": self.gate_verdict},
                "refusals": self.refusals, "blessed": self.blessed, "written": [_shown(p) for p in self.written]}


def _shown(path: Path | None) -> str | None:
    return paths.display(path) if path is not None else None


def make_baselines(descriptor: str | Path, only: Sequence[str] | None = None, reason: str = "",
                   again: bool = False, accept_flips: str | None = None, archives: Sequence[str | Path] = (),
                   skip_unreadable: bool = False, jobs: int | None = None, out: str | Path | None = None,
                   command: Sequence[str] | None = None, resume: str | Path | None = None,
                   accept_looser: str | None = None) -> MakeOutcome:
    """Make what this runtime lacks among the cases ``only`` (None: all), or with ``again`` remake what it has;
    bless it on the evidence above. A record looser than the one it supersedes beyond that one's margin is
    refused unless ``accept_looser`` gives the reason (kept in its lineage entry's command). Bad input (no reason,
    no [baselines] table, an archive that cannot be read without ``skip_unreadable``) is refused before anything is
    made, and nothing is written."""
    if not reason.strip():
        raise BadInput("--reason: empty; a baseline keeps why it was made (\"new CPU class in CI\", \"torch 2.14\")")
    if accept_flips is not None and not accept_flips.strip():
        raise BadInput("--accept-flips: empty; accepting a known-good run's new failure needs its reason")
    if accept_looser is not None and not accept_looser.strip():
        raise BadInput(f"{ACCEPT_LOOSER}: empty; accepting looser bounds needs its reason")
    desc = load_descriptor(descriptor)
    # As a record keeps a command: what remakes it, without the scratch folder it was made in.
    command = reproducing_command(command or ["parity-kit", "baseline", "make", str(descriptor), "--reason", reason,
                                              *([ACCEPT_LOOSER, accept_looser] if accept_looser else [])])
    plan = resolve(desc, only)
    folders = _folders(plan)
    before = plan_rows(plan)
    targets = [r for r in before if r.standing in (MISSING, FALLBACK) or (again and r.standing == MATCH)]
    targets = [r for r in targets if r.kind.makeable]
    if not targets:
        log.log(NOTICE, "every selected case has baselines of this runtime's own: nothing to make", extra=MARKUP)
        return MakeOutcome(None, before, [])
    roots = [Path(a) for a in archives] or ([paths.runs_root()] if paths.runs_root().is_dir() else [])
    # The archive is read before anything is made: a run that cannot be read is bad input, not a late refusal.
    archived = {r.case: _archive(roots, r.case, skip_unreadable) for r in targets if r.kind.backtested}
    work_dir = _resumed(Path(resume), plan) if resume is not None else _begin(
        paths.claim_empty_dir(out or rundir.new_run_dir("baseline", plan.name), "--out", "baseline make"), plan)
    made = [m for kind, maker in MAKERS.items()
            for m in maker(desc, plan, [r for r in targets if r.kind is kind], work_dir, command)]
    outcome = MakeOutcome(work_dir, before, made)
    outcome.refusals += [f"{m.case}: {m.error}" for m in made if m.error]
    for m in made:
        if m.kind.backtested and m.staged is not None:
            m.backtest = _backtest(m, archived[m.case], roots, _drift_alpha(plan, m.case))
            outcome.refusals += _judge_backtest(m.backtest, accept_flips)
        outcome.refusals += _judge_moves(m, accept_looser)
    if not outcome.refusals:
        _evidence_gate(desc, plan, made, work_dir, jobs, command, outcome)
    if outcome.blessed:
        outcome.written = _place(plan, folders, made, reason, command, accept_flips, outcome.gate_verdict)
    write_json(work_dir / RECORD, outcome.to_dict())
    atomic_write_bytes(work_dir / EVIDENCE, evidence_markdown(outcome).encode("utf-8"))
    _render_evidence(work_dir)
    return outcome


def _render_evidence(work_dir: Path) -> None:
    """The evidence notebook and its HTML, for the pull request; a failure to render loses nothing (the record
    and evidence.md are written) and is said in one line."""
    out = work_dir / EVIDENCE_NOTEBOOK.name.replace("baseline", "evidence")
    built = run_and_render(EVIDENCE_NOTEBOOK, out, {"work_dir": str(work_dir)}, 300, work_dir / "evidence.kernel.log")
    if built.error:
        log.error(f"evidence notebook not rendered in full: {built.error}; the record is {work_dir / RECORD}")


def _begin(work_dir: Path, plan: Plan) -> Path:
    """Mark a fresh working directory as this descriptor's, so that --resume may continue it and nothing else."""
    write_json(work_dir / MAKING, {"format": MAKING_FORMAT, "descriptor": str(plan.path),
                                   "descriptor_sha256": plan.sha256, "started_at": now_iso()})
    return work_dir


def _resumed(work_dir: Path, plan: Plan) -> Path:
    """A working directory an interrupted `baseline make` of this very descriptor left: its finished calibration
    samples and staged goldens are reused, nothing else."""
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


def _make_goldens(desc: LoadedDescriptor, plan: Plan, rows: Sequence[BaselineRow], work_dir: Path,
                  command: list[str]) -> list[Made]:
    """One exact golden per exact [goldens] entry this runtime lacks, made as `golden make` makes it, with the
    flags the entry's goldens were made with and the case's options that decide the runtime."""
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
                "--kind", EXACT, "--top-k", str(first.top_k), *flags, "--out", str(work_dir / "goldens")]
        if info.kernel != paths.MAIN_KERNEL:
            made.append(Made(EXACT_GOLDEN, entry, spec.runtime, None,
                             error=f"its golden is made in {info.name}'s own environment: run `parity-kit "
                                   f"{shlex.join(argv)}` there"))
            continue
        superseded = None if row.standing == MISSING else Path(spec.golden_path)
        staged = _staged_golden(work_dir / "goldens", spec.runtime)  # made by an interrupted run of this make
        if staged is None:
            log.log(NOTICE, f"making an exact golden of {entry} for {spec.runtime}", extra=MARKUP)
            # `golden make` called as a function, in a process of its own (make_golden_apart says why)
            golden = make_golden_apart(work_dir / "goldens", paths.display(spec.model_path),
                                       paths.display(spec.fixture_path), EXACT, first.top_k,
                                       ["parity-kit", "-q", *argv], work_dir / GOLDEN_LOG, backend=info.name,
                                       **flag_keywords(flags))
            if golden.path is None or not golden.path.is_file():
                made.append(Made(EXACT_GOLDEN, entry, spec.runtime, None,
                                 error=f"golden make failed: {golden.error or 'no output'}"))
                continue
            staged = golden.path
        made.append(Made(EXACT_GOLDEN, entry, spec.runtime, staged, superseded,
                         command=["parity-kit", *argv[:-2]]))
    return made


def _staged_golden(folder: Path, runtime: str) -> Path | None:
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if load_golden(path).provenance.get("runtime") == runtime:
            return path
    return None


def _make_records(desc: LoadedDescriptor, plan: Plan, rows: Sequence[BaselineRow], work_dir: Path,
                  command: list[str]) -> list[Made]:
    """A calibration record per case, measured here with its clean variants (calibrate's notebooks)."""
    if not rows:
        return []
    names = [r.case for r in rows]
    measuring = resolve(desc, names, resolve_calibration=False)  # the case as measured: none of its bounds
    made = []
    for row in rows:
        done = calibrate_case(measuring, measuring.case(row.case).spec, paths.make_dir(work_dir / "calibrate",
                              "calibration directory"), paths.make_dir(work_dir / "calibrations",
                              "calibrations directory"), command)
        runtime = measured_on({"fingerprint": done.record.fingerprint}) if done.record else None
        superseded = Path(row.file) if row.standing == MATCH and row.file else None
        made.append(Made(CALIBRATION, row.case, runtime or "this host", done.path, superseded, done.error,
                         bounds=dict(done.record.bounds) if done.record else {}, command=command))
    return made


# How `baseline make` makes each kind it makes (kit.core.baselinekind says which): making runs the commands above
# the kinds' layer, so it lives here, one maker per makeable kind, in the order they are made.
Maker = Callable[[LoadedDescriptor, Plan, Sequence[BaselineRow], Path, list[str]], list[Made]]
MAKERS: Mapping[BaselineKind, Maker] = {EXACT_GOLDEN: _make_goldens, CALIBRATION: _make_records}
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


def _judge_moves(m: Made, accept_looser: str | None) -> list[str]:
    """How far a new record's bounds moved from the record it supersedes (kept in ``m.moves`` for the evidence),
    and the refusal of a loosening beyond that record's margin that no ``accept_looser`` reason covers."""
    if m.kind is not CALIBRATION or m.staged is None or m.superseded is None:
        return []
    m.moves = movements(load_record(m.superseded), load_record(m.staged))
    too_loose = loosening(m.moves)
    if too_loose and accept_looser is None:
        return [f"{m.case}: the new record loosens {too_loose}: find why its noise grew, or bless it with "
                f"{ACCEPT_LOOSER} REASON"]
    return []


def _judge_backtest(bt: Backtest, accept_flips: str | None) -> list[str]:
    refusals = [f"{bt.case}: backtest: {f.source}: known bad ({f.why}), {f.was} when it ran, would pass under the "
                f"new record" for f in bt.refusals]
    if bt.needs_acceptance and accept_flips is None:
        refusals += [f"{bt.case}: backtest: {f.source}: known good ({f.why}), {f.was} when it ran, would fail: "
                     f"{f.first} (accept with --accept-flips \"why\")" for f in bt.needs_acceptance]
    return refusals


def evidence_cases(plan: Plan, made: Sequence[Made]) -> list[str]:
    """The cases the evidence gate runs: the selected ones, and every other case judged against a golden entry a
    made baseline is of, so that where the descriptor has a second backend on that golden, it must agree."""
    # A golden is made for its [goldens] entry, a record for its case.
    entries = {m.case if m.kind.golden is not None else plan.outline.cases[m.case].golden
               for m in made if m.staged is not None}
    return [name for name, c in plan.outline.cases.items() if name in plan.cases or c.golden in entries]


def _evidence_gate(desc: LoadedDescriptor, plan: Plan, made: Sequence[Made], work_dir: Path,
                   jobs: int | None, command: list[str], outcome: MakeOutcome) -> None:
    """The selected cases, and the other backends' cases on the same goldens, against the new baselines: the
    pinned environment must pass with them, and a second backend agree where the descriptor has one."""
    checked = with_made(desc, plan, made)
    names = evidence_cases(plan, made)
    backends = sorted({plan.outline.cases[n].backend for n in names})
    log.log(NOTICE, f"evidence gate: {len(names)} cases on {len(backends)} backend(s) ({', '.join(backends)}) "
                    "against the new baselines", extra=MARKUP)
    # A resumed make checks again, into a run directory of its own: the gate never writes over an earlier run.
    gate_dir = next(work_dir / f"gate{'' if n == 1 else f'-{n}'}" for n in range(1, 1000)
                    if not (work_dir / f"gate{'' if n == 1 else f'-{n}'}").exists())
    run = gate_once(checked, gate_dir, names, None, command, jobs)
    outcome.gate_dir, outcome.gate_verdict = run.run_dir, run.verdict
    if run.verdict != PASSED:
        failing = [n for n in names if (r := run.results.get(n)) is None or r.status != PASSED]
        outcome.refusals.append(f"evidence gate {run.verdict} with the new baselines ({', '.join(failing)}): "
                                f"see {paths.display(run.run_dir)}")


def with_made(desc: LoadedDescriptor, plan: Plan, made: Sequence[Made]) -> LoadedDescriptor:
    """The descriptor with every made baseline in place of the one of its runtime it supersedes (or beside
    the others), every list as the lineage resolves it now."""
    goldens: dict[str, list[Path]] = {}
    records: dict[str, list[Path]] = {}
    for m in made:
        if m.staged is None:
            continue
        if m.kind.golden is not None:
            kept = [f for f in plan.goldens[m.case].files if m.superseded is None or f != m.superseded.resolve()]
            goldens[m.case] = [m.staged, *kept]
        else:
            kept = [r.path for r in plan.case(m.case).records
                    if r.path is not None and measured_on({"fingerprint": r.fingerprint}) != m.runtime]
            records[m.case] = [m.staged, *kept]
    return with_baselines(desc, goldens, records)


def _place(plan: Plan, folders: Mapping[str, Path], made: Sequence[Made], reason: str,
           command: list[str], accept_flips: str | None, gate_verdict: str | None) -> list[Path]:
    """Copy each blessed baseline into its folder (named by content: never over another) and write its lineage
    entry, superseding the current head of its runtime (the listed baseline, given a first entry of its own
    when it had none)."""
    written = []
    entries = list(plan.outline.lineage)
    for m in made:
        assert m.staged is not None  # a refusal stops before placing
        target = folders[m.kind.name] / m.staged.name
        if not target.exists():
            paths.make_dir(folders[m.kind.name], f"{m.kind} folder")
            shutil.copyfile(m.staged, target)
            written.append(target)
        parent = heads(entries, m.kind.name, m.case).get(m.runtime)
        if parent is None and m.superseded is not None:
            parent = first_entry(plan.name, folders["lineage"], m.kind, m.case, m.superseded)
            written.append(write_entry(folders["lineage"], parent))
        bt = m.backtest
        entry = LineageEntry(
            descriptor=plan.name, kind=m.kind.name, case=m.case, baseline=sha256_file(target),
            file=os.path.relpath(target, folders["lineage"]), runtime=m.runtime,
            supersedes=parent.sha256 if parent else None, reason=reason.strip(), command=tuple(m.command or command),
            created_at=now_iso(), bounds=m.bounds,
            backtest={"evidence_gate": gate_verdict} if bt is None else {
                "replayed": bt.replayed, "flips": len(bt.flips), "skipped": len(bt.skipped),
                "unreadable": len(bt.unreadable), "accepted": accept_flips if bt.needs_acceptance else None,
                "evidence_gate": gate_verdict})
        written.append(write_entry(folders["lineage"], entry))
        log.log(NOTICE, f"{m.case}: {m.kind} for {m.runtime} blessed -> {paths.display(target)}", extra=MARKUP)
    return written


def evidence_markdown(o: MakeOutcome) -> str:
    """What a pull request that adds the baselines quotes: what was made, the backtest, the evidence gate."""
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
        lines.append(f"{what}: `{m.staged.name if m.staged else ''}`{bounds}{tested}")
        for flip in (bt.flips if bt else []):
            lines.append(f"  - {flip.source} ({flip.known}: {flip.why}): {flip.was} -> {flip.now}; {flip.first}")
    if o.gate_verdict:
        lines.append(f"- evidence gate: **{o.gate_verdict}** ({_shown(o.gate_dir)})")
    lines += ["", *[f"- refused: {r}" for r in o.refusals]] if o.refusals else []
    return "\n".join(lines) + "\n"
