"""A descriptor resolved once, for this host and run, into an immutable plan (docs/architecture.md, The flow).

Loading validates the document; resolving it here chooses everything a run depends on (each case's spec,
resources, retries, the golden and calibration record for this runtime, every record a case lists) and
computes every ``file:line`` a message may name. The preflight, the executors and the commands read the plan
and never the document, so what a run does is decided in one place, before it starts, and cannot change
while it runs. Everything here is frozen: tuples and read-only mappings, no dict a caller could edit.

Two views: an ``Outline`` (every case and entry, as the document states them; it reads no other file), for the
commands that pick their cases before resolving them; and a ``Plan`` (the outline and the selected cases,
resolved).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from kit.core.records import paths
from kit.core.baselines.baselinekind import CALIBRATION, KINDS, POWER
from kit.core.baselines.lineage import LineageEntry
from kit.core.noise.calibration import CalibrationRecord
from kit.core.errors import BadInput
from kit.core.noise.falsefailure import Budget, bounds_left_out, statement
from kit.core.records.spec import CaseSpec
from kit.descriptor.load import LoadedDescriptor
from kit.descriptor.schema import Resources, case_golden_kind, golden_kind


def _frozen(items: Iterable[tuple[str, Any]]) -> Mapping[str, Any]:
    return MappingProxyType(dict(items))


@dataclass(frozen=True)
class CaseWhere:
    """``file:line`` of each key of a case that a message may name."""

    case: str
    backend: str
    golden: str
    resources: str
    repeat_prompts: str
    decode: str
    reference: str
    model_digest: str  # the digest its model folder is held to: [model]'s, or its [models] entry's
    calibration: str  # the key and its name: ``file:line: cases.NAME.calibration``


@dataclass(frozen=True)
class CaseOutline:
    """A case as the document states it, before anything is resolved."""

    name: str
    backend: str
    golden: str | None  # the [goldens] entry it names; None when judged against an in-kernel reference
    golden_kind: str
    model: str | None  # the [models] entry it scores; None: the descriptor's [model]
    calibrated: bool
    kernel: str  # the kernel it runs in outside a named release
    where: CaseWhere


@dataclass(frozen=True)
class ModelPin:
    path: Path
    digest: str
    where: str  # ``file:line`` of the pinned digest


@dataclass(frozen=True)
class GoldenEntry:
    name: str
    kind: str
    files: tuple[Path, ...]  # one, or for an exact entry one per runtime
    where: str


@dataclass(frozen=True)
class ReleasePin:
    name: str
    description: str
    builds: Mapping[str, Mapping[str, Any]]  # backend -> its build as the descriptor states it
    where: str

    def identity(self) -> dict:
        """The release as a manifest records it."""
        return {"name": self.name, "description": self.description,
                "backends": {b: _identity(built) for b, built in self.builds.items()}}


def _identity(built: Mapping[str, Any]) -> dict:
    return {"kernel": built["kernel"], "version": built["version"], "source_commit": built["source_commit"],
            "wheels": dict(built["wheels"]), "options": dict(built["options"])}


@dataclass(frozen=True)
class Outline:
    """Every case and entry of a descriptor, with the locations messages name; reads no file but the
    descriptor's own."""

    path: Path
    name: str
    sha256: str  # of the bytes the descriptor was loaded from (the file as it was read)
    fixture: Path
    model: ModelPin
    models: Mapping[str, ModelPin]
    goldens: Mapping[str, GoldenEntry]
    releases: Mapping[str, ReleasePin]
    cases: Mapping[str, CaseOutline]
    # The descriptor's lineage entries (kit.core.baselines.lineage), read once: where each baseline in use came from.
    lineage: tuple[LineageEntry, ...] = ()
    # [baselines]: the lineage folder and where new calibration records and goldens go; None: keeps no lineage.
    baseline_folders: Mapping[str, Path] | None = None
    # The folder those stay inside ([baselines] root, else the descriptor's repository); None: keeps no lineage.
    tree_root: Path | None = None

    def no_case(self, name: str) -> str:
        """The refusal of a case name the descriptor does not define."""
        return f"{paths.display(self.path)}: no case named {name!r} (cases: {', '.join(self.cases)})"

    def release(self, name: str) -> ReleasePin:
        """A named release, refused in the words LoadedDescriptor.release uses."""
        if name not in self.releases:
            known = ", ".join(self.releases) or "none"
            raise BadInput(f"{paths.display(self.path)}: no release named {name!r} "
                           f"(releases: {known}; add a [releases.{name}] table)")
        return self.releases[name]


@dataclass(frozen=True)
class CasePlan:
    """One case, resolved: everything its run and its messages need."""

    spec: CaseSpec
    outline: CaseOutline
    resources: Resources  # frozen (the schema's models are)
    retries: int
    # Every calibration record the case lists, loaded when it was resolved (none when it is not calibrated, or
    # resolved without its bounds): the preflight holds each to the case, whichever this host chose.
    records: tuple[CalibrationRecord, ...]
    # Where the kernel it runs in is named: its release's `kernel` key under a release; empty otherwise.
    release_kernel_where: str = ""
    # Every power record the case uses (those it lists, and its lineage's heads in place of those they supersede),
    # where its spec was resolved with its calibration: what `baseline make` measures a new one beside.
    power_files: tuple[Path, ...] = ()

    @property
    def name(self) -> str:
        """The case's name."""
        return self.spec.name

    @property
    def where(self) -> CaseWhere:
        """Where each of the case's keys is in the descriptor, for messages about values that parsed but are wrong."""
        return self.outline.where

    @property
    def kernel(self) -> str:
        """The Jupyter kernel the case runs in."""
        return self.spec.kernel

    @property
    def timeout_s(self) -> float:
        """How long the case may run before its kernel is killed."""
        return self.spec.timeout_s


@dataclass(frozen=True)
class Plan:
    """A descriptor resolved for one run on this host: its outline, the release it runs against, and the
    selected cases in the descriptor's order."""

    outline: Outline
    release: ReleasePin | None
    cases: Mapping[str, CasePlan]
    infrastructure_retries: int = 1  # [defaults] infrastructure_retries (kit.gate.retry)
    # The gate's false-failure rate and its split over the descriptor's drift cases (kit.descriptor.falsefailure).
    false_failure: Budget = Budget(0.0, (), False)

    @property
    def path(self) -> Path:
        """The descriptor file the plan was resolved from."""
        return self.outline.path

    def false_failure_statement(self) -> dict:
        """What a run states of its false-failure rate: the budget, the per-prompt bounds' leave-one-out count over
        the records the selected cases use, and the one line (``statement``) for result.json, evidence.md and the
        summary."""
        records = []
        for case in self.cases.values():
            chosen = (case.spec.calibration or {}).get("sha256")
            records += [r for r in case.records if r.sha256 == chosen]
        failed, tried = bounds_left_out(records)
        b = self.false_failure
        return {**b.to_dict(), "bounds_left_out": {"failed": failed, "variants": tried},
                "statement": statement(b, (failed, tried))}

    @property
    def name(self) -> str:
        """The descriptor's name: what the run is filed under."""
        return self.outline.name

    @property
    def sha256(self) -> str:
        """The descriptor's digest, as the run's manifest records it: which bytes decided the run."""
        return self.outline.sha256

    @property
    def fixture(self) -> Path:
        """The fixture every case scores."""
        return self.outline.fixture

    @property
    def model(self) -> ModelPin:
        """The descriptor's model, pinned by its digest."""
        return self.outline.model

    @property
    def goldens(self) -> Mapping[str, GoldenEntry]:
        """The descriptor's [goldens] entries, as its outline states them."""
        return self.outline.goldens

    @property
    def models(self) -> Mapping[str, ModelPin]:
        """The [models] entries the selected cases score."""
        return _frozen((c.outline.model, self.outline.models[c.outline.model]) for c in self.cases.values()
                       if c.outline.model is not None)

    @property
    def specs(self) -> list[CaseSpec]:
        """The selected cases' specs, in the descriptor's order: what the executor runs."""
        return [c.spec for c in self.cases.values()]

    def case(self, name: str) -> CasePlan:
        """The plan of one selected case, by name."""
        return self.cases[name]


def outline(desc: LoadedDescriptor) -> Outline:
    """The descriptor's outline: every case and entry, as stated, with their locations."""
    doc = desc.doc
    return Outline(
        path=desc.path, name=desc.name, sha256=desc.sha256, fixture=desc.resolve(doc.fixture.path),
        model=ModelPin(desc.resolve(doc.model.path), doc.model.digest, desc.where("model", "digest")),
        models=_frozen((n, ModelPin(desc.resolve(m.path), m.digest, desc.where("models", n, "digest")))
                       for n, m in doc.models.items()),
        goldens=_frozen((n, GoldenEntry(n, golden_kind(n), tuple(desc.baselines.golden_files(n)),
                                        desc.where("goldens", n))) for n in doc.goldens),
        releases=_frozen((n, ReleasePin(n, r.description,
                                        _frozen((b, MappingProxyType(built.model_dump()))
                                                for b, built in r.backends.items()),
                                        desc.where("releases", n)))
                         for n, r in doc.releases.items()),
        cases=_frozen((n, _case_outline(desc, n)) for n in desc.cases), lineage=tuple(desc.baselines.lineage()),
        baseline_folders=_baseline_folders(desc),
        tree_root=desc.baselines.tree_root() if desc.doc.baselines else None)


def _baseline_folders(desc: LoadedDescriptor) -> Mapping[str, Path] | None:
    b = desc.doc.baselines
    if b is None:
        return None
    # Keyed by kind name: where `baseline make` places each kind it makes (the kind names its [baselines] key);
    # power records beside the calibration records they were measured against, unless the table says otherwise.
    stated = {k.name: getattr(b, str(k.folder)) for k in KINDS if k.makeable}
    folders = {name: desc.resolve(f) for name, f in stated.items() if f is not None}
    folders.setdefault(POWER.name, folders[CALIBRATION.name] / "power")
    return _frozen([("lineage", desc.resolve(b.lineage)), *folders.items()])


def _case_outline(desc: LoadedDescriptor, name: str) -> CaseOutline:
    c = desc.cases[name]
    at = lambda *key: desc.where("cases", name, *key)  # noqa: E731
    where = CaseWhere(case=at(), backend=at("backend"), golden=at("golden"), resources=at("resources"),
                      repeat_prompts=at("repeat_prompts"), decode=at("decode"), reference=at("reference"),
                      model_digest=desc.model_where(c), calibration=desc.calibration_where(name))
    return CaseOutline(name=name, backend=c.backend, golden=c.golden, golden_kind=case_golden_kind(c),
                       model=c.model, calibrated=c.calibration is not None, kernel=desc.kernel(name), where=where)


def resolve(desc: LoadedDescriptor, only: Sequence[str] | None = None, release: str | None = None,
            resolve_calibration: bool = True) -> Plan:
    """The plan of a run of ``only`` (None: every case) against ``release`` (None: each case's own kernel).
    ``resolve_calibration=False`` leaves calibrated cases without bounds (what calibrating measures). Every
    refusal is the descriptor's own (LoadedDescriptor.case_specs)."""
    specs = desc.case_specs(list(only) if only else None, release, resolve_calibration)
    lines = outline(desc)
    pin = lines.releases[release] if release else None
    cases = []
    for spec in specs:
        own = desc.cases[spec.name]
        kernel_where = desc.where("releases", release, "backends", spec.backend, "kernel") if release else ""
        power = tuple(desc.baselines.power_files(spec.name, own)) if spec.calibration else ()
        cases.append((spec.name, CasePlan(spec, lines.cases[spec.name], own.resources, desc.retries(spec.name),
                                          _records(desc, spec), kernel_where, power)))
    return Plan(lines, pin, _frozen(cases), desc.doc.defaults.infrastructure_retries, desc.false_failure_budget())


def _records(desc: LoadedDescriptor, spec: CaseSpec) -> tuple[CalibrationRecord, ...]:
    """The records a case's calibration lists, where its spec was resolved with one (none where calibrating
    measures what it leaves unbounded); read once, with the spec's."""
    return tuple(desc.baselines.calibration_records(spec.name, desc.cases[spec.name])) if spec.calibration else ()


def calibration_lists(desc: LoadedDescriptor, names: Sequence[str]) -> dict[str, tuple[CalibrationRecord, ...]]:
    """Every record each calibrated case among ``names`` lists, loaded (no record chosen: no look at the
    hardware); what a regen measures again."""
    return {n: tuple(desc.baselines.calibration_records(n, desc.cases[n])) for n in names if desc.cases[n].calibration}
