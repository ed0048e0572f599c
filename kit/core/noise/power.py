"""What a case can detect: the fault catalogue at graded magnitudes, judged against the case's own record.

"Passed" says nothing by itself about how small a fault would have failed the case: a case whose bounds are
six times its clean error passes faults a tight case fails. A power record holds the measurement that says it.
Each fault family's representative fault (kit.faults.power) was written into the model at graded magnitudes
and the faulted model scored with every clean variant and launch of the case's calibration; each such faulted
sample is judged here exactly as the gate judges a run (a prompt over its bucket's bound, a winner change or a
missing token, the drift test). Per family, the *detectable effect* is the smallest magnitude caught with
probability at least ``DETECTION_PROBABILITY`` over the samples, from which every larger magnitude tried is
caught too; it is stated as the fault's magnitude, its float32 effect (what the fault does to the model, free
of any engine's noise) and that effect in units of the case's clean error (the largest error of any clean
variant). A record is never taken on its word: the verdicts, probabilities and detectable effects are
re-derived from the faulted samples and the calibration record they were judged against, and a record whose
stated figures differ is refused.

Stdlib only: the gate's case kernel reads nothing of this, but the plan that builds its specs does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping, Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import ContentAddressed, canonical_bytes, read_addressed
from kit.core.host.runtime import numeric_fingerprint
from kit.core.rules import rules
from kit.core.rules.failure import Failure

FORMAT = "parity-kit-power/1"
# "Can detect" means caught in at least four of five healthy ways of running the faulty engine (the usual
# power of a test sized to a minimum detectable effect); a lone lucky variant does not make a fault detectable.
DETECTION_PROBABILITY = 0.8


class Caught(StrEnum):
    """Which of the gate's tests catch a faulted sample (``caught_by``): a prompt over its bound, a prompt's own
    test (a winner change, a golden token missing), the drift test, a decode step."""
    BOUND = "bound"
    PROMPT_TEST = "winner/missing"
    DRIFT = "drift"
    DECODE = "decode"


# The fault families a measurement covers by default (kit.faults.power maps each to its faults). A record of
# fewer says which it left out: "detects from 2x" over two families says nothing of the other three.
FAMILY_NAMES = ("position", "attention", "mlp", "normalization", "output")
TOP_KEYS = ("format", "case", "backend", "record_sha256", "measured_on", "fingerprint", "clean_error", "families",
            "trials", "command", "created_at", "summary")


@dataclass(frozen=True)
class FaultedSample:
    """One faulted model scored by one clean variant in one launch."""

    variant: str
    launch: int
    errors: dict[str, float]  # prompt id -> max probability error against the golden
    shifts: dict[str, float]  # prompt id -> signed shift of the golden top token (none where it was lost)
    failed_prompts: tuple[str, ...] = ()  # prompts the kernel's own tests failed (a winner change, a missing token)
    # A decode case's: each prompt's error per decode step compared, and the prompts whose continuation failed a
    # test no bound decides (a divergence outside a near-tie, a continuation cut short). None for other cases,
    # and then absent from the record, whose bytes (and so its name) stay what they were.
    steps: dict[str, tuple[float, ...]] | None = None
    decode_failed: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The faulted sample as a power record keeps it; a decode case's per-step keys only where measured,
        so older records keep their names."""
        out = {"variant": self.variant, "launch": self.launch, "errors": dict(self.errors),
               "shifts": dict(self.shifts), "failed_prompts": list(self.failed_prompts)}
        if self.steps is not None:
            out.update(steps={p: list(e) for p, e in self.steps.items()}, decode_failed=list(self.decode_failed))
        return out

    @classmethod
    def from_dict(cls, d: Mapping) -> "FaultedSample":
        """A faulted sample read from a power record, each value converted to its type."""
        steps = d.get("steps")
        return cls(str(d["variant"]), int(d["launch"]), {str(k): float(v) for k, v in d["errors"].items()},
                   {str(k): float(v) for k, v in d["shifts"].items()}, tuple(str(p) for p in d["failed_prompts"]),
                   None if steps is None else {str(p): tuple(float(x) for x in e) for p, e in steps.items()},
                   tuple(str(p) for p in d.get("decode_failed", ())))


@dataclass(frozen=True)
class Trial:
    """One fault at one magnitude: its float32 effect and the case's faulted samples."""

    family: str
    fault: str
    magnitude: float
    effect: float  # largest max_probability_error of the faulted model in float32 against the golden
    samples: tuple[FaultedSample, ...]

    def to_dict(self) -> dict:
        """One magnitude tried, as a power record keeps it: the fault, its float32 effect and every faulted
        sample, the evidence its summary is re-derived from."""
        return {"family": self.family, "fault": self.fault, "magnitude": self.magnitude, "effect": self.effect,
                "samples": [s.to_dict() for s in self.samples]}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Trial":
        """A trial read from a power record, its samples with it."""
        return cls(str(d["family"]), str(d["fault"]), float(d["magnitude"]), float(d["effect"]),
                   tuple(FaultedSample.from_dict(s) for s in d["samples"]))


def caught_by(sample: FaultedSample, reference: Mapping[str, Any]) -> tuple[Caught, ...]:
    """The gate's tests that fail this faulted sample under the calibration ``reference`` (empty: it passes). Each
    prompt's and each decode step's error is judged by the verdict's rule (kit.core.rules.rules.judged_error,
    the one the gate and the backtest judge by), so a change to that rule moves the detectable effects with it."""
    from kit.core.noise.drift import drift_of

    tests: list[Caught] = []
    if _bound_failures(sample.errors, reference):
        tests.append(Caught.BOUND)
    if sample.failed_prompts:
        tests.append(Caught.PROMPT_TEST)
    shifts = {p: x for p, x in sample.shifts.items() if _finite(x)}
    errors = {p: e for p, e in sample.errors.items() if p in shifts and _finite(e)}
    if errors and not drift_of(errors, shifts, reference).passed:
        tests.append(Caught.DRIFT)
    if sample.steps is not None and (sample.decode_failed or _step_failures(sample.steps, reference)):
        tests.append(Caught.DECODE)
    return tuple(tests)


def _bound_failures(errors: Mapping[str, float], reference: Mapping[str, Any]) -> list[Failure]:
    """The first-token failures of a faulted sample's errors, each under its bucket's bound."""
    bounds, buckets = reference["bounds"], reference["prompt_buckets"]
    judged = (rules.judged_error(p, buckets[p], e, rules.bound_for(buckets[p], None, bounds))
              for p, e in errors.items() if p in buckets)
    return [f for f in judged if f is not None]


def _step_failures(steps: Mapping[str, Sequence[float]], reference: Mapping[str, Any]) -> list[Failure]:
    """The decode steps that fail, as the gate judges one (kit.core.verdict.decode): step n under the record's
    bound for step n, else under the prompt's bucket's (kit.core.rules.rules.step_bound)."""
    step_bounds, bounds, buckets = reference.get("step_bounds"), reference["bounds"], reference["prompt_buckets"]
    judged = (rules.judged_error(pid, buckets[pid], e,
                                 rules.step_bound(n, rules.bound_for(buckets[pid], None, bounds), step_bounds),
                                 step=n, decode=True)
              for pid, errors in steps.items() if pid in buckets for n, e in enumerate(errors, start=1))
    return [f for f in judged if f is not None]


def caught_fraction(trial: Trial, reference: Mapping[str, Any]) -> float:
    """The share of a magnitude's faulted samples the gate would fail under ``reference``: the detection rate the
    family's detectable effect is read from."""
    return sum(bool(caught_by(s, reference)) for s in trial.samples) / len(trial.samples)


@dataclass(frozen=True)
class FamilyPower:
    """A family's detectable effect, derived from its trials (never read from a record)."""

    family: str
    fault: str
    tried: tuple[tuple[float, float, float], ...]  # (magnitude, float32 effect, probability caught), ascending
    magnitude: float | None  # the detectable magnitude; None when no magnitude tried is caught often enough
    effect: float | None
    ratio: float | None  # effect over the case's clean error
    # The largest magnitude tried under it that was not caught often enough (None: none was tried below it); for a
    # family caught at no magnitude, the largest magnitude tried.
    below: float | None

    def to_dict(self) -> dict:
        """A family's summary as a power record states it: every magnitude tried, the detectable one and its effect."""
        return {"family": self.family, "fault": self.fault, "tried": [list(t) for t in self.tried],
                "magnitude": self.magnitude, "effect": self.effect, "ratio": self.ratio, "below": self.below}


def family_power(family: str, trials: Sequence[Trial], reference: Mapping[str, Any], clean_error: float) -> FamilyPower:
    """The smallest magnitude caught with probability >= DETECTION_PROBABILITY from which every larger
    magnitude tried is caught too (a magnitude caught above one that is not, by luck of rounding, is no
    detectable effect: the next larger one could pass)."""
    rows = sorted((t.magnitude, t.effect, caught_fraction(t, reference)) for t in trials)
    detectable = caught_from([p >= DETECTION_PROBABILITY for _, _, p in rows])
    fault = trials[0].fault if trials else ""
    if detectable is None:
        return FamilyPower(family, fault, tuple(rows), None, None, None, rows[-1][0] if rows else None)
    magnitude, effect, _ = rows[detectable]
    below = rows[detectable - 1][0] if detectable > 0 else None
    return FamilyPower(family, fault, tuple(rows), magnitude, effect, _ratio(effect, clean_error), below)


def caught_from(caught: Sequence[bool]) -> int | None:
    """Of magnitudes in ascending order, each caught or not, the index of the smallest from which every larger one
    is caught; None where the largest is not caught."""
    k = len(caught)
    while k > 0 and caught[k - 1]:
        k -= 1
    return k if k < len(caught) else None


def _ratio(effect: float, clean_error: float) -> float:
    return round(effect / clean_error, 4) if clean_error > 0 else math.inf


def clean_error(reference: Mapping[str, Any]) -> float:
    """The case's clean error: the largest error any clean variant of its record showed, in any bucket."""
    return max(b["largest"] for b in reference["buckets"].values())


def summarize(trials: Sequence[Trial], reference: Mapping[str, Any]) -> dict:
    """Per family its detectable effect, and the case's: the largest family ratio (what it surely detects)."""
    clean = clean_error(reference)
    families: dict[str, list[Trial]] = {}
    for t in trials:
        families.setdefault(t.family, []).append(t)
    powers = {f: family_power(f, ts, reference, clean) for f, ts in sorted(families.items())}
    ratios = {f: p.ratio for f, p in powers.items()}
    missed = sorted(f for f, r in ratios.items() if r is None)
    hardest = missed[0] if missed else max(ratios, key=lambda f: ratios[f] or 0.0, default=None)
    worst = None if missed or hardest is None else ratios[hardest]
    return {"clean_error": clean, "probability": DETECTION_PROBABILITY, "prompts": _prompts(trials),
            "detects_from": worst, "hardest": hardest,
            "families": {f: p.to_dict() for f, p in powers.items()}}


def _prompts(trials: Sequence[Trial]) -> int:
    """How many prompts every faulted sample scored: the claim holds for a run of at least that many."""
    return min((len(s.errors) for t in trials for s in t.samples), default=0)


@dataclass(frozen=True)
class PowerRecord(ContentAddressed):
    """The faulted samples of one case against one calibration record, and what they show."""

    case: str
    backend: str
    record_sha256: str  # the calibration record whose bounds and drift test judged the samples
    measured_on: str  # the class of hardware (as the calibration record names it)
    fingerprint: dict[str, Any]
    families: dict[str, str]  # family -> its representative fault
    trials: list[Trial]
    command: list[str]
    created_at: str
    clean_error: float = 0.0
    summary: dict = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def measured(cls, reference: Mapping[str, Any], **kw) -> "PowerRecord":
        """A power record built from its trials, its summary and clean error derived under ``reference`` (the
        calibration record it was judged against), never stated by hand."""
        summary = summarize(kw["trials"], reference)
        return cls(**kw, summary=summary, clean_error=summary["clean_error"])

    def to_dict(self) -> dict:
        """The record as its file holds it (format parity-kit-power/1): these keys are what its name hashes."""
        return {"format": FORMAT, "case": self.case, "backend": self.backend, "record_sha256": self.record_sha256,
                "measured_on": self.measured_on, "fingerprint": self.fingerprint, "clean_error": self.clean_error,
                "families": dict(self.families), "trials": [t.to_dict() for t in self.trials],
                "command": list(self.command), "created_at": self.created_at, "summary": self.summary}

    @classmethod
    def from_dict(cls, d: Mapping, path: Path | None = None) -> "PowerRecord":
        """A record built from its file's document as stated; reading it re-derives the summary from the
        trials (``load_power``)."""
        return cls(case=str(d["case"]), backend=str(d["backend"]), record_sha256=str(d["record_sha256"]),
                   measured_on=str(d["measured_on"]), fingerprint=dict(d["fingerprint"]),
                   families={str(k): str(v) for k, v in d["families"].items()},
                   trials=[Trial.from_dict(t) for t in d["trials"]], command=[str(c) for c in d["command"]],
                   created_at=str(d["created_at"]), clean_error=float(d["clean_error"]), summary=dict(d["summary"]),
                   path=path)


# What every record of one measurement shares: a merged record could not say what it was measured against
# if these differed.
SAME_MEASUREMENT = ("case", "backend", "record_sha256", "measured_on", "fingerprint")


def merged(records: Sequence[PowerRecord], reference: Mapping[str, Any], command: Sequence[str],
           created_at: str) -> PowerRecord:
    """One record of the trials of several, each already judged by its evidence (``load_power``): a case's
    families measured in separate calls (a GPU node's calls are ten minutes; a 1B model's family takes most of
    one). They must be one measurement: the same case and backend, against the same calibration record, on the
    same hardware and runtime; no family by two faults, no magnitude measured twice. The figures are derived
    afresh from the trials together."""
    if not records:
        raise BadInput("merge: no power records given")
    first = records[0]
    families: dict[str, str] = {}
    trials: dict[tuple[str, float], tuple[Trial, str]] = {}
    for record in records:
        shown = str(record.path or "a record")
        for key in SAME_MEASUREMENT:
            if _compared(key, getattr(record, key)) != _compared(key, getattr(first, key)):
                raise BadInput(f"{shown}: {key}: {_short(getattr(record, key))}, where {first.path} has "
                               f"{_short(getattr(first, key))}: only records of one measurement are merged")
        for family, fault in record.families.items():
            if families.setdefault(family, fault) != fault:
                raise BadInput(f"{shown}: family {family} measured by {fault}, elsewhere by {families[family]}")
        for t in record.trials:
            if (t.fault, t.magnitude) in trials:
                raise BadInput(f"{shown}: {t.fault} at {t.magnitude:g} is measured in "
                               f"{trials[t.fault, t.magnitude][1]} too")
            trials[t.fault, t.magnitude] = (t, shown)
    return PowerRecord.measured(
        reference, case=first.case, backend=first.backend, record_sha256=first.record_sha256,
        measured_on=first.measured_on, fingerprint=numeric_fingerprint(first.fingerprint), families=families,
        trials=[t for t, _ in trials.values()], command=list(command), created_at=created_at)


def _compared(key: str, value: Any) -> Any:
    return numeric_fingerprint(value) if key == "fingerprint" else value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_power(path: str | Path) -> Any:
    """A power record's document as written, unjudged: what a reader needs to find the calibration record it
    names before ``load_power`` judges it (pass the document on, so the file is read once)."""
    return read_addressed(path, "power record", "power record",
                          "measure it again with `parity-kit power` instead of editing it")


def named_calibration(doc: Any, shown: str) -> str:
    """The SHA-256 of the calibration record a power record's document says it was measured against: what a
    reader looks up before ``load_power`` judges the record against it."""
    named = doc.get("record_sha256") if isinstance(doc, dict) else None
    if not isinstance(named, str):
        raise BadInput(f"{shown}: record_sha256: expected the calibration record it was measured against")
    return named


def load_power(path: str | Path, reference: Mapping[str, Any], doc: Any = None) -> PowerRecord:
    """A power record, judged by its evidence: named by its own SHA-256, measured against the calibration
    record ``reference`` (its ``sha256``), and every stated figure what its samples give under that record.
    Anything else is refused in one line naming the file and what is wrong. ``doc``: the file's document,
    where the caller has read it (``read_power``)."""
    path = Path(path)
    shown = str(path)
    doc = read_power(path) if doc is None else doc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BadInput(f"{shown}: not a power record ({FORMAT})")
    missing = [k for k in TOP_KEYS if k not in doc]
    if missing:
        raise BadInput(f"{shown}: {missing[0]}: missing")
    try:
        record = PowerRecord.from_dict(doc, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"{shown}: not a power record this kit can read ({type(exc).__name__}: {exc})") from None
    if record.canonical() != canonical_bytes(doc):  # its bytes are its name's (read_addressed); a key it lacks
        raise BadInput(f"{shown}: holds what a power record does not: its content is not what its name says")
    if record.record_sha256 != reference["sha256"]:
        raise BadInput(f"{shown}: measured against calibration record {record.record_sha256[:12]}, not "
                       f"{reference['sha256'][:12]}")
    if not record.trials or any(not t.samples for t in record.trials):
        raise BadInput(f"{shown}: trials: expected faulted samples to judge")
    derived = summarize(record.trials, reference)
    if canonical_bytes(derived) != canonical_bytes(record.summary):
        raise BadInput(f"{shown}: summary: its detectable effects are not what its faulted samples give under "
                       f"record {record.record_sha256[:12]} (re-derived: detects from "
                       f"{_said(derived['detects_from'])}x the clean error, stated "
                       f"{_said(record.summary.get('detects_from'))})")
    return record


def unmeasured(detectable: Mapping[str, Any]) -> list[str]:
    """The default fault families a measurement left out."""
    return [f for f in FAMILY_NAMES if f not in (detectable.get("families") or {})]


def _said(x: Any) -> str:
    return "never" if x is None else f"{x:g}" if isinstance(x, (int, float)) else repr(x)


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def detectable_of(record: PowerRecord, same_class: bool) -> dict:
    """What a case carries of a power record: each family's detectable effect and the case's, where and
    against which record it was measured (``same_class``: on this host's class of hardware)."""
    return {"sha256": record.sha256, "path": str(record.path) if record.path else None,
            "record_sha256": record.record_sha256, "measured_on": record.measured_on, "same_class": same_class,
            **record.summary}


def measured_elsewhere(detectable: Mapping[str, Any]) -> str:
    """" (measured on cpu (x86-64-v4))" where the power record was measured on another class of hardware than
    the case's record here (the figure is then that class's, not this host's); "" where on the same."""
    return "" if detectable.get("same_class", True) else f" (measured on {detectable.get('measured_on')})"


def headline(detectable: Mapping[str, Any] | None) -> str:
    """One line for a person: "detects faults from 1.4x the clean error" (or why it cannot say)."""
    if not detectable:
        return "detectable effect not measured"
    where = measured_elsewhere(detectable)
    missing = unmeasured(detectable)
    where += f"; not measured: {', '.join(missing)}" if missing else ""
    worst = detectable.get("detects_from")
    if worst is None:
        missed = [f for f, p in detectable["families"].items() if p.get("ratio") is None]
        return (f"does not detect every fault family: {', '.join(missed)} not caught at any magnitude "
                f"tried{where}")
    return f"detects faults from {worst:.2g}x the clean error{where}"


def family_lines(detectable: Mapping[str, Any] | None) -> list[str]:
    """Per family: from what multiple of the clean error the case detects it."""
    if not detectable:
        return []
    out = []
    for family, p in detectable["families"].items():
        if p.get("ratio") is None:
            top = p["tried"][-1] if p.get("tried") else None
            out.append(f"{family} ({p['fault']}): not caught up to magnitude {top[0]:g}" if top else
                       f"{family}: not measured")
        else:
            out.append(f"{family} ({p['fault']}): from {p['ratio']:.2g}x (magnitude {p['magnitude']:g}, "
                       f"float32 effect {p['effect']:.2g})")
    return out
