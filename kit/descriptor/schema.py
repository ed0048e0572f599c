"""The descriptor's schema: the pydantic models of a TOML descriptor.

The common case keys are stated here; each backend's own options come from its registered options
schema, so a case's schema is CaseBase plus its backend's options, keyed by ``backend``.
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from kit.backends import registry
from kit.backends.options import Choice
from kit.core.noise.calibration import FallbackRule
from kit.core.noise.falsefailure import MAX_RATE
from kit.core.records.records import GoldenMode

if TYPE_CHECKING:
    from pathlib import Path

CASE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# A case's name, and a descriptor's, is part of every file and folder name the kit derives from it: a run's
# cases/<case>.attempts.jsonl and the temporary .<case>.attempts.jsonl.<8 random>.tmp it is written through,
# cases/superseded/<case>.<n>.kernel.log, localize-<case>-<time>-<4 hex>, parity-kit-vllm-<case>-<8 random>. A file
# system allows 255 bytes a name (the names are ASCII); the longest of these adds about 40 to the case's, so 100
# keeps every one of them within it, with room (tests/unit/descriptor/test_name_length.py makes each one).
MAX_NAME = 100
# A [goldens] entry is named after its kind ("semantic", "exact") or ends in it ("decode-semantic"),
# so that a reader of a case knows how it is judged without opening the golden.
GOLDEN_NAME = r"^(semantic|exact|[a-z0-9][a-z0-9._-]*-(semantic|exact))$"


def golden_kind(name: str) -> str:
    """The kind of a [goldens] entry, from its name's last dash-separated word (``tiny-semantic`` ->
    ``semantic``): the one place that spelling is read."""
    return name.rsplit("-", 1)[-1]


def case_golden_kind(case) -> str:
    """How a case is judged: its golden entry's kind, or ``exact`` for an in-kernel reference."""
    return GoldenMode.EXACT if case.golden is None else golden_kind(case.golden)


class _Strict(BaseModel):
    # No NaN or infinity in any number: NaN passes every comparison a bound makes, and an infinite
    # timeout silently turns the timeout off.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


# A probability bound: an error above 1 would pass anything, one at or below 0 nothing.
Bound = Annotated[float, Field(gt=0, le=1)]
# How large a fault, in units of a case's clean error, the case must be able to see for "passed" to mean
# anything (kit.core.noise.power): a positive, finite multiple.
DetectableLimit = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class ModelRef(_Strict):
    path: str
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")


class FixtureRef(_Strict):
    path: str


class Defaults(_Strict):
    kernel: str | None = None  # None: each backend's own kernel (the registry's)
    timeout_s: float = Field(default=600.0, gt=0)
    top_n: int = Field(default=64, ge=1)
    # How often the Ray executor reruns a case whose worker or node died under it.
    retries: int = Field(default=1, ge=0)
    # How often the gate runs again a case that failed for a reason of the job, not of its numbers
    # (kit.core.verdict.triage's infrastructure class), whichever executor ran it.
    infrastructure_retries: int = Field(default=1, ge=0)
    # Every calibrated case's limit on its detectable effect, unless the case sets its own (none: no limit).
    detectable_limit: DetectableLimit | None = None
    # The gate's false-failure rate, split over the descriptor's drift tests (kit.core.noise.falsefailure: Bonferroni);
    # None: each keeps the 0.1 % its record was reviewed with, up to 1 % for the gate.
    false_failure_rate: float | None = Field(default=None, json_schema_extra={"exclusiveMinimum": 0,
                                                                               "exclusiveMaximum": MAX_RATE})

    @field_validator("false_failure_rate")
    @classmethod
    def _a_rate(cls, rate: float | None) -> float | None:
        if rate is not None and not 0 < rate < MAX_RATE:
            raise ValueError(f"expected a number in (0, {MAX_RATE:g}), the chance a clean release fails the gate "
                             f"(0.01 is 1 %), got {rate!r}")
        return rate


class Resources(_Strict):
    """What one case asks of the Ray executor, per node. The local executor honours num_gpus (whole GPUs of
    this node, each case its own) and max_wait_s, and refuses nodes > 1 and fractions of a GPU."""

    nodes: int = Field(default=1, ge=1)  # > 1: one placement group, one bundle per node (a gang)
    num_cpus: float = Field(default=1.0, ge=0)
    num_gpus: float = Field(default=0.0, ge=0)
    accelerator_type: str | None = Field(default=None, min_length=1)  # Ray's name, e.g. "H100", "A10G"
    memory_gb: float | None = Field(default=None, gt=0)
    custom: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)  # the cluster's own resource names
    # The longest the case may wait for its resources before it starts (a busy or shrunken
    # cluster); then it is an error instead of a wait without end. None: wait as long as it takes.
    max_wait_s: float | None = Field(default=None, gt=0)

    @field_validator("num_gpus")
    @classmethod
    def _whole_gpus_from_one(cls, n: float) -> float:
        # Ray's own rule: a fraction below 1 shares a GPU, from 1 on a case holds whole GPUs (Ray refuses 1.5 only
        # when the task is submitted, mid-run). Below 1 stays legal for `--executor ray`; the local executor's
        # preflight (kit.run.devices.whole_gpus) refuses any fraction.
        if n >= 1 and not float(n).is_integer():
            raise ValueError(f"expected a whole number of GPUs, or a fraction below 1 to share one with "
                             f"`--executor ray`, got {n:g}")
        return n


class CustomNotebook(_Strict):
    """A case notebook of the descriptor's own, outside the kit's notebooks folder. It is code the gate
    runs and whose result it records, so the descriptor says so: ``trusted = true``."""

    path: str  # relative to the descriptor
    trusted: bool


class Reference(_Strict):
    """An exact case's reference computed in its own kernel: the same backend on another model folder (a
    [models] entry; the descriptor's [model] when absent) with some options changed. What such a case
    guards is that two ways of loading one model compute the same bits, which holds on any host, where a
    committed exact golden holds only on the runtime that made it."""

    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class CaseBase(_Strict):
    golden: str | None = None  # a [goldens] entry; an exact case with a `reference` has none
    reference: Reference | None = None
    model: str | None = None  # a [models] entry; the descriptor's [model] when absent
    bound: Bound | None = None
    bucket_bounds: dict[str, Bound] = Field(default_factory=dict)
    # A calibration record (calibrations/<sha256>.json, relative to the descriptor) whose measured noise
    # sets the bounds instead of `bound` (kit.core.noise.calibration); it also enables the drift test. A list
    # holds one record per class of hardware (CPU instruction-set level, GPU): a case uses the one measured
    # on the class its host computes on, else the first (refused there unless the change is accepted).
    calibration: str | list[str] | None = None
    drift: bool = True
    # Power records (calibrations/power/<sha256>.json, `parity-kit power`): what the case can detect, measured
    # against one of its calibration records each; the case uses the one measured against the record it uses.
    power: str | list[str] | None = None
    # The largest detectable effect (x its clean error) under which the case may say "passed"; above it the case
    # is inconclusive. A limit with no power record measured against the record the case uses is refused.
    detectable_limit: DetectableLimit | None = None
    # What the record may differ in from the case although the noise depends on it (refused otherwise).
    # "hardware" (another CPU instruction-set level or GPU) keeps the record's bounds but not its drift test.
    accept_noise_changes: list[Literal["device", "dtype", "hardware"]] = Field(default_factory=list)
    buckets: list[int] | None = None
    prompts: list[str] | None = None
    kernel: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    top_n: int | None = Field(default=None, ge=1)
    # A packaged case notebook by name (kit.core.records.paths.NOTEBOOKS), or {path, trusted = true} for one's own.
    notebook: str | CustomNotebook | None = None
    resources: Resources = Resources()
    retries: int | None = Field(default=None, ge=0)
    # Repeatability (docs/architecture.md, Diagnosis): score the selected prompts `repeats` times in each of
    # `repeat_launches` engine launches; the spread is the noise floor, any spread fails with
    # `exact_repeats`.
    repeats: int = Field(default=1, ge=1)
    repeat_launches: int = Field(default=1, ge=1)
    repeat_prompts: list[str] | None = None
    exact_repeats: bool = False
    # How many fresh engine launches of the case as set `parity-kit calibrate` scores (kit.backends.options): an
    # engine whose launches differ (XLA autotuning on a GPU) gives a distinct sample per launch, and the rule's
    # margin for few samples shrinks with each; on a deterministic engine a launch past the first repeats it.
    calibration_launches: int = Field(default=2, ge=1, le=32)
    # The decode check (kit.core.verdict.decode): each prompt continued greedily this many steps through the
    # backend's own decode path (its KV cache), against a golden that carries continuations.
    decode: int | None = Field(default=None, ge=1)

    if TYPE_CHECKING:
        # For the type checker only: what every case schema adds to these keys (case_schemas), its backend's
        # name and its options' methods (kit.backends.options.BackendOptions).
        backend: str

        def code_settings(self) -> list[tuple[str, str]]:
            """The options that make the engine load code beyond the kit's (BackendOptions.code_settings)."""
            ...

        @classmethod
        def model_problem(cls, options: Mapping[str, Any], model_dir: str | Path) -> str | None:
            """Why the case's model cannot run with these options (BackendOptions.model_problem); None when it can."""
            ...

    def backend_options(self) -> dict[str, Any]:
        """The case's own backend options, the keys every case has left out: what the backend's runtime is
        opened with."""
        common = set(CaseBase.model_fields) | {"backend"}
        return {k: v for k, v in self.model_dump().items() if k not in common}


def options_schema(backend: str) -> type[BaseModel]:
    """The pydantic schema of a registered backend's case options."""
    module, _, cls = registry.get(backend).options.partition(":")
    return getattr(importlib.import_module(module), cls)


@functools.cache
def case_schemas() -> dict[str, type[CaseBase]]:
    """One schema per registered backend: the common keys plus the backend's options."""
    schemas: dict[str, type[CaseBase]] = {}
    for name in registry.registry():
        options: Any = options_schema(name)  # a backend's class, mixed into a model made at run time
        schemas[name] = create_model(f"{options.__name__.removesuffix('Options')}Case", __base__=(CaseBase, options),
                                     # a Literal of a name known only at run time, which no checker types
                                     __doc__=options.__doc__, backend=(Literal[name], ...))  # type: ignore[arg-type]
    return schemas


class BackendRelease(_Strict):
    """One backend's build within a release: the kernel (environment) that holds it and its identity."""

    kernel: str
    version: str = ""
    source_commit: str = ""
    wheels: dict[str, str] = Field(default_factory=dict)  # wheel file name -> sha256
    # Engine options this build runs with; they override the cases' own (and are validated with them).
    options: dict[str, Any] = Field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """What identifies a backend's build in a release (kernel, version, source commit, wheels, options):
        the release's fingerprint is made from it."""
        return {"kernel": self.kernel, "version": self.version, "source_commit": self.source_commit,
                "wheels": dict(self.wheels), "options": dict(self.options)}


class Release(_Strict):
    """A concrete build of every backend: today's pin (`current`) or the staged one (`candidate`)."""

    description: str = ""
    backends: dict[str, BackendRelease] = Field(min_length=1)


class Fallback(_Strict):
    """Per kind of baseline, the order of rules by which one made elsewhere may stand in on this host, finest
    first. A calibration record: ``driver`` (the same accelerator and driver), ``hardware`` (the same CPU
    instruction-set level or GPU model), ``device`` (any record of the same kind of device; its bounds apply,
    its drift test does not). An exact golden holds on the runtime that made it and on no other: ``runtime``
    is its only rule. A case's ``accept_noise_changes = ["hardware"]`` adds ``device`` to its own order."""

    # The rules' words, not their members, as the resolved calibration reference records them (a Choice).
    model_config = ConfigDict(use_enum_values=True, validate_default=True)

    calibration: list[Choice[FallbackRule]] = Field(default_factory=lambda: [FallbackRule.HARDWARE], min_length=1)
    exact: list[str] = Field(default_factory=lambda: ["runtime"])

    @field_validator("exact")
    @classmethod
    def _exact_never_falls_back(cls, order: list[str]) -> list[str]:
        if order != ["runtime"]:
            raise ValueError("an exact golden never falls back: its bits hold only on the runtime that made it, "
                             "so its order is [\"runtime\"]")
        return order


class BaselinesTable(_Strict):
    """Where a descriptor's baselines keep their lineage, and where `parity-kit baseline make` writes new ones
    (each relative to the descriptor). The lineage's heads are the baselines in use: a new one reaches the gate
    as two new files, itself and its lineage entry, without an edit of the descriptor (kit.core.baselines.lineage)."""

    lineage: str
    calibrations: str = "../calibrations"
    goldens: str = "../goldens"
    power: str | None = None  # where `baseline make` places power records; default: the calibrations' power/
    fallback: Fallback = Field(default_factory=Fallback)
    # The folder the lineage's baselines and `baseline make`'s output stay inside, so that a diff of it shows every
    # baseline a gate may use; default: the repository that holds the descriptor, else the descriptor's parent.
    root: str | None = None


class Descriptor(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$", max_length=MAX_NAME)
    description: str = ""
    model: ModelRef
    fixture: FixtureRef
    models: dict[str, ModelRef] = Field(default_factory=dict)  # more model folders, named by cases
    # An exact entry may name one file per runtime (bit-exact goldens hold only where they were made).
    goldens: dict[str, str | list[str]]
    defaults: Defaults = Defaults()
    releases: dict[str, Release] = Field(default_factory=dict)
    cases: dict[str, dict[str, Any]] = Field(min_length=1)
    baselines: BaselinesTable | None = None

    @field_validator("goldens")
    @classmethod
    def _golden_names_say_their_kind(cls, goldens: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for name in goldens:
            if not re.match(GOLDEN_NAME, name):
                raise ValueError(f"entry {name!r} must be named semantic or exact, or end in -semantic or -exact")
        return goldens


