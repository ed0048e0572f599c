"""Typed records passed between backends, scoring, execution and reports.

They are plain dataclasses (no pydantic) so that a backend kernel in another
environment, with other library versions, can build and write them too.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, Mapping

from kit.core.records.jsonio import json_safe
from kit.core.rules import rules
from kit.core.rules.failure import Failure

class Status(StrEnum):
    """A case's status, as its result's ``status`` spells it; the gate verdict is derived from them in
    kit.core.records.results."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    # An exact case whose runtime has no golden: neither passed nor failed, since nothing could judge it.
    NO_BASELINE = "no-baseline"
    # A case within its bounds that could not have seen a fault as small as its descriptor asks (its detectable
    # effect is over the limit, or it scored fewer prompts than that effect was measured on): not passed, not failed.
    INCONCLUSIVE = "inconclusive"
    # A case that failed only under bounds measured on another class of hardware, by no more than classes differ
    # (kit.core.verdict.borrowed): this host's noise may explain it, so it is neither a pass nor a regression until
    # measured.
    BORROWED = "borrowed-bounds"


class GoldenMode(StrEnum):
    """A golden's kind (``golden_kind``), as its file and the descriptor's [goldens] names spell it: semantic
    (compared under a bound) or exact (one runtime's own output, compared bit for bit). Every comparison with a
    kind uses these."""

    SEMANTIC = "semantic"
    EXACT = "exact"


class DriftOff(StrEnum):
    """Why a calibrated case left its drift test out, as its result's ``drift_off`` spells it: the descriptor
    turned it off, or its record measured another class of hardware. Readers compare a member (a result read from
    JSON holds the word, which equals its member), never the words of ``drift_skipped``."""

    TURNED_OFF = "turned-off"
    OTHER_HARDWARE = "other-hardware"


class BoundKind(StrEnum):
    """Where a case's bounds came from, as its result's ``bound_source["kind"]`` spells it: a calibration record's
    measurement, the descriptor's hand-set bound, or none at all (an exact golden, compared bit for bit). Every
    reader compares a member, never the word; the words are the ones results have always held."""

    CALIBRATED = "calibrated"
    HAND_SET = "hand-set"
    EXACT = "exact"

    @classmethod
    def of(cls, source: Mapping[str, Any] | None, golden_kind: Any) -> BoundKind:
        """The kind a result's ``bound_source`` records. A result written before it recorded one (or naming one
        this kit does not know) had bounds by its golden's kind: none for an exact golden, else set by hand."""
        recorded = (source or {}).get("kind")
        if isinstance(recorded, str) and recorded in cls._value2member_map_:
            return cls(recorded)
        return cls.EXACT if golden_kind == GoldenMode.EXACT else cls.HAND_SET


@dataclass(frozen=True)
class NoBaseline:
    """Why a case has no baseline it may use on this host, and the one command that makes it. A case of this
    kind is neither passed nor failed: nothing could judge it here (its status is Status.NO_BASELINE)."""

    kind: str  # the baseline kind that is missing (kit.core.baselines.baselinekind: "exact-golden", "calibration")
    reason: str  # in words: what the descriptor lists and what this host is
    command: str  # the one command that makes it on this host
    then: str = ""  # what to do with what it made, where the command does not place it itself

    @property
    def text(self) -> str:
        """Why a case has no baseline here and the command that makes one, as the run's evidence and the
        summary say it."""
        return f"{self.reason}; make one here with `{self.command}`{self.then}"

    def to_dict(self) -> dict:
        """The reason as a spec and a case result carry it across processes."""
        return asdict(self)

    @classmethod
    def read(cls, value: Any) -> "NoBaseline | None":
        """From a spec as JSON carries it; a spec written before the reason was typed held only its text."""
        if value is None or isinstance(value, NoBaseline):
            return value
        if isinstance(value, str):
            return cls(kind="", reason=value, command="")
        return cls(**{k: value[k] for k in ("kind", "reason", "command", "then") if k in value})


@dataclass(frozen=True)
class Observation:
    """One backend's next-token distribution at the last prompt position:
    its top-n ``(token_id, logprob)`` pairs, most likely first."""

    prompt_id: str
    top_logprobs: tuple[tuple[int, float], ...]
    n_tokens: int

    def to_dict(self) -> dict:
        """The observation as case results and evidence files hold it, under the key (``case_id``) files have
        always used."""
        return {"case_id": self.prompt_id,  # the key files have always used
                "n_tokens": self.n_tokens,
                "top_logprobs": pairs_to_json(self.top_logprobs)}

    @classmethod
    def from_dict(cls, d: dict) -> "Observation":
        """An observation read back from a case result or evidence file."""
        return cls(str(d["case_id"]), pairs_from_json(d["top_logprobs"]), int(d["n_tokens"]))


def pairs_to_json(top) -> list[list]:
    """``(token_id, logprob)`` pairs as JSON lists. An engine's NaN or infinite logprob is evidence too (the judge
    fails it): it is kept as its name, since JSON has no number for it."""
    return [[int(t), lp if math.isfinite(lp) else str(lp)] for t, lp in ((t, float(lp)) for t, lp in top)]


def pairs_from_json(top) -> tuple[tuple[int, float], ...]:
    """A top list read from JSON as ``(token id, logprob)`` tuples of their types, however the file spelled the
    numbers."""
    return tuple((int(t), float(lp)) for t, lp in top)


@dataclass(frozen=True)
class Continuation:
    """A backend's greedy continuation of one prompt through its own decode path (KV cache and all):
    per step the token it chose and its top-n ``(token_id, logprob)`` pairs there, most likely first."""

    prompt_id: str
    steps: tuple[tuple[int, tuple[tuple[int, float], ...]], ...]

    @property
    def tokens(self) -> list[int]:
        """The continuation's chosen tokens, step by step: what the decode check compares first."""
        return [token for token, _ in self.steps]


@dataclass(frozen=True)
class DecodeScore:
    """One prompt's continuation against the golden's, step by step (kit.core.verdict.decode).

    ``compared`` counts the steps scored; ``diverged_at`` is the 1-based step where the backend chose
    another token than the golden (None: they agreed throughout), and ``accepted`` says whether that
    divergence sat inside a near-tie of the reference (then the comparison ended there, passing)."""

    id: str
    bucket: int
    steps: int
    compared: int
    passed: bool
    max_probability_error: float
    diverged_at: int | None = None
    golden_token: int | None = None
    backend_token: int | None = None
    accepted: bool | None = None
    why: str = ""
    failures: list[str] = field(default_factory=list)
    # The max probability error of each step compared, in order: what calibrating a decode case keeps per step.
    step_errors: list[float] = field(default_factory=list)
    # At a divergence, the golden's lead of its token over the backend's (None: none, or outside the golden's
    # top-k): what lets a reader re-judge the near-tie under other bounds without the continuations.
    gap: float | None = None
    # ``failures`` as data (kit.core.verdict): what a reader asks, through kit.core.verdict.failures_of.
    typed_failures: list[Failure] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The score as a case result holds it, its failures typed beside their lines."""
        return typed_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DecodeScore":
        """A decode score read back, keys of a newer kit left out and typed failures read where present."""
        return cls(**read_typed(known_fields(cls, d)))


@dataclass(frozen=True)
class PromptScore:
    """The metric panel of one fixture case (see kit.core.verdict.scoring for definitions)."""

    id: str
    bucket: int
    n_tokens: int
    passed: bool
    bound: float | None
    max_probability_error: float
    top_probability_l1_error: float
    kl_shared: float
    first_rank_agreement: bool
    golden_top_token: int
    golden_top_probability: float
    backend_top_token: int
    backend_top_probability: float
    winner_gap: float
    missing_tokens: list[int] = field(default_factory=list)
    # p_backend(golden top token) - p_golden(golden top token), signed: what the drift test follows.
    top_probability_shift: float | None = None
    exact_match: bool | None = None
    failures: list[str] = field(default_factory=list)
    # Top tokens side by side, so a reader sees how it failed, not only that it did.
    golden_top: list[list[float]] = field(default_factory=list)
    backend_top: list[list[float]] = field(default_factory=list)
    # ``failures`` as data (kit.core.verdict): what a reader asks, through kit.core.verdict.failures_of.
    typed_failures: list[Failure] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The score as a case result holds it, its failures typed beside their lines."""
        return typed_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PromptScore":
        """A prompt score read back, keys of a newer kit left out and typed failures read where present."""
        return cls(**read_typed(known_fields(cls, d)))


@dataclass(frozen=True)
class RepeatSpread:
    """How far repeated observations of one prompt moved (see kit.core.verdict.scoring.repeat_spread)."""

    id: str
    runs: int
    launches: int
    max_logprob_spread: float
    max_probability_spread: float
    identical: bool
    difference: str | None = None  # the first difference, in words, when not identical

    def to_dict(self) -> dict:
        """The spread as a case result holds it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RepeatSpread":
        """A spread read back, keys of a newer kit left out."""
        return cls(**known_fields(cls, d))


@dataclass(frozen=True)
class CaseResult:
    """Everything one gate case produced: what ran, against what, and how it went."""

    case: str
    backend: str
    status: str
    golden_kind: str | None = None
    golden_path: str | None = None
    bound: float | None = None
    bucket_bounds: dict[str, float] = field(default_factory=dict)
    # Where the bounds came from, "kind" a BoundKind's word: {"kind": "hand-set"}, or {"kind": "calibrated",
    # "record": sha256, "rule": ..., "noise": ..., "fingerprint": the runtime the noise was measured on}.
    bound_source: dict[str, Any] = field(default_factory=dict)
    # The drift test over all prompts (kit.core.noise.drift.DriftResult as a dict); None when not run.
    drift: dict[str, Any] | None = None
    # Why a calibrated case did not run its drift test (turned off, or noise measured on other hardware), in words,
    # and which of the two (None: it ran, or the case has no calibration).
    drift_skipped: str | None = None
    drift_off: DriftOff | None = None
    options: dict[str, Any] = field(default_factory=dict)
    release: dict[str, Any] = field(default_factory=dict)
    # How the backend computed this case (attention per bucket, repeat spread, ...): facts a
    # reader needs to interpret the numbers, reported by the backend itself.
    details: dict[str, Any] = field(default_factory=dict)
    fixture_sha256: str | None = None
    model_digest: str | None = None
    golden_sha256: str | None = None
    inputs_digest: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    scoring_s: float | None = None
    prompts: list[PromptScore] = field(default_factory=list)
    # One entry per repeated prompt: the noise floor of this backend on this host.
    repeat_spread: list[RepeatSpread] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    # The one command that makes what the case lacked here (a no-baseline case's baseline, a borrowed-bounds case's
    # record of this host's class); None where none is needed.
    remedy: str | None = None
    # What kind of error ended the case (kit.core.outcomes), set from its type where it arose; None when it did not
    # error, and in a record written before kinds existed (triage then reads its error text, kit.core.verdict.triage).
    error_kind: str | None = None
    notebook: str | None = None
    log_tail: str | None = None
    # The GPUs the local executor gave the case ({index, uuid, name} each); empty: it asked for none.
    devices: list[dict[str, Any]] = field(default_factory=list)
    # The decode check (a case with ``decode``): one record per prompt, empty when the case has none.
    decode: list[DecodeScore] = field(default_factory=list)
    # Seconds per phase in the order they ran (kit.core.records.phases); the executor frames the kernel's own
    # phases with the kernel's start and the notebook's write-out, using kernel_span (epoch seconds).
    phases: dict[str, float] = field(default_factory=dict)
    kernel_span: list[float] = field(default_factory=list)
    # Why it did not pass, as kit.core.verdict.triage classed it: {"class": ..., "evidence": ...}; None when it passed,
    # and in a record written before triage existed.
    triage: dict[str, str] | None = None
    # The earlier attempts of this case in the same run, each set aside before the gate ran it again
    # (kit.gate.retry): {"attempt": n, "status", "error", "triage", "files": [paths in the run directory]}.
    attempts: list[dict[str, Any]] = field(default_factory=list)
    # What the case can detect (kit.core.noise.power.detectable_of): per fault family, the smallest fault it catches
    # with probability 0.8 in units of its clean error; None when no power record was measured for it.
    detectable: dict[str, Any] | None = None
    # ``failures`` as data (kit.core.verdict): what a reader asks (triage, the archive, a fault's effect), through
    # kit.core.verdict.failures_of; empty in a record written before failures had kinds.
    typed_failures: list[Failure] = field(default_factory=list)

    @property
    def failure_messages(self) -> list[str]:
        """One line per reason this case did not pass."""
        if self.status in (Status.ERROR, Status.TIMEOUT):
            return [f"{self.case}: {self.status}: {self.error}"]
        if self.status == Status.NO_BASELINE:
            return [f"{self.case}: {self.error}"]
        if self.status == Status.INCONCLUSIVE:
            return [f"{self.case}: inconclusive: {self.error}"]
        if self.status == Status.BORROWED:
            return [f"{self.case}: borrowed bounds: {self.error}"]
        return [f"{self.case}: {message}" for message in self.failures]

    @property
    def worst(self) -> PromptScore | None:
        """The prompt a reader should look at first: the most severe failing one, else the most severe of all
        (None without prompts)."""
        if not self.prompts:
            return None
        failing = [p for p in self.prompts if not p.passed]
        pool = failing or self.prompts
        return max(pool, key=prompt_severity)

    @property
    def max_probability_error(self) -> float | None:
        """The case's largest probability error over its prompts; NaN where a prompt could not be scored (no
        number would be honest), None without prompts."""
        errors = [p.max_probability_error for p in self.prompts]
        if not all(map(_is_number, errors)):  # an unscorable prompt has no error to report
            return float("nan")
        return max(errors, default=None)

    @property
    def headroom(self) -> float | None:
        """The largest headroom over the scored prompts, each by the rule (``rules.ratio``: error / bound, 1 at the
        bound); None without bounds."""
        ratios = [rules.ratio(p.max_probability_error, p.bound) for p in self.prompts
                  if p.bound and _is_number(p.max_probability_error)]
        return max(ratios, default=None)

    @property
    def bound_kind(self) -> BoundKind:
        """Where the bounds came from (``BoundKind.of`` its ``bound_source``)."""
        return BoundKind.of(self.bound_source, self.golden_kind)

    @property
    def bound_text(self) -> str:
        """Where the bounds came from, in a few words: hand-set, or the record and rule that set them."""
        src = self.bound_source or {}
        kind = self.bound_kind
        if kind is BoundKind.EXACT:
            return "exact golden"
        bounds = [b for b in self.bucket_bounds.values()] or ([self.bound] if self.bound is not None else [])
        span = ((f"{min(bounds):g}" if min(bounds) == max(bounds) else f"{min(bounds):g}-{max(bounds):g}")
                if bounds else "none")
        if kind is BoundKind.CALIBRATED:
            return f"{span}, calibrated: record {str(src.get('record'))[:12]}, rule {src.get('rule')}"
        return f"{span}, hand-set"

    @property
    def drift_text(self) -> str:
        """The drift test in a few words, or why it did not run."""
        if self.drift is None:
            return self._drift_not_run()
        verdict = "passed" if self.drift.get("passed") else "failed"
        p = self.drift.get("p_value")
        return f"{verdict}, p = {p:.2g}" if isinstance(p, (int, float)) else f"{verdict} (range rule)"

    def _drift_not_run(self) -> str:
        """Why there is no drift test: the case's own reason, else that it did not finish, else (a semantic
        case) that it has no calibration to test against."""
        if self.drift_skipped:
            return f"not run ({self.drift_skipped})"
        if self.status in (Status.ERROR, Status.TIMEOUT):
            return f"not run (case {self.status})"
        if self.bound_kind is BoundKind.CALIBRATED:
            return "not run"
        return "not run (no calibration)" if self.golden_kind == GoldenMode.SEMANTIC else "—"

    @property
    def calibrated_noise(self) -> float | None:
        """The noise the case's calibration measured (its largest per-prompt range), None if hand-set."""
        value = self.bound_source.get("noise") if self.bound_source else None
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def noise_floor(self) -> float | None:
        """The largest probability spread across repeats, None when nothing was repeated."""
        return max((r.max_probability_spread for r in self.repeat_spread), default=None)

    @property
    def decode_text(self) -> str:
        """The decode check in a few words: steps compared, divergences and how they were judged."""
        if not self.decode:
            return "—"
        compared = sum(d.compared for d in self.decode)
        asked = sum(d.steps for d in self.decode)
        accepted = sum(1 for d in self.decode if d.diverged_at is not None and d.accepted)
        refused = sum(1 for d in self.decode if d.diverged_at is not None and not d.accepted)
        parts = [f"{compared}/{asked} steps"]
        if accepted:
            parts.append(f"{accepted} near-tie divergence{'s' if accepted != 1 else ''}")
        if refused:
            parts.append(f"{refused} divergence{'s' if refused != 1 else ''} failed")
        return ", ".join(parts)

    def counts(self) -> dict[str, int]:
        """How many prompts the case scored, passed and failed: the figures of its row in every report."""
        return {"prompts": len(self.prompts), "passed": sum(p.passed for p in self.prompts),
                "failed": sum(not p.passed for p in self.prompts)}

    @property
    def drift_left_out(self) -> DriftOff | None:
        """Why the case left its drift test out (``drift_off``); None when it ran it, or had none to run.
        LEGACY READING: a result written before results carried ``drift_off`` is answered by the words its kit
        then wrote in ``drift_skipped`` (frozen with that kit's wording)."""
        if self.drift_off is not None or not self.drift_skipped:
            return None if self.drift_off is None else DriftOff(self.drift_off)
        return DriftOff.TURNED_OFF if self.drift_skipped.startswith("turned off") else DriftOff.OTHER_HARDWARE

    def to_dict(self) -> dict:
        """JSON-ready: non-finite metrics (a NaN-poisoned prompt) become None."""
        d = typed_dict(self)
        d["prompts"] = [p.to_dict() for p in self.prompts]
        d["decode"] = [x.to_dict() for x in self.decode]
        d["max_probability_error"] = self.max_probability_error
        d["counts"] = self.counts()
        d["noise_floor"] = self.noise_floor
        d["headroom"] = self.headroom
        return json_safe(d)

    @classmethod
    def from_dict(cls, d: dict) -> "CaseResult":
        """A case result read back, its prompt and decode scores and repeat spreads with it; keys of a newer
        kit are left out rather than refused."""
        kw = read_typed(known_fields(cls, d))
        kw["prompts"] = [PromptScore.from_dict(p) for p in d.get("prompts", [])]
        kw["repeat_spread"] = [RepeatSpread.from_dict(r) for r in d.get("repeat_spread", [])]
        kw["decode"] = [DecodeScore.from_dict(r) for r in d.get("decode") or []]
        return cls(**kw)


def known_fields(cls, d: dict) -> dict:
    """The entries of ``d`` that are fields of the dataclass ``cls``: a record written by another
    kit version may carry keys this one does not know, and reading it must not fail on them."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def typed_dict(record: Any) -> dict:
    """``asdict`` of a record, its typed failures as the plain dicts JSON holds."""
    d = asdict(record)
    d["typed_failures"] = [f.to_dict() for f in record.typed_failures]
    return d


def read_typed(kw: dict) -> dict:
    """A record's fields as read, its typed failures back as Failures (a kind this kit does not know is left out:
    its line is then read as an older record's is, kit.core.verdict.failures_of)."""
    typed = [Failure.from_dict(f) for f in kw.get("typed_failures") or [] if isinstance(f, dict)]
    kw["typed_failures"] = [f for f in typed if f is not None]
    return kw


def prompt_severity(p: PromptScore) -> float:
    """How close to (or past) its bound a prompt is, by the rule (``rules.severity``); unscorable prompts are the
    worst."""
    return rules.severity(p.max_probability_error, p.bound)


def _is_number(err: float | None) -> bool:
    """False for the None or NaN of a prompt whose logprobs were not finite."""
    return err is not None and not math.isnan(err)
