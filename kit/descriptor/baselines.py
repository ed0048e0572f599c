"""Which baseline each case of a descriptor stands on: its golden (a semantic one, or the exact one of this
host's runtime), its in-kernel reference, or its calibration record with the power records measured against it,
with the lineage's current baselines in place of those they supersede.

The loaded descriptor (kit.descriptor.load) knows the document: its file, its lines, its cases and how they
resolve into specs. This module knows the baselines the document names and reads them: goldens, lineage entries,
calibration and power records. Each is read once per loaded descriptor and on demand, so no method depends on
another having run first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Protocol

from kit.backends import registry
from kit.core.records import paths
from kit.core.baselines.baselinekind import CALIBRATION, EXACT_GOLDEN, POWER, BaselineKind, of_golden
from kit.core.noise.calibration import (CalibrationRecord, FallbackRule, hardware_change, load_record, measured_on,
                                        record_for_host,
                                        same_class)
from kit.core.errors import BadInput
from kit.core.baselines.golden import load_golden
from kit.core.records.jsonio import sha256_file
from kit.core.baselines.lineage import LineageEntry, chain, heads, load_folder, normal_runtime, of_descriptor
from kit.core.baselines.lineageclaims import (ACCEPT_LOOSER, accepted_looser, agreed, bounds_claim, class_claim,
                                              loosening, movement_text, movements)
from kit.core.noise.power import detectable_of, load_power, named_calibration, read_power
from kit.core.records.records import NoBaseline
from kit.core.noise.falsefailure import Budget
from kit.descriptor.host import Host
from kit.descriptor.schema import CaseBase, Descriptor, case_golden_kind, golden_kind


class LoadedDocument(Protocol):
    """What the baselines read of a loaded descriptor (kit.descriptor.load.LoadedDescriptor): its document, where
    its files and keys are, its cases and the host they resolve for. Stated here rather than imported, since the
    loaded descriptor holds its Baselines: each module then imports only the one below it."""

    path: Path
    doc: Descriptor
    cases: dict[str, CaseBase]
    host: Host
    lineage_applied: bool

    @property
    def baselines(self) -> Baselines:
        """The descriptor's own Baselines, read once, which `baseline verify` and `baseline log` ask."""

    def resolve(self, relative: str) -> Path:
        """A path the document names, relative to the descriptor's folder: where a baseline file is read."""

    def resolve_name(self, relative: str) -> Path:
        """As ``resolve``, with the file's own name kept: a content-addressed record is checked under the name the
        descriptor gives it, not its link's target's."""

    def where(self, *loc: str) -> str:
        """``file:line`` of a key, so that a refused baseline names the line of the document that listed it."""

    def calibration_where(self, name: str) -> str:
        """``file:line: cases.NAME.calibration`` of a case: the start of every refusal of its records."""

    def false_failure_budget(self) -> Budget:
        """The descriptor's false-failure budget, whose per-case share is the drift alpha a record is used with."""


class Baselines:
    """The baselines of one loaded descriptor's cases (``LoadedDescriptor.baselines``)."""

    def __init__(self, desc: LoadedDocument) -> None:
        self.desc = desc
        self._exact: dict[str, list] = {}  # an exact entry's goldens, read once for every case that uses it
        self._records: dict[tuple[str, tuple[str, ...]], list[CalibrationRecord]] = {}  # a case's list, read once
        self._lineage: list[LineageEntry] | None = None
        self._digests: dict[tuple[Path, int, int], str] = {}  # a file's SHA-256, by its path, time and size
        self._root: Path | None = None

    def golden_files(self, name: str) -> list[Path]:
        """Every file a [goldens] entry names, resolved: one, or for an exact entry one per runtime, the
        lineage's current goldens of the entry in place of those they supersede."""
        files = self.desc.doc.goldens[name]
        listed = [self.desc.resolve(f) for f in _listed(files)]
        kind = of_golden(golden_kind(name))
        if not kind.per_runtime:
            return listed
        return self.with_lineage(kind, name, listed, self.desc.where("goldens", name))

    def tree_root(self) -> Path:
        """The folder the lineage's baselines and `baseline make`'s folders stay inside: ``[baselines] root``, else
        the repository that holds the descriptor (the nearest folder above it with ``.git``), else the descriptor's
        parent folder (the layout the kit's own descriptors use: descriptors/ beside calibrations/)."""
        if self._root is None:  # looked up once: the lineage's checks and the plan's outline all ask
            stated = self.desc.doc.baselines.root if self.desc.doc.baselines else None
            self._root = self.desc.resolve(stated) if stated is not None else tree_root(self.desc.path)
        return self._root

    def lineage_folder(self) -> Path | None:
        """The folder of the descriptor's lineage entries (``[baselines] lineage``); None: it keeps none."""
        return self.desc.resolve(self.desc.doc.baselines.lineage) if self.desc.doc.baselines else None

    def _entry_file(self, entry: LineageEntry) -> tuple[str, Path]:
        """How a refusal names a lineage entry, and the file it names, resolved."""
        folder = self.lineage_folder()
        assert folder is not None  # entries come from it
        return f"lineage entry {paths.display(entry.path or folder)}", (folder / entry.file).resolve()

    def lineage(self) -> list[LineageEntry]:
        """The lineage entries of this descriptor's cases in its folder (the folder may serve several
        descriptors), each judged by its bytes and every chain checked, read once."""
        if self._lineage is None and self.desc.lineage_applied:
            self._lineage = []
        if self._lineage is None:
            folder = self.lineage_folder()
            try:
                self._lineage = of_descriptor(load_folder(folder), self.desc.doc.name) if folder is not None else []
            except BadInput as exc:
                raise BadInput(f"{self.desc.where('baselines', 'lineage')}: baselines.lineage: {exc}") from None
        return self._lineage

    def with_lineage(self, baseline: BaselineKind, case: str, listed: list[Path], where: str) -> list[Path]:
        """``listed`` with every baseline a lineage entry supersedes left out and the chains' heads put first
        (a head is the baseline its runtime uses now; a runtime's first baseline is a chain of one). A head's
        file must hold the bytes its entry names."""
        entries = self.lineage()
        if not any(e.kind is baseline and e.case == case for e in entries):
            return listed
        current = heads(entries, baseline, case)
        superseded = {e.baseline for e in entries if e.kind is baseline and e.case == case} - {
            h.baseline for h in current.values()}
        digests = {f: self._sha256(f) for f in listed}
        kept = [f for f in listed if digests[f] not in superseded]
        kept_digests = {digests[f] for f in kept}
        added = []
        root = self.tree_root()
        for head in current.values():
            shown, path = self._entry_file(head)
            if head.baseline not in kept_digests and not path.is_relative_to(root):
                # A baseline the descriptor does not list reaches the gate through its entry alone: a diff of the
                # tree must show it.
                raise BadInput(f"{where}: {shown} names "
                               f"{paths.display(path)}, outside {paths.display(root)}; a lineage entry names a "
                               "baseline inside the descriptor's tree (set [baselines] root to widen it)")
            problem = self._file_problem(head)
            if problem:
                raise BadInput(f"{where}: {problem}")
            if head.baseline not in kept_digests:
                added.append(path)
        return added + kept

    def _sha256(self, path: Path) -> str:
        """A file's SHA-256, hashed once for every case and check that asks while it is unchanged: goldens of a GPU
        descriptor are hundreds of megabytes, and a lineage head is also a listed file that every case of its
        golden names."""
        st = path.stat()
        key = (path.resolve(), st.st_mtime_ns, st.st_size)
        if key not in self._digests:
            self._digests[key] = sha256_file(path)
        return self._digests[key]

    def _file_problem(self, entry: LineageEntry) -> str | None:
        """Why the file a lineage entry names is not what the entry says (missing, or other bytes than it names),
        in one line naming both; None when it is."""
        shown, path = self._entry_file(entry)
        if not path.is_file():
            return f"{shown} names {paths.display(path)}, which does not exist"
        if (digest := self._sha256(path)) != entry.baseline:
            return f"{shown} names {paths.display(path)} with SHA-256 {entry.baseline}; the file's is {digest}"
        return None

    def case_golden(self, name: str, case: CaseBase) -> tuple[Path | None, NoBaseline | None, str]:
        """The golden a case is judged against on this host, the reason it has none, and the case's runtime
        key. An exact golden holds only on the runtime that made it, and never falls back to another's: a
        case whose runtime has none reads "no baseline for this runtime", with the command that makes one."""
        entry = str(case.golden)
        if not of_golden(golden_kind(entry)).per_runtime:
            return self.golden_files(entry)[0], None, ""
        runtime = self.desc.host.runtime(name, case.backend, case.backend_options())
        if entry not in self._exact:
            self._exact[entry] = [load_golden(f) for f in self.golden_files(entry)]
        goldens = self._exact[entry]
        chosen = registry.choose_for_runtime(goldens, runtime)
        if chosen is not None:
            return chosen.path, None, runtime
        return None, self._no_golden_here(entry, goldens, runtime, case), runtime

    def _no_golden_here(self, name: str, goldens: list, runtime: str, case: CaseBase) -> NoBaseline:
        made_on = "; ".join(dict.fromkeys(str(registry.golden_runtime(g.provenance) or g.provenance.get("hardware"))
                                          for g in goldens))
        first, doc = goldens[0], self.desc.doc
        model = next((m.path for m in (doc.model, *doc.models.values()) if m.digest == first.model_digest),
                     doc.model.path)
        command = registry.remake_command(first, paths.display(self.desc.resolve(model)),
                                          paths.display(self.desc.resolve(doc.fixture.path)),
                                          paths.display(first.path.parent), case.backend_options())
        info = registry.registry().get(str(first.provenance.get("backend")))
        env = (f" with the parity-kit of {info.name}'s own environment"
               if info is not None and info.kernel != paths.MAIN_KERNEL else "")
        return NoBaseline(EXACT_GOLDEN.name,
                          f"no baseline for this runtime: goldens.{name} ({self.desc.where('goldens', name)}) holds no "
                          f"exact golden made on {runtime}; its goldens were made on {made_on}", command,
                          f"{env} and add it to the list")

    def reference(self, name: str, c: CaseBase) -> dict:
        """An exact case's in-kernel reference, resolved: the model folder, its pinned digest, the options."""
        ref = c.reference
        assert ref is not None
        model = self.desc.doc.model if ref.model is None else self.desc.doc.models[ref.model]
        return {"model_path": str(self.desc.resolve(model.path)), "model_digest": model.digest,
                "model": ref.model or "model", "options": {**c.backend_options(), **ref.options}}


    def calibration(self, name: str, c: CaseBase) -> dict:
        """The reference of the calibration record a case names (kit.core.noise.calibration). Whether it fits
        the case's inputs is checked by the preflight, after the inputs themselves, for every record listed."""
        where = self.desc.calibration_where(name)
        if c.bound is not None or c.bucket_bounds:
            raise BadInput(f"{where}: the case also sets {'bound' if c.bound is not None else 'bucket_bounds'}; "
                           "a bound is either hand-set or calibrated, not both")
        if not of_golden(case_golden_kind(c)).bounded:
            raise BadInput(f"{where}: an exact golden has no bound to calibrate")
        records = self.calibration_records(name, c)
        order = self.fallback_order(c)
        record, rule = record_for_host(records, c.backend_options(), order,
                                       self.desc.host.accelerator(name, c.backend_options()))
        accept = list(c.accept_noise_changes)
        if rule == FallbackRule.DEVICE and "hardware" not in accept:  # the descriptor's own order takes other hardware
            accept.append("hardware")
        reference = record.reference()
        if c.drift:  # the drift test's alpha is the gate's rate split over the descriptor's drift cases
            reference["drift"] = {**reference["drift"], "alpha": self.desc.false_failure_budget().per_case}
        return {**reference, "accept": accept, "fallback": {"order": list(order), "rule": rule}}

    def calibration_missing(self, name: str, c: CaseBase, calibration: Mapping[str, Any]) -> NoBaseline | None:
        """Why a calibrated case has no record this host may use (none measured on its class of hardware, and no
        fallback rule of the descriptor takes another's), with the command that measures one here; None when it
        has one. The same on a CPU (its instruction-set level) and a GPU (its model)."""
        if (calibration.get("fallback") or {}).get("rule") is not None:
            return None
        options = c.backend_options()
        change = hardware_change(calibration, options, self.desc.host.accelerator(name, options))
        if change is None:
            return None
        here = change[1]
        listed = sorted({measured_on({"fingerprint": r.fingerprint}) or "a class it does not name"
                         for r in self.calibration_records(name, c)})
        return NoBaseline(CALIBRATION.name,
                          f"no baseline for this hardware: cases.{name} ({self.desc.calibration_where(name)}) lists no "
                          f"calibration record measured on {here} (listed: {', '.join(listed)}), and the case accepts "
                          "no hardware change", make_command(self.desc.path, name))

    def power_files(self, name: str, c: CaseBase) -> list[Path]:
        """Every power record a case uses: those it lists, the lineage's current ones of the case in place of those
        they supersede (a chain per class of hardware, as a calibration record's), heads first."""
        where = f"{self.desc.where('cases', name, 'power')}: cases.{name}.power"
        return self.with_lineage(POWER, name, [self.desc.resolve_name(f) for f in _listed(c.power)], where)

    def power(self, name: str, c: CaseBase,
              calibration: Mapping[str, Any]) -> tuple[dict | None, float | None, NoBaseline | None]:
        """What the case can detect, the limit it is held to, and why that limit cannot be judged here. Each power
        record (listed, or a lineage head) is judged by its evidence against the calibration record it names; the
        one measured against the record this host uses is the case's, else one of another class of hardware, said
        to be so. One measured against a record the case no longer lists (a baseline since superseded through the
        lineage) says nothing of the bounds in use and is left out; one measured against a record the case never
        listed is refused. A limit with none measured against the record in use is no baseline here: "passed"
        could not say what it could detect, and `baseline make` measures it."""
        where = f"{self.desc.where('cases', name, 'power')}: cases.{name}.power"
        listed = {r.sha256: r for r in self.calibration_records(name, c)}
        superseded = {e.baseline for e in self.lineage() if e.kind is CALIBRATION and e.case == name}
        loaded, files = [], self.power_files(name, c)  # a lineage head's problem names its entry already
        try:
            for path in files:
                stated = read_power(path)
                named = named_calibration(stated, paths.display(path))
                if named in listed:
                    loaded.append(load_power(path, listed[named].reference(), stated))
                    twin = next((p for p in loaded[:-1] if p.record_sha256 == named), None)
                    if twin is not None:  # one would be used and the other's families silently not
                        raise BadInput(
                            f"{paths.display(twin.path or path)} and {paths.display(path)} were both measured against "
                            f"calibration record {named[:12]}: list one (`parity-kit power "
                            f"{paths.display(self.desc.path)} --case {name} --merge A B` makes one of both)")
                elif named not in superseded:  # never this case's record: its figures would be someone else's
                    raise BadInput(f"{paths.display(path)} was measured against calibration record {named[:12]}, "
                                   "which the case does not list, nor did it through its lineage: list the power "
                                   f"record measured against one it lists (`parity-kit power "
                                   f"{paths.display(self.desc.path)} --case {name}` measures one)")
        except BadInput as exc:
            raise BadInput(f"{where}: {exc}") from None
        limit = c.detectable_limit if c.detectable_limit is not None else self.desc.doc.defaults.detectable_limit
        chosen, same = POWER.choose(loaded, calibration["sha256"])
        missing = None
        if limit is not None and not same:
            limit_where = f"{self.desc.where('cases', name, 'detectable_limit')}: cases.{name}.detectable_limit"
            missing = NoBaseline(POWER.name, f"no baseline for this hardware: {limit_where}: a limit of {limit:g}x the "
                                 "clean error, but no power record measured against calibration record "
                                 f"{calibration['sha256'][:12]} (the one this host uses)",
                                 make_command(self.desc.path, name))
        return (detectable_of(chosen, same_class=same) if chosen is not None else None), limit, missing

    def fallback_order(self, c: CaseBase) -> list[str]:
        """The rules by which a record of other hardware may stand in for this case: the descriptor's
        ``[baselines.fallback] calibration`` (default: the same hardware only), with ``device`` added by the
        case's ``accept_noise_changes = ["hardware"]``."""
        stated = self.desc.doc.baselines
        order: list[str] = list(stated.fallback.calibration) if stated else [FallbackRule.HARDWARE.value]
        if "hardware" in c.accept_noise_changes and FallbackRule.DEVICE not in order:
            order.append(FallbackRule.DEVICE.value)
        return order

    def calibration_records(self, name: str, c: CaseBase) -> list[CalibrationRecord]:
        """Every record a case lists, each loaded (and so judged by its evidence), no two of one class of
        hardware, read once; the plan keeps them for the preflight, which holds each to the case whichever this host
        chooses."""
        files = _listed(c.calibration)
        known = self._records.get((name, tuple(files)))
        if known is not None:
            return list(known)
        where = self.desc.calibration_where(name)
        try:
            listed = self.with_lineage(CALIBRATION, name, [self.desc.resolve_name(f) for f in files], where)
            records = [load_record(f) for f in listed]
        except BadInput as exc:
            raise BadInput(f"{where}: {exc}") from None
        twins = same_class(records)
        if twins:
            first, second = twins
            assert first.path is not None and second.path is not None  # read from files, each has its path
            measured = measured_on({"fingerprint": first.fingerprint}) or "a class of hardware it does not name"
            raise BadInput(f"{where}: {paths.display(first.path)} and {paths.display(second.path)} both measured "
                           f"noise on {measured}; list one record per class of hardware")
        for record in records:
            self._check_claims(name, record, where)
        self._records[(name, tuple(files))] = records
        return list(records)

    def _check_claims(self, name: str, record: CalibrationRecord, where: str) -> None:
        """Refuse, in one line naming the entry, a lineage entry of ``record`` whose claims do not re-derive
        (``entry_problem``)."""
        for entry in [e for e in self.lineage() if e.kind is CALIBRATION and e.case == name
                      and e.baseline == record.sha256]:
            problem = self.entry_problem(entry, record)
            if problem:
                raise BadInput(f"{where}: {problem}")

    def entry_problem(self, entry: LineageEntry, record: CalibrationRecord | None = None) -> str | None:
        """What of a lineage entry's claims does not re-derive, in one line naming it (None: all do). Every entry:
        its file is there and holds the bytes it names. A calibration record's too: the bounds it states are the
        record's own, its chain is of the class of hardware the record measured, and the record loosens neither its
        parent's bounds beyond the parent's margin nor, in steps, those its chain last agreed on beyond theirs,
        unless the command that made it gave a reason (kit.core.baselines.lineageclaims). ``record``: the entry's,
        already loaded."""
        shown, path = self._entry_file(entry)
        if record is None:
            if (problem := self._file_problem(entry)) is not None:
                return problem
            if entry.kind is not CALIBRATION:
                return None
            try:
                record = load_record(path)
            except BadInput as exc:
                return f"{shown}: {exc}"
        claim = bounds_claim(entry, record) or class_claim(entry, record)
        if claim:
            return f"{shown} {claim}"
        parent = next((e for e in self.lineage() if e.sha256 == entry.supersedes), None)
        if parent is None:
            return self._new_chain_problem(entry, record, shown)
        parent_path = self._entry_file(parent)[1]
        if not parent_path.is_file():
            return (f"{shown} supersedes the record {paths.display(parent_path)}, which is gone: how its bounds "
                    "moved cannot be judged")
        try:
            too_loose = loosening(movements(load_record(parent_path), record))
        except BadInput as exc:
            return f"{shown} supersedes a record that does not load: {exc}"
        if accepted_looser(entry) is not None:
            return None
        if too_loose:
            return (f"{shown} loosens {too_loose}, and the command that made it gave no reason for that "
                    f"({ACCEPT_LOOSER} REASON)")
        return self._drift_problem(entry, record, parent, shown)

    def _drift_problem(self, entry: LineageEntry, record: CalibrationRecord, parent: LineageEntry,
                       shown: str) -> str | None:
        """A record within its parent's margin that, over the steps of its chain, loosens the bounds the chain last
        agreed on (``agreed``) beyond their margin, with no reason given by the entry that crosses it; None when it
        does not (or the agreed record is its parent, judged already)."""
        first = agreed(chain(self.lineage(), parent))
        if first is parent:
            return None
        path = self._entry_file(first)[1]
        if not path.is_file():
            return (f"{shown} is in a chain whose agreed record {paths.display(path)} is gone: how far its bounds "
                    "moved cannot be judged")
        try:
            drifted = loosening(movements(load_record(path), record), f"{paths.display(path)}'s")
        except BadInput as exc:
            return f"{shown} is in a chain whose agreed record does not load: {exc}"
        if drifted is None:
            return None
        return (f"{shown} loosens, in steps each within its parent's margin, {drifted} (its chain's first record, or "
                f"the latest whose entry accepted looser bounds), and no entry on the way gave a reason "
                f"({ACCEPT_LOOSER} REASON)")

    def _new_chain_problem(self, entry: LineageEntry, record: CalibrationRecord, shown: str) -> str | None:
        """A record that starts a chain for a class of hardware the case already had a record of (one the descriptor
        lists, outside the chain) needs a reason, as a looser one does: a new chain would otherwise put any bounds
        in place of that record's with no loosening ever judged. None when the class had none, or a reason was
        given."""
        previous = self._listed_of_class(entry)
        if previous is None or accepted_looser(entry) is not None:
            return None
        path, before = previous
        return (f"{shown} starts a new chain for {normal_runtime(entry.runtime)}, which had "
                f"{paths.display(path)} ({movement_text(movements(before, record))}); a record that does not "
                f"supersede its class's needs a reason ({ACCEPT_LOOSER} REASON), as a looser one does")

    def _listed_of_class(self, entry: LineageEntry) -> tuple[Path, CalibrationRecord] | None:
        """A calibration record the descriptor lists for the entry's case, measured on the entry's class of
        hardware and in none of the entries of its chain; None when there is none."""
        case = self.desc.cases.get(entry.case)
        if case is None or not case.calibration:
            return None
        chained = {e.baseline for e in self.lineage() if e.key == entry.key}
        for f in _listed(case.calibration):
            path = self.desc.resolve_name(f)
            try:
                listed = load_record(path)
            except BadInput:
                continue  # refused where the case is resolved, in its own words
            runtime = measured_on({"fingerprint": listed.fingerprint}) or ""
            if listed.sha256 not in chained and normal_runtime(runtime) == normal_runtime(entry.runtime):
                return path, listed
        return None

    def verify_lineage(self) -> list[str]:
        """Every entry of the descriptor's lineage judged (``entry_problem``, and a power record's own claims):
        one line per entry whose claims do not re-derive, oldest chain first."""
        return [problem for e in self.lineage() if (problem := self.entry_problem(e) or self._power_problem(e))]

    def _power_problem(self, entry: LineageEntry) -> str | None:
        """What of a power record's entry does not re-derive: the record, judged by its evidence against the
        calibration record it names (one the case lists or keeps in its lineage), and the runtime the entry states,
        which is that record's class of hardware. None for an entry of another kind, or one whose claims hold."""
        if entry.kind is not POWER:
            return None
        shown, path = self._entry_file(entry)
        try:
            stated = read_power(path)
            named = named_calibration(stated, paths.display(path))
            record = self._calibration_named(entry.case, named)
            if record is None:
                return (f"{shown}: {paths.display(path)} was measured against calibration record {named[:12]}, which "
                        f"case {entry.case} neither lists nor keeps in its lineage")
            power = load_power(path, record.reference(), stated)
        except BadInput as exc:
            return f"{shown}: {exc}"
        if power.measured_on != entry.runtime:
            return (f"{shown} says its power record holds on {entry.runtime}; it was measured against a record of "
                    f"{power.measured_on}")
        return None

    def _calibration_named(self, case: str, sha256: str) -> CalibrationRecord | None:
        """The calibration record of ``case`` with this digest, kept in the lineage or listed by the case."""
        entry = next((e for e in self.lineage() if e.kind is CALIBRATION and e.case == case
                      and e.baseline == sha256), None)
        if entry is not None:
            return load_record(self._entry_file(entry)[1])
        c = self.desc.cases.get(case)
        if c is None or c.calibration is None:
            return None
        return next((r for r in self.calibration_records(case, c) if r.sha256 == sha256), None)


def _listed(files: str | list[str] | None) -> list[str]:
    """The files a case's key lists: one, several, or none."""
    return [files] if isinstance(files, str) else list(files or [])


def make_command(descriptor: Path, case: str | None = None) -> str:
    """The `parity-kit baseline make` line that makes what a descriptor's case (or, without one, every case) lacks
    on this host."""
    import shlex

    only = f" --case {shlex.quote(case)}" if case else ""
    return f"parity-kit baseline make {shlex.quote(paths.display(descriptor))}{only} --reason \"...\""


def tree_root(descriptor: Path) -> Path:
    """The repository that holds ``descriptor`` (the nearest folder above it with ``.git``), else its parent
    folder."""
    folder = descriptor.resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder.parent


def lineage_problems(desc: LoadedDocument) -> tuple[int, list[str]]:
    """How many lineage entries ``desc`` keeps, and one line per entry whose claims do not re-derive
    (``Baselines.verify_lineage``): what `baseline verify` prints and `baseline log` refuses on."""
    return len(desc.baselines.lineage()), desc.baselines.verify_lineage()


def refuse_unverified(desc: LoadedDocument) -> None:
    """Raise BadInput with the first lineage entry of ``desc`` whose claims do not re-derive: what shows baselines by
    their lineage (`baseline status`, `baseline log`) shows them only once their claims hold."""
    problems = lineage_problems(desc)[1]
    if problems:
        raise BadInput(problems[0])

