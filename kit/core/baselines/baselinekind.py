"""The kinds of baseline a verdict rests on, one class each: what it is called, how it stands on this host,
what the preflight holds it to, and whether `baseline make` makes it and its backtest replays it.

A case is judged against an exact golden, a semantic golden (within a hand-set bound or a calibration record's
bounds) or an in-kernel reference, and a calibrated case may list power records. Each kind holds somewhere
different (one runtime, any runtime, one class of hardware, the kernel itself) and is made, checked and trusted
differently. Spelled as strings, those differences were branches in every module that met a baseline, and the
same kind had two spellings ("exact golden" in a status row, "exact-golden" in a lineage entry). Here each kind
is one object: callers ask it instead of comparing its name, and its ``name`` is the one spelling written to
every record. Earlier spellings are read (``spellings``), never written.

What a kind cannot do is said by the kind, not by a branch that does nothing: ``makeable`` and ``backtested``
are stated per kind, and ``require_makeable``/``require_backtested`` raise a typed error naming what does make
or judge it. How `baseline make` makes a kind lives with the command (kit.baselines.make, which holds a maker
per makeable kind); what lives here is what the layers below the commands need.

Stdlib only, like the rest of kit.core: the backend registry's reading of a golden's runtime is passed in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Callable, Mapping, Sequence

from kit.core.records import paths
from kit.core.noise.calibration import FallbackRule, check_case_inputs, hardware_change, measured_on
from kit.core.errors import BadInput
from kit.core.baselines.golden import Golden, RuntimeOf, duplicate_runtime, load_golden
from kit.core.model.modelconfig import check_prompts_fit, model_limits
from kit.core.model.modeldigest import DigestCache, check_model_digest
from kit.core.records.spec import CaseSpec


class Standing(StrEnum):
    """How a case stands on one baseline here (``BaselineRow.standing``): the word a status row, a run's manifest
    and `baseline make`'s record keep."""
    MATCH = "matches"  # made on this runtime (or, for a semantic golden, judged within bounds on any)
    FALLBACK = "falls back"  # made elsewhere, used here by a rule the descriptor states
    MISSING = "missing"  # none this host may use: the case cannot be judged here
    HAND_SET = "hand-set"  # a bound written in the descriptor, no measurement behind it
    IN_KERNEL = "in-kernel"  # compared with its own reference in the same kernel: no file to hold


# Where a baseline stands in its lineage, from its digest ("first of its chain", ...); None: nothing to say.
LineageText = Callable[[str | None], str | None]


class UnknownBaselineKind(BadInput):
    """A record names a kind of baseline the kit does not know."""


class NotMakeable(BadInput):
    """`baseline make` was asked for a kind it does not make."""


class NotBacktested(BadInput):
    """A backtest was asked of a kind it cannot replay."""


@dataclass(frozen=True)
class BaselineRow:
    """One baseline of one case, as this host would use it."""

    case: str
    kind: BaselineKind
    standing: Standing
    rule: str  # why it stands so, in words
    file: str | None = None
    sha256: str | None = None
    made_on: str | None = None
    made_at: str | None = None
    lineage: str | None = None  # "first of its chain", "3rd of its chain, bounds moved 2 times (2 wider)"
    remedy: str | None = None  # what makes it, where it is missing or falls back

    def to_dict(self) -> dict:
        """The row as `baseline status --json` prints it, its kind by name: a reader compares the name, never
        the object."""
        return {**asdict(self), "kind": self.kind.name}


class BaselineKind:
    """One kind of baseline. Subclasses state each attribute; the base refuses what a kind does not do."""

    name: str = ""  # the one spelling, in every record written
    spellings: tuple[str, ...] = ()  # earlier spellings, still read
    makeable: bool = False  # `baseline make` makes it for this runtime
    backtested: bool = False  # a new one is replayed over the archive before it is blessed
    in_lineage: bool = False  # it has lineage entries (kit.core.baselines.lineage)
    folder: str | None = None  # the [baselines] key of the folder `baseline make` places it in
    golden: str | None = None  # a golden's own kind ("exact", "semantic"); None for other baselines
    made_by: str = ""  # what makes one, in words

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<baseline kind {self.name}>"

    # One object per kind: a copy, or a pickle sent to another process, is the same kind again, so that a kind
    # is compared by identity wherever it travels.
    def __copy__(self) -> BaselineKind:
        return self

    def __deepcopy__(self, memo: dict) -> BaselineKind:
        return self

    def __reduce__(self) -> tuple:
        return baseline_kind_named, (self.name,)

    def require_makeable(self) -> None:
        """Refuse (NotMakeable, naming the command that makes it) a kind `baseline make` does not make,
        before any work starts."""
        if not self.makeable:
            raise NotMakeable(f"`parity-kit baseline make` does not make a {self.name}: {self.made_by}")

    def require_backtested(self) -> None:
        """Refuse (NotBacktested) a kind whose baseline has no bounds to replay: only a calibration record's
        can be backtested over archived runs."""
        if not self.backtested:
            raise NotBacktested(f"a {self.name} is not backtested: only a calibration record's bounds can be "
                                "replayed over archived runs")

    def stand(self, spec: CaseSpec, lineage: LineageText, made_at: str | None = None) -> BaselineRow:
        """How ``spec`` stands on its baseline of this kind on this host."""
        raise NotImplementedError(f"a {self.name} is not a row of a case's standing")


class GoldenKind(BaselineKind):
    """A golden file listed under a [goldens] entry: what a case's observations are compared with."""

    in_lineage = True
    per_runtime = False  # holds only on the runtime that made it
    bounded = False  # judged within bounds, which a calibration can measure

    def stand(self, spec: CaseSpec, lineage: LineageText, made_at: str | None = None) -> BaselineRow:
        """How a case's golden stands on this host: missing (with the command that makes one) where the plan
        found none for its runtime, else the golden it uses, when and where it was made and its lineage."""
        if spec.no_baseline and lacked(spec) is self:
            return BaselineRow(spec.name, self, Standing.MISSING, spec.no_baseline.reason, made_on=None,
                               remedy=spec.no_baseline.command or None)
        golden = load_golden(spec.golden_path)
        prov = golden.provenance
        return BaselineRow(spec.name, self, Standing.MATCH, self.holds(spec), paths.display(golden.path), golden.sha256,
                           str(prov.get("runtime") or prov.get("hardware") or "not recorded"), prov.get("created_at"),
                           lineage(golden.sha256))

    def holds(self, spec: CaseSpec) -> str:
        """Why this kind of golden holds where it is used: each kind words its own rule, so a row never
        guesses it from a file's name."""
        raise NotImplementedError

    def check_listed(self, entry: Any, listed: Sequence[Golden], runtime_of: RuntimeOf) -> None:
        """Hold every golden a [goldens] entry lists (each runtime's, not only this host's) to this kind."""
        raise NotImplementedError


class ExactGolden(GoldenKind):
    name = "exact-golden"
    spellings = ("exact golden",)
    golden = "exact"
    per_runtime = True
    makeable = True
    folder = "goldens"
    # Its bits are compared as they are: there are no bounds to replay, and the evidence gate is its test.
    backtested = False
    made_by = "`parity-kit golden make --kind exact`, on the runtime it is to hold on"

    def holds(self, spec: CaseSpec) -> str:
        """An exact golden holds only on the runtime it was made on: the row names that runtime."""
        return f"made on this runtime ({spec.runtime}); an exact golden never falls back"

    def check_listed(self, entry: Any, listed: Sequence[Golden], runtime_of: RuntimeOf) -> None:
        """Every golden of an exact entry says which runtime it holds on, and no two hold on one: which of two
        would judge a case is otherwise arbitrary."""
        where = f"{entry.where}: goldens.{entry.name}"
        for golden in listed:
            key = golden.provenance.get("runtime", runtime_of(golden.provenance))
            if not isinstance(key, str) or not key:
                raise BadInput(f"{where}: exact golden {paths.display(golden.path)} records no runtime it holds on "
                               f"(made on {golden.provenance.get('hardware')!r}); remake it with "
                               "`parity-kit golden make`")
        twice = duplicate_runtime(listed, runtime_of)
        if twice:
            raise BadInput(f"{where}: {paths.display(twice[0].path)} and {paths.display(twice[1].path)} were both "
                           f"made on {runtime_of(twice[0].provenance)}; list one golden per runtime")


class SemanticGolden(GoldenKind):
    name = "semantic-golden"
    spellings = ("semantic golden",)
    golden = "semantic"
    bounded = True
    made_by = "`parity-kit golden make` (the reference's float32 results), remade with `parity-kit golden regen`"

    def holds(self, spec: CaseSpec) -> str:
        """A semantic golden is judged within bounds, so it holds on every runtime."""
        return "judged within bounds, so it holds on any runtime"

    def check_listed(self, entry: Any, listed: Sequence[Golden], runtime_of: RuntimeOf) -> None:
        """A semantic golden holds on any runtime: a list of them has no runtime to check (the schema allows one
        file per semantic entry)."""


class Calibration(BaselineKind):
    """A calibration record: a case's clean noise measured on one class of hardware, and the bounds from it."""

    name = "calibration"
    makeable = True
    backtested = True
    in_lineage = True
    folder = "calibrations"
    made_by = "`parity-kit calibrate`, on the class of hardware it is to hold on"

    def stand(self, spec: CaseSpec, lineage: LineageText, made_at: str | None = None) -> BaselineRow:
        """How a case's calibration record stands on this host: its own class of hardware, a stated fallback
        to another (and by which rule), or missing, with the file, digest and lineage it rests on."""
        cal = spec.calibration or {}
        where = paths.display(cal["path"]) if cal.get("path") else None
        made_on = measured_on(cal) or "not recorded"
        dated = dict(file=where, sha256=cal.get("sha256"), made_on=made_on, made_at=made_at,
                     lineage=lineage(cal.get("sha256")))
        change = hardware_change(cal, spec.options)
        if change is None:
            return BaselineRow(spec.name, self, Standing.MATCH, f"noise measured on this class of hardware ({made_on})",
                               **dated)
        measured, here = change
        remedy = f"parity-kit baseline make --case {spec.name} --reason \"...\""
        fallback = cal.get("fallback") or {}
        if fallback.get("rule") == FallbackRule.DEVICE:
            return BaselineRow(spec.name, self, Standing.FALLBACK,
                               f"fallback order {fallback.get('order')} took it by its rule \"device\": noise "
                               f"measured on {measured}, this host is {here}; its bounds apply, its drift test does "
                               "not", **dated, remedy=remedy)
        if "hardware" in cal.get("accept", []):
            return BaselineRow(spec.name, self, Standing.FALLBACK,
                               f"accept_noise_changes = [\"hardware\"]: noise measured on {measured}, this host is "
                               f"{here}; its bounds apply, its drift test does not", **dated, remedy=remedy)
        return BaselineRow(spec.name, self, Standing.MISSING,
                           f"no record measured on {here} (listed: {measured}), and the case accepts no hardware "
                           "change", **dated, remedy=remedy)

    def check_case(self, spec: CaseSpec, where: str, listed: Sequence[Mapping[str, Any]], fixture_sha256: str,
                   golden_sha256: str, model_digest: str, prompts: dict[str, int]) -> None:
        """Every record a calibrated case lists (``listed``: their references) fits the case (inputs, backend,
        noise class, prompts and their buckets), the one this host does not choose as much as the one it does: a
        list is reviewed as a whole, and a record that could never judge the case is a mistake wherever it runs.
        Whether one was measured on this host's hardware is the plan's question, whose answer without one is "no
        baseline" (kit.descriptor.baselines), never a refusal. ``where``: ``file:line: cases.NAME.calibration``."""
        for reference in listed or [spec.calibration or {}]:
            problem = check_case_inputs(reference, spec, fixture_sha256=fixture_sha256, golden_sha256=golden_sha256,
                                        model_digest=model_digest, prompts=prompts)
            if problem:
                raise BadInput(f"{where}: record {paths.display(reference['path'])} does not fit: {problem}")


class HandSetBound(BaselineKind):
    """A bound written in the descriptor: a semantic case's bounds with no measurement behind them."""

    name = "bound"
    made_by = "its author, in the descriptor; `parity-kit calibrate` measures bounds instead"

    def stand(self, spec: CaseSpec, lineage: LineageText, made_at: str | None = None) -> BaselineRow:
        """A bound set by hand stands as such, with `calibrate` as its remedy: nothing measured it."""
        bounds = spec.bucket_bounds or {}
        said = f"bound = {spec.bound:g}" if spec.bound is not None else f"bucket_bounds = {dict(bounds)}"
        return BaselineRow(spec.name, self, Standing.HAND_SET, f"{said}, set by hand in the descriptor",
                           remedy=f"parity-kit calibrate --case {spec.name}")


class PowerRecordKind(BaselineKind):
    """A power record: what faults a calibrated case can detect, measured against one calibration record. It
    holds where that record holds; it is chosen by that record (kit.descriptor.load), never by its own kind. Its
    lineage chain is per class of hardware, the class of the record it was measured against, so a new class's
    power record reaches the gate as a record does: its file and its entry. A case held to a
    ``detectable_limit`` stands on it (a row of its own): without one measured against the record in use, the
    limit cannot be judged here."""

    name = "power"
    makeable = True
    in_lineage = True
    folder = "power"
    made_by = "`parity-kit power`, against the calibration record the case uses"

    def stand(self, spec: CaseSpec, lineage: LineageText, made_at: str | None = None) -> BaselineRow:
        """How a case's power record stands: measured here against the record in use, or missing (or of
        another class of hardware), with `baseline make` as the remedy where the descriptor asks a detectable
        limit."""
        power = spec.power or {}
        remedy = f"parity-kit baseline make --case {spec.name} --reason \"...\""
        if spec.no_baseline and lacked(spec) is self:
            return BaselineRow(spec.name, self, Standing.MISSING, spec.no_baseline.reason,
                               remedy=spec.no_baseline.command)
        if not power.get("same_class"):
            measured = f" (listed: measured on {power['measured_on']})" if power.get("measured_on") else ""
            return BaselineRow(spec.name, self, Standing.MISSING, "no power record measured against the calibration "
                               f"record this host uses{measured}, and the case is held to a detectable_limit",
                               remedy=remedy)
        where = paths.display(power["path"]) if power.get("path") else None
        return BaselineRow(spec.name, self, Standing.MATCH, f"measured against the record this host uses, on "
                           f"{power.get('measured_on')}", where, power.get("sha256"), power.get("measured_on"),
                           made_at, lineage(power.get("sha256")))

    @staticmethod
    def choose(loaded: Sequence[Any], record_sha256: str) -> tuple[Any | None, bool]:
        """The power record a case uses: one measured against the calibration record this host uses, else one of
        another class of hardware (``False``: said to be so); None when the case lists none."""
        own = [p for p in loaded if p.record_sha256 == record_sha256]
        chosen = own or list(loaded)
        return (chosen[0] if chosen else None), bool(own)


class InKernelReference(BaselineKind):
    """An exact case's reference computed in its own kernel (the same backend on another model folder): no file
    to hold, so nothing to make, list in a lineage or replay."""

    name = "reference"
    made_by = "the case's own kernel, on every run"

    def stand(self, spec: CaseSpec, lineage: LineageText, made_at: str | None = None) -> BaselineRow:
        """A reference computed in the case's own kernel stands wherever the case runs: the row names the
        model and options it is computed with."""
        return BaselineRow(spec.name, self, Standing.IN_KERNEL,
                           f"compared bit for bit with its reference ({(spec.reference or {}).get('model')}, "
                           f"{(spec.reference or {}).get('options')}) computed in the same kernel")

    @staticmethod
    def check_case(spec: CaseSpec, where: str, fixture: Any, digests: DigestCache) -> None:
        """The reference's model folder is what the descriptor pins, and takes the case's prompts."""
        ref = spec.reference or {}
        check_model_digest(ref["model_path"], ref["model_digest"], f"{where}: cases.{spec.name}.reference", digests)
        selected = fixture.select(spec.prompt_ids, spec.buckets)
        if not selected:
            raise BadInput(f"{where}: case {spec.name} selects no prompt of the fixture")
        for model in (spec.model_path, ref["model_path"]):
            check_prompts_fit(((p.id, p.n_tokens) for p in selected), model_limits(model), model,
                              f"{where}: case {spec.name}: ")


EXACT_GOLDEN = ExactGolden()
SEMANTIC_GOLDEN = SemanticGolden()
CALIBRATION = Calibration()
HAND_SET_BOUND = HandSetBound()
POWER = PowerRecordKind()
IN_KERNEL_REFERENCE = InKernelReference()

KINDS: tuple[BaselineKind, ...] = (EXACT_GOLDEN, SEMANTIC_GOLDEN, CALIBRATION, HAND_SET_BOUND, POWER,
                                   IN_KERNEL_REFERENCE)
# The kinds a lineage entry may name, in the order its format's message lists them.
LINEAGE_KINDS: tuple[BaselineKind, ...] = (CALIBRATION, EXACT_GOLDEN, SEMANTIC_GOLDEN, POWER)
_BY_NAME = {spelling: k for k in KINDS for spelling in (k.name, *k.spellings)}
_BY_GOLDEN = {str(k.golden): k for k in KINDS if isinstance(k, GoldenKind)}


def baseline_kind_named(name: object) -> BaselineKind:
    """The kind a record names, in its one spelling or an earlier one; any other is one clear refusal."""
    kind = _BY_NAME.get(name) if isinstance(name, str) else None
    if kind is None:
        raise UnknownBaselineKind(f"unknown baseline kind {name!r} (known: {', '.join(k.name for k in KINDS)})")
    return kind


def of_golden(golden_kind: str) -> GoldenKind:
    """The kind of a golden whose own kind (its file's, its [goldens] entry's) is ``exact`` or ``semantic``."""
    if golden_kind not in _BY_GOLDEN:
        raise UnknownBaselineKind(f"unknown golden kind {golden_kind!r} (known: {', '.join(_BY_GOLDEN)})")
    return _BY_GOLDEN[golden_kind]


def judged_by(spec: CaseSpec) -> BaselineKind:
    """What a case's observations are compared with: its in-kernel reference, or its golden."""
    return IN_KERNEL_REFERENCE if spec.reference is not None else of_golden(spec.golden_kind)


def lacked(spec: CaseSpec) -> BaselineKind | None:
    """The kind of baseline a case lacks on this host (its ``no_baseline``, which names it as a spec carries it
    across processes); None when it lacks none. A spec written before that reason was typed names no kind: what
    it lacked was its golden."""
    if spec.no_baseline is None:
        return None
    return baseline_kind_named(spec.no_baseline.kind) if spec.no_baseline.kind else judged_by(spec)


def of_case(spec: CaseSpec) -> list[BaselineKind]:
    """The baselines a case stands on, in the order a status lists them: what it is compared with, then, for a
    golden judged within bounds, where its bounds come from, and for a case held to a detectable limit, the power
    record that limit is judged by."""
    first = judged_by(spec)
    if spec.calibration is not None:
        # A limit on what the case can detect is judged by its power record: one more baseline it stands on.
        return [first, CALIBRATION, *([POWER] if spec.detectable_limit is not None else [])]
    if isinstance(first, GoldenKind) and first.bounded:
        return [first, HAND_SET_BOUND]
    return [first]

