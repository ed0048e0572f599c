"""Triage: whose kind of fault a failed or unfinished case is, decided from its record alone.

A gate that fails for a dead kernel, an engine that never answered or a lost worker says nothing about
parity, and a winner flipped inside a near-tie is a flake family, not a regression; reading either as a
numeric regression sends people after the wrong bug. So every case that did not pass gets one class, with
the evidence that decided it, and the gate acts on the class: an infrastructure failure is retried
(kit.gate.retry) and, if it persists, leaves the verdict incomplete; a numeric one is never retried
(docs/triage.md).

The rules are one table (RULES), tried in order, first match wins; each is a pure function of the case's
status, error kind, failure lines, and of the other results of the same run (several unrelated cases erroring
together is a job-level event). An error is classed by its kind (``CaseResult.error_kind``, kit.core.outcomes),
set from its type where it arose, and a failure by its kinds (kit.core.verdict: ``failures_of``). Neither is read
from its words here: a record written before kinds existed is read by the verdict's one legacy reading
(kit.core.verdict.legacy), so that older run directories triage as they always did. Stdlib only: the kernel-safe
core.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Callable, Iterable, Mapping, Sequence

from kit.core.outcomes import EXPLAINED, kind_of
from kit.core.records.records import CaseResult, Status
from kit.core.verdict import Failure, Kind, failures_of, legacy
from kit.core.rules.failure import WINNER_CHANGES


class TriageClass(StrEnum):
    """A triaged case's class, as its result's ``triage.kind`` spells it."""

    INFRASTRUCTURE = "infrastructure"
    NEAR_TIE = "near-tie"
    NUMERIC = "numeric"
    # An error the kit cannot pin on the job (a cell raised for a reason of its own, a result that does not cover
    # the case): not retried, since it would raise again, and not a regression either, since nothing was judged.
    CASE_ERROR = "case-error"
    # A failure under bounds measured on another class of hardware, by no more than classes differ
    # (kit.core.verdict.borrowed): this host's noise may explain it, so it is neither retried nor called a
    # regression; measuring this host decides.
    BORROWED_BOUNDS = "borrowed-bounds"



@dataclass(frozen=True)
class Triage:
    kind: str  # a TriageClass's word
    evidence: str  # one line, starting with the class: what a reader is told

    def to_dict(self) -> dict:
        """The triage as a case result holds it: its class and the evidence it was decided from."""
        return {"class": self.kind, "evidence": self.evidence}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Triage":
        """A triage read back from a case result."""
        return cls(str(d.get("class")), str(d.get("evidence")))


# Numeric failure families, for the evidence: (label, the failure kinds it holds). A kind none names is "other".
_FAMILIES: tuple[tuple[str, frozenset[Kind]], ...] = (
    ("over the bound", frozenset({Kind.OVER_BOUND})),
    ("drift", frozenset({Kind.DRIFT})),
    ("non-finite logprobs", frozenset({Kind.NON_FINITE})),
    ("missing tokens", frozenset({Kind.MISSING_TOKEN, Kind.GREEDY_OUTSIDE_TOP, Kind.DECODE_OUTSIDE_TOP})),
    ("exact mismatch", frozenset({Kind.NOT_EXACT, Kind.REPEAT})),
    ("winner changes", WINNER_CHANGES),
)

EVIDENCE_CHARS = 300  # an evidence line stays a line


def classify(result: CaseResult, run_results: Mapping[str, CaseResult] | Iterable[CaseResult] = ()) -> Triage | None:
    """The class of a case that did not pass (None for a passed case, or one without a baseline: nothing
    failed); ``run_results``: every result of the same run, this one among them or not."""
    others = list(run_results.values()) if isinstance(run_results, Mapping) else list(run_results)
    for _, rule in RULES:
        found = rule(result, others)
        if found is not None:
            return Triage(found.kind, _line(found.evidence))
    return None


def _timeout(r: CaseResult, _: Sequence[CaseResult]) -> Triage | None:
    if r.status != Status.TIMEOUT:
        return None
    return Triage(TriageClass.INFRASTRUCTURE, f"infrastructure: timeout: {r.error or 'the case ran past its timeout'}")


def _typed(r: CaseResult, _: Sequence[CaseResult]) -> Triage | None:
    """An error whose kind is the job's. A case error (or no kind) goes on to the run-wide rule."""
    kind = kind_of(r.error_kind)
    if r.status != Status.ERROR or kind is None or not kind.infrastructure:
        return None
    return Triage(TriageClass.INFRASTRUCTURE, f"infrastructure: {kind.words}: {r.error}")


def _infrastructure_sign(r: CaseResult, _: Sequence[CaseResult]) -> Triage | None:
    """The fallback for a record written before error kinds existed: what the legacy reading finds in its error
    text, else its log tail (kit.core.verdict.legacy)."""
    if r.status != Status.ERROR or kind_of(r.error_kind) is not None:
        return None
    sign = legacy.infrastructure_sign(r.error, r.log_tail)
    return None if sign is None else Triage(TriageClass.INFRASTRUCTURE, f"infrastructure: {sign[0]}: {sign[1]}")


def _correlated(r: CaseResult, run: Sequence[CaseResult]) -> Triage | None:
    """An unexplained error while cases of other backends errored too: unrelated code failing together
    points at the job (a full disk, a node going away), not at each case."""
    if r.status != Status.ERROR or r.error_kind in EXPLAINED:
        return None
    # A case that refused its input failed for that reason alone, however many failed beside it.
    broke = [o for o in run if o.status in (Status.ERROR, Status.TIMEOUT) and o.error_kind not in EXPLAINED]
    if not any(o.case == r.case for o in broke):
        broke.append(r)
    backends = sorted({o.backend for o in broke})
    if len(broke) < 2 or len(backends) < 2:
        return None
    return Triage(TriageClass.INFRASTRUCTURE,
                  f"infrastructure: {len(broke)} cases of backends {', '.join(backends)} errored in "
                                  f"this run together ({', '.join(sorted(o.case for o in broke))}): a job-level "
                                  f"event, not independent regressions; this one: {r.error}")


def _case_error(r: CaseResult, _: Sequence[CaseResult]) -> Triage | None:
    if r.status != Status.ERROR:
        return None
    return Triage(TriageClass.CASE_ERROR, f"case error: {r.error}")


def _borrowed(r: CaseResult, _: Sequence[CaseResult]) -> Triage | None:
    if r.status != Status.BORROWED:
        return None
    return Triage(TriageClass.BORROWED_BOUNDS, f"borrowed bounds: {r.error}")


def _near_tie(r: CaseResult, _: Sequence[CaseResult]) -> Triage | None:
    """Failed on winner changes only: with no error over its bound, a flipped winner led by at most twice the
    bound, so these are the near-tie flake family, not a drifting distribution."""
    failures = failures_of(r)
    if r.status != Status.FAILED or not failures or _drift_failed(r):
        return None
    if not all(f.kind in WINNER_CHANGES for f in failures):
        return None
    prompts = sorted({str(f.prompt) for f in failures})
    return Triage(TriageClass.NEAR_TIE, f"near-tie: only winner changes between near-tied tokens ({len(r.failures)} on "
                            f"{', '.join(prompts)}), no bound exceeded, no drift failure: the near-tie flake family; "
                            f"first: {r.failures[0]}")


def _numeric(r: CaseResult, _: Sequence[CaseResult]) -> Triage | None:
    if r.status != Status.FAILED:
        return None
    counts: dict[str, int] = {}
    for f in failures_of(r):
        label = _family(f)
        counts[label] = counts.get(label, 0) + 1
    if _drift_failed(r) and "drift" not in counts:
        counts["drift"] = 1
    if not counts:
        return Triage(TriageClass.NUMERIC, "numeric: failed, with no failure line recorded")
    what = ", ".join(f"{name} ({n})" for name, n in counts.items())
    first = r.failures[0] if r.failures else "the drift test failed"
    return Triage(TriageClass.NUMERIC, f"numeric: {what}; first: {first}")


# The rules, first match wins. The order is the argument: an explicit sign of the job beats everything an
# error could otherwise be; the run-wide pattern comes before calling an error the case's own; a failed
# case is never infrastructure (it was judged), and near-tie only when nothing numeric is in it.
RULES: tuple[tuple[str, Callable[[CaseResult, Sequence[CaseResult]], Triage | None]], ...] = (
    ("timeout: the kit killed a case that ran past its timeout", _timeout),
    ("error of a kind that is the job's: an engine that did not start or stopped answering, a dead kernel, out "
     "of memory, a lost worker, an interrupted run, an executor that could not start or record the case", _typed),
    ("error without a kind (a record of an older kit) whose text names one of those (its error, else its log "
     "tail)", _infrastructure_sign),
    ("error while cases of another backend errored or timed out in the same run", _correlated),
    ("any other error", _case_error),
    ("failed only under bounds measured on another class of hardware, by what classes differ", _borrowed),
    ("failed, every failure a winner change between near-tied tokens, drift not failed", _near_tie),
    ("failed otherwise: over the bound, drift, non-finite, missing tokens, exact mismatch", _numeric),
)


def _drift_failed(r: CaseResult) -> bool:
    return bool(r.drift) and r.drift.get("passed") is False  # type: ignore[union-attr]


def _family(f: Failure) -> str:
    return next((name for name, kinds in _FAMILIES if f.kind in kinds), "other")


def _line(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= EVIDENCE_CHARS else one[:EVIDENCE_CHARS - 1] + "…"
