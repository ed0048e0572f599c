"""Calibration records: a case's legitimate variation, measured, and the bounds it justifies.

A hand-set bound is a guess that only ever grows (each new noise raised it). A calibration record holds
what was measured instead: the per-prompt error of every clean variant of the case (repeats, launches,
and the implementation choices a healthy release may change: batching, padding, attention kernel,
threads, compiled or eager), with the provenance of where it was measured. The bound is a function of
those samples (kit.core.noise.rule), and the drift test (kit.core.noise.drift) compares a run with them prompt
by prompt. A record is canonical JSON named by its SHA-256, so a descriptor that names it pins its bytes.

Stdlib only: the case kernel applies the drift reference this module builds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import ContentAddressed, read_addressed
from kit.core.records.recordcheck import Wrong, check_record
from kit.core.noise.drift import RecordDepth, drift_of, record_depth
from kit.core.noise.rule import RULE_NAME, RULE_TEXT, RULES, bound_rule, resolution
from kit.core.noise.stepnoise import distinct_steps, step_bounds, step_section, steps_uncovered

if TYPE_CHECKING:
    from kit.core.records.records import CaseResult
    from kit.core.records.spec import CaseSpec

FORMAT = "parity-kit-calibration/1"
# Format 2: format 1 with a ``decode`` section (per decode step: kit.core.noise.stepnoise) and every sample's per-step
# errors. Only a record of a case with ``decode`` is written in it; every other record stays format 1, its bytes
# (and so its name) as before. A kit that knows only format 1 refuses it, rather than judge its decode steps by
# the first token's bounds.
FORMAT_DECODE = "parity-kit-calibration/2"
FORMATS = (FORMAT, FORMAT_DECODE)
# A spread needs two distinct clean samples (the drift test's t interval needs three; with two it takes the
# samples' range, widened as the bound rule widens it: kit.core.noise.drift). vLLM's CPU build gives two: of every
# variant tried only graph capture moves its rounding (docs/calibration.md).
MIN_SAMPLES = 2
DRIFT_ALPHA = 1e-3  # the drift test's stated false-failure rate per case (kit.core.noise.drift)

@dataclass(frozen=True)
class Sample:
    """One clean run of every prompt: a variant, in one launch, one repeat."""

    variant: str
    launch: int
    repeat: int
    errors: dict[str, float]  # prompt id -> max probability error against the golden
    shifts: dict[str, float]  # prompt id -> signed change of the golden top token's probability
    # A decode case's: prompt id -> the max probability error of each decode step compared (kit.core.noise.stepnoise).
    steps: dict[str, list[float]] | None = None

    def key(self) -> tuple:
        """Equal keys: bit-identical samples (a deterministic repeat), counted once for spreads."""
        return tuple(sorted(self.errors.items())), tuple(sorted(self.shifts.items()))

    def to_dict(self) -> dict:
        """The sample as a record holds it; a decode case's per-step errors only where measured, so a
        first-token record keeps its bytes and name."""
        steps = {} if self.steps is None else {"steps": {p: list(e) for p, e in self.steps.items()}}
        return {"variant": self.variant, "launch": self.launch, "repeat": self.repeat,
                "errors": dict(self.errors), "shifts": dict(self.shifts), **steps}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Sample":
        """A sample read from a record, every number and key converted to its type, so that two readers of
        one record compare equal values."""
        steps = d.get("steps")
        return cls(str(d["variant"]), int(d["launch"]), int(d["repeat"]),
                   {str(k): float(v) for k, v in d["errors"].items()},
                   {str(k): float(v) for k, v in d["shifts"].items()},
                   None if steps is None else {str(k): [float(x) for x in v] for k, v in steps.items()})


def distinct(samples: Sequence[Sample]) -> list[Sample]:
    """The samples whose errors differ, first of each kept: a variant that repeats another's numbers bit for bit
    adds no evidence of the noise, so it counts once."""
    seen, out = set(), []
    for s in samples:
        if s.key() not in seen:
            seen.add(s.key())
            out.append(s)
    return out


def prompt_ranges(samples: Sequence[Sample], buckets: Mapping[str, int]) -> dict[str, dict]:
    """Per prompt: its bucket and the range of its error and of its top-probability shift."""
    out = {}
    for pid, bucket in buckets.items():
        errors = [s.errors[pid] for s in samples]
        shifts = [s.shifts[pid] for s in samples]
        out[pid] = {"bucket": bucket, "largest": max(errors), "smallest": min(errors),
                    "shift_low": min(shifts), "shift_high": max(shifts)}
    return out


def bucket_bounds(prompts: Mapping[str, dict], n_distinct: int, dtype: str = "bfloat16",
                  rule: str = RULE_NAME) -> dict[str, dict]:
    """Per bucket: the largest error, the largest per-prompt range, and the bound the rule gives."""
    out: dict[str, dict] = {}
    for bucket in sorted({p["bucket"] for p in prompts.values()}):
        members = [p for p in prompts.values() if p["bucket"] == bucket]
        largest = max(p["largest"] for p in members)
        spread = max(p["largest"] - p["smallest"] for p in members)
        out[str(bucket)] = {"prompts": len(members), "largest": largest, "spread": spread,
                            "bound": bound_rule(largest, spread, n_distinct, dtype, rule)}
    return out


def leave_one_out(unique: Sequence[Sample], dtype: str) -> list[dict]:
    """Each clean sample's drift test against the others: a healthy variant the calibration had not seen
    must pass. One that fails says the variants do not yet span the case's noise (the record keeps it,
    and ``parity-kit calibrate`` says so)."""
    if len(unique) < MIN_SAMPLES + 1:  # the others must still be enough for the rule
        return []
    out = []
    for i, s in enumerate(unique):
        others = [{"errors": o.errors, "shifts": o.shifts} for j, o in enumerate(unique) if j != i]
        result = drift_of(s.errors, s.shifts, {"sha256": "", "resolution": resolution(dtype),
                                              "drift": {"alpha": DRIFT_ALPHA, "samples": others}})
        out.append({"variant": s.variant, "launch": s.launch, "passed": result.passed, "p_value": result.p_value})
    return out


@dataclass(frozen=True)
class CalibrationRecord(ContentAddressed):
    """A case's measured noise and the bounds it justifies, with where and how it was measured."""

    case: str
    backend: str
    noise_class: dict[str, str]  # what the noise depends on: {"device": "cpu" or the GPU's name, "dtype": ...}
    inputs: dict[str, str]  # fixture_sha256, golden_sha256, model_digest
    options: dict[str, Any]
    fingerprint: dict[str, Any]  # release, runtime (packages, environment, hardware), kit version
    command: list[str]
    variants: list[dict]  # name, overrides, why
    samples: list[Sample]
    created_at: str
    prompts: dict[str, dict] = field(default_factory=dict)
    buckets: dict[str, dict] = field(default_factory=dict)
    drift: dict[str, Any] = field(default_factory=dict)
    rule: dict[str, str] = field(default_factory=lambda: {"name": RULE_NAME, "text": RULE_TEXT})
    path: Path | None = None
    # per decode step (kit.core.noise.stepnoise); {}: none measured
    decode: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def measured(cls, *, buckets: Mapping[str, int], decode_steps: int = 0, **kw) -> "CalibrationRecord":
        """A record from its samples: per-prompt ranges, per-bucket bounds and drift rates derived here (by
        the current rule, unless ``rule`` names the earlier one a record was made by); with ``decode_steps``,
        the bound of each decode step too, from the samples' per-step errors."""
        given = cls(**kw)  # the defaults filled in (the rule), then what the samples give
        dtype, rule = given.noise_class.get("dtype", "bfloat16"), given.rule["name"]
        decode = step_section(given.samples, decode_steps,
                              lambda largest, spread, n: bound_rule(largest, spread, n, dtype, rule)) \
            if decode_steps else {}
        unique = distinct(given.samples)
        prompts = prompt_ranges(given.samples, buckets)
        drift = {"alpha": DRIFT_ALPHA, "distinct_samples": len(unique), "variants": [s.variant for s in unique],
                 "leave_one_out": leave_one_out(unique, given.noise_class.get("dtype", ""))}
        return dataclasses.replace(given, decode=decode, prompts=prompts, drift=drift,
                                   buckets=bucket_bounds(prompts, len(unique), dtype, rule))

    def to_dict(self) -> dict:
        """The record as its file holds it (format 1, or 2 with a decode section): these keys are what its
        name hashes."""
        decode = {"decode": self.decode} if self.decode else {}
        return {"format": FORMAT_DECODE if self.decode else FORMAT, **decode, "case": self.case,
                "backend": self.backend, "noise_class": dict(self.noise_class),
                "inputs": dict(self.inputs), "options": dict(self.options), "fingerprint": self.fingerprint,
                "command": list(self.command), "variants": list(self.variants),
                "samples": [s.to_dict() for s in self.samples], "created_at": self.created_at,
                "prompts": self.prompts, "buckets": self.buckets, "drift": self.drift, "rule": dict(self.rule)}

    @property
    def bounds(self) -> dict[str, float]:
        """Bucket (as text) -> bound: what a case under this record is judged against."""
        return {b: v["bound"] for b, v in self.buckets.items()}

    @property
    def noise(self) -> float:
        """The largest per-prompt range any bucket measured: what "equal within noise" allows."""
        return max((v["spread"] for v in self.buckets.values()), default=0.0)

    def reference(self) -> dict:
        """What the case kernel needs of this record: bounds, per-prompt ranges and the drift rates."""
        return {"sha256": self.sha256, "path": str(self.path) if self.path else None, "rule": self.rule["name"],
                "backend": self.backend, "inputs": dict(self.inputs), "prompt_ids": sorted(self.prompts),
                "prompt_buckets": {p: v["bucket"] for p, v in sorted(self.prompts.items())},
                "bounds": self.bounds, "noise": self.noise, "noise_class": dict(self.noise_class),
                "buckets": {b: {k: v[k] for k in ("largest", "spread", "bound")} for b, v in self.buckets.items()},
                "resolution": resolution(self.noise_class.get("dtype", "")),
                "drift": {"alpha": self.drift["alpha"],
                          "samples": [{"errors": s.errors, "shifts": s.shifts} for s in distinct(self.samples)]},
                "fingerprint": self.fingerprint, **self.decode_reference()}

    def decode_reference(self) -> dict:
        """What the case kernel needs of the decode section: how many steps were measured and each one's bound."""
        if not self.decode:
            return {}
        return {"decode_steps": self.decode["steps"], "step_bounds": step_bounds(self.decode)}

    @classmethod
    def from_dict(cls, d: Mapping, path: Path | None = None) -> "CalibrationRecord":
        """A record built from its file's document, as stated: ``load_record`` checks it first and re-derives
        its figures from the samples."""
        return cls(case=d["case"], backend=d["backend"], noise_class=dict(d["noise_class"]), inputs=dict(d["inputs"]),
                   options=dict(d["options"]), fingerprint=dict(d["fingerprint"]), command=list(d["command"]),
                   variants=list(d["variants"]), samples=[Sample.from_dict(s) for s in d["samples"]],
                   created_at=d["created_at"], prompts=dict(d["prompts"]), buckets=dict(d["buckets"]),
                   drift=dict(d["drift"]), rule=dict(d["rule"]), path=path, decode=dict(d.get("decode") or {}))


def launches_repeat(record: CalibrationRecord) -> bool:
    """Whether the engine a record measured repeats itself across launches: some variant measured in two or more
    launches gave bit-identical samples in every one (a deterministic engine, as on CPU). Such a record is as deep
    as its variants make it: further launches add nothing (kit.baselines.deepen)."""
    by_variant: dict[str, list[Sample]] = {}
    for s in record.samples:
        by_variant.setdefault(s.variant, []).append(s)
    return any(len({s.launch for s in group}) > 1 and len({s.key() for s in group}) == 1
               for group in by_variant.values())


def depth_of(result: CaseResult) -> RecordDepth | None:
    """How deep the record a case's drift test ran against is (drift.record_depth), and whether its engine repeats
    itself across launches, read from the record where the case result names a file that is still there (a record
    that cannot be read is taken to vary: it is called thin by its count alone)."""
    depth = record_depth(result.drift)
    path = (result.bound_source or {}).get("path")
    if depth is None or not isinstance(path, str) or not Path(path).is_file():
        return depth
    try:
        return dataclasses.replace(depth, repeats=launches_repeat(load_record(path)))
    except BadInput:
        return depth


def noise_class(options: Mapping[str, Any]) -> dict[str, str]:
    """What a case's noise depends on, as far as its options say: device kind and dtype. (Which GPU is
    checked in the kernel, where it is known: ``accelerator`` in the record's fingerprint.)"""
    device = case_device(options)
    return {"device": "cuda" if device.startswith("cuda") else device, "dtype": str(options.get("dtype", "float32"))}


def case_device(options: Mapping[str, Any]) -> str:
    """The device a case's options put it on ("cpu", "cuda", "cuda:1"); jax names it a platform."""
    if "device" in options:
        return str(options["device"])
    return "cuda" if options.get("platform") == "gpu" else "cpu"


def hardware_change(reference: Mapping[str, Any], options: Mapping[str, Any],
                    here: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``(measured, here)`` when a record measured its noise on another class of hardware (CPU
    instruction-set level, or GPU model) than a case of these options computes on; None when the same, or
    when the record does not say. Only a process on the case's host can answer: it asks the hardware, unless
    ``here`` gives the accelerator a run recorded (what `parity-kit verify` judges a run on)."""
    from kit.core.host.runtime import accelerator

    measured = measured_on(reference)
    name = (here or accelerator(case_device(options)))["name"]
    return None if not measured or measured == name else (measured, name)


def measured_on(reference: Mapping[str, Any]) -> str | None:
    """The class of hardware a record (or its reference) measured its noise on, as accelerator() names it."""
    return ((reference.get("fingerprint") or {}).get("runtime", {}).get("accelerator") or {}).get("name")


class FallbackRule(StrEnum):
    """The rules a calibration record of other hardware may stand in by, finest first, as the descriptor's
    ``[baselines.fallback] calibration`` and a reference's ``fallback.rule`` spell them."""

    DRIVER = "driver"  # the same accelerator and driver
    HARDWARE = "hardware"  # the same accelerator (CPU instruction-set level, or GPU model)
    DEVICE = "device"  # any of the same kind of device


DEFAULT_FALLBACK = (FallbackRule.HARDWARE,)


def record_for_host(records: Sequence[CalibrationRecord], options: Mapping[str, Any],
                    order: Sequence[str] = DEFAULT_FALLBACK,
                    here: Mapping[str, str] | None = None) -> tuple[CalibrationRecord, str | None]:
    """Of records measured on several classes of hardware, the first one the fallback ``order`` takes for the
    hardware this host computes a case of ``options`` on (``here``: the accelerator a run recorded instead), with
    the rule that took it; ``(records[0], None)`` when no rule does (the kernel then refuses it unless the case
    accepts the change). Chosen where the descriptor is loaded, as an exact golden is chosen by runtime."""
    from kit.core.host.runtime import accelerator

    here = here or accelerator(case_device(options))
    for level in order:
        for r in records:
            theirs = (r.fingerprint.get("runtime", {}).get("accelerator") or {})
            same_name = theirs.get("name") == here["name"]
            if level == FallbackRule.DRIVER and same_name and theirs.get("driver") == here["driver"]:
                return r, level
            if level == FallbackRule.HARDWARE and same_name:
                return r, level
            if level == FallbackRule.DEVICE and r.noise_class.get("device") == noise_class(options)["device"]:
                return r, level
    return records[0], None


def record_filename(record: CalibrationRecord) -> str:
    """A record's file name: its own SHA-256, so that a descriptor naming the file pins its bytes."""
    return f"{record.sha256}.json"


def load_record(path: str | Path) -> CalibrationRecord:
    """A record from its file, judged by its evidence: refused (one line) unless its bytes are canonical JSON,
    its name (as given: a link's own name, not its target's) is their SHA-256, every value is of its type and
    range, it holds enough samples for the rule, and the figures it states are what its rule derives from
    those samples. The name pins the bytes; only the samples make the bounds."""
    path = Path(path)
    shown = str(path)
    if not path.is_file():
        raise BadInput(f"calibration record {shown} does not exist")
    doc = read_addressed(path, "calibration record", "record", "calibrate again instead of editing it")
    if not isinstance(doc, dict) or doc.get("format") not in FORMATS:
        raise BadInput(f"{shown}: not a calibration record of format {' or '.join(FORMATS)} "
                       f"(format {doc.get('format') if isinstance(doc, dict) else None!r})")
    try:
        check_record(doc, {name: text for name, (text, _) in RULES.items()},
                     decode=doc["format"] == FORMAT_DECODE)
    except Wrong as exc:
        raise BadInput(f"{shown}: malformed calibration record: {exc.text}") from None
    record = CalibrationRecord.from_dict(doc, path)
    unique = len(distinct(record.samples))
    if unique < MIN_SAMPLES:
        raise BadInput(f"{shown}: {unique} distinct sample(s) of {len(record.samples)}, the rule needs at least "
                       f"{MIN_SAMPLES}: calibrate with more variants")
    if record.decode and len(distinct_steps(record.samples)) < MIN_SAMPLES:
        raise BadInput(f"{shown}: {len(distinct_steps(record.samples))} distinct continuation(s) of "
                       f"{len(record.samples)} samples, the rule needs at least {MIN_SAMPLES} for decode steps' "
                       "bounds: calibrate with more variants of the decode path")
    differs = restated(record)
    if differs:
        raise BadInput(f"{shown}: {differs}: the record's figures are not its samples'; calibrate again instead "
                       "of editing it")
    return record


def rederived(record: CalibrationRecord) -> CalibrationRecord:
    """The record as its rule makes it from its own samples (each prompt in the bucket the record gives it)."""
    return CalibrationRecord.measured(
        buckets={pid: p["bucket"] for pid, p in record.prompts.items()}, case=record.case, backend=record.backend,
        noise_class=record.noise_class, inputs=record.inputs, options=record.options,
        fingerprint=record.fingerprint, command=record.command, variants=record.variants, samples=record.samples,
        created_at=record.created_at, rule=dict(record.rule), decode_steps=record.decode.get("steps", 0))


def restated(record: CalibrationRecord) -> str | None:
    """Where the figures a record states differ from those its samples give by its rule, or None when they
    agree (to within the rounding of a float written to JSON and computed again)."""
    again = rederived(record)
    for part in ("prompts", "buckets", "drift", "decode"):
        where = first_difference(getattr(record, part), getattr(again, part), part)
        if where is not None:
            key, stated, derived = where
            return (f"{key} is {_said(stated)}, rule {record.rule['name']} gives {_said(derived)} from its "
                    f"{len(record.samples)} samples")
    return None


ABSENT = object()  # a key one side of a comparison lacks (first_difference)


def first_difference(stated: Any, derived: Any, key: str) -> tuple[str, Any, Any] | None:
    """The first key (dotted) at which two JSON values differ; floats agree within 1e-9 relative."""
    if isinstance(stated, dict) and isinstance(derived, dict):
        for k in sorted(set(stated) | set(derived), key=str):
            found = first_difference(stated.get(k, ABSENT), derived.get(k, ABSENT), f"{key}.{k}")
            if found:
                return found
        return None
    if isinstance(stated, list) and isinstance(derived, list) and len(stated) == len(derived):
        for i, (a, b) in enumerate(zip(stated, derived)):
            found = first_difference(a, b, f"{key}[{i}]")
            if found:
                return found
        return None
    if _numbers(stated, derived):
        return None if math.isclose(stated, derived, rel_tol=1e-9, abs_tol=1e-12) else (key, stated, derived)
    # Compared as JSON holds them: a StrEnum member is its word (a result judged again holds members, the one read
    # from its file words), while a type of its own still differs (True is not 1).
    return None if _as_json(stated) == _as_json(derived) else (key, stated, derived)


def _as_json(value: Any) -> tuple[type, Any]:
    if isinstance(value, str):
        return str, str(value)
    return type(value), value


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _said(value: Any) -> str:
    if value is ABSENT:
        return "absent"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def same_class(records: Sequence[CalibrationRecord]) -> tuple[CalibrationRecord, CalibrationRecord] | None:
    """Two records of one list measured on one class of hardware (the first such pair), or None: a list holds
    one record per class, and of two the host would silently take the first."""
    seen: dict[str | None, CalibrationRecord] = {}
    for r in records:
        measured = measured_on({"fingerprint": r.fingerprint})
        if measured in seen:
            return seen[measured], r
        seen[measured] = r
    return None


def mismatch(reference: Mapping[str, Any], *, backend: str, fixture_sha256: str, golden_sha256: str,
             model_digest: str, noise_class: Mapping[str, str], prompts: Mapping[str, int],
             accept: Sequence[str] = ()) -> str | None:
    """Why a record (its ``reference()``) cannot set a case's bounds, or None when it can. ``prompts``: the
    case's prompt ids, each with its bucket.

    The inputs must be the very ones measured. The runtime may differ (a candidate release always does:
    that is what the gate judges), but what the noise itself depends on, the device class and the dtype,
    must match unless the case accepts the difference explicitly. Every prompt the case scores must have
    been measured, in the bucket the case scores it in, and every such bucket must have its bound."""
    if reference["backend"] != backend:
        return f"it measured backend {reference['backend']}, this case runs {backend}"
    for what, want in (("fixture_sha256", fixture_sha256), ("golden_sha256", golden_sha256),
                       ("model_digest", model_digest)):
        have = reference["inputs"].get(what)
        if have != want:
            return f"it was made for {what.split('_')[0]} {str(have)[:12]}, this case uses {want[:12]}"
    for key, want in noise_class.items():
        have = reference["noise_class"].get(key)
        if have != want and key not in accept:
            return (f"it measured noise on {key} {have!r}, this case runs on {want!r} "
                    f"(set accept_noise_changes = [\"{key}\"] to use it anyway)")
    return uncovered(reference, prompts)


def check_case_inputs(reference: Mapping[str, Any], spec: CaseSpec, *, fixture_sha256: str, golden_sha256: str,
                      model_digest: str, prompts: Mapping[str, int]) -> str | None:
    """Why a record (its ``reference()``) cannot set the bounds of the case ``spec`` on these inputs, or None.
    The one check of a record against a case: the preflight makes it of every record a case lists, the case's
    kernel of the one it was given, so the two can never disagree."""
    accept = (spec.calibration or {}).get("accept", [])
    return mismatch(reference, backend=spec.backend, fixture_sha256=fixture_sha256, golden_sha256=golden_sha256,
                    model_digest=model_digest, noise_class=noise_class(spec.options), prompts=prompts,
                    accept=accept) or steps_uncovered(reference, getattr(spec, "decode", 0))


def uncovered(reference: Mapping[str, Any], prompts: Mapping[str, int]) -> str | None:
    """Which of the case's prompts (id -> bucket) a record has no sample or no bound of, or None."""
    measured = set(reference["prompt_ids"])
    missing = [p for p in prompts if p not in measured]
    if missing:
        return f"it has no samples of {len(missing)} prompt(s) this case scores, first {missing[0]}"
    buckets = reference.get("prompt_buckets") or {}
    moved = [p for p in prompts if p in buckets and buckets[p] != prompts[p]]
    if moved:
        return (f"it measured prompt {moved[0]} in bucket {buckets[moved[0]]}, this case scores it in bucket "
                f"{prompts[moved[0]]} ({len(moved)} prompt(s) in other buckets)")
    unbound = sorted({b for b in prompts.values() if str(b) not in reference["bounds"]})
    if unbound:
        return f"it has no bound for bucket {unbound[0]}, where this case scores prompts"
    return None
