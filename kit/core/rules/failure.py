"""A failure as data: what failed (its kind), where (prompt, bucket, decode step), by how much (value, bound).

A failure used to be a line of text, and every reader that needed to know what failed (triage, the backtest's
archive, a fault's effect) matched the line's wording again, each its own way: a rewording upstream silently
re-classed a failure downstream. Here a failure is a frozen record and its words are made from its fields, in
this module only (``Failure.text``); a reader asks ``kind``. The line each failure makes is the one the kit has
always written, byte for byte: run directories, reports and tests quote it.

A record stores both: ``failures`` (the lines, as every record has) and ``typed_failures`` (these records).
A reader asks ``failures_of`` (kit.core.verdict.legacy) for the typed failures of any record, an older record's
(lines only) included. Stdlib only: the kernel-safe core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, Iterable, Mapping

# The near-tie rule's factor (kit.core.rules.rules.near_tie): a winner change is accepted when the golden's
# winner leads the backend's choice by at most this many times the prompt's max probability error. Here, beside
# the words that quote it, so that the words and the rule cannot disagree.
WINNER_GAP_FACTOR = 2.0

REJUDGED = "; the notebook said passed: its verdict disagreed with its own numbers"


class Kind(StrEnum):
    """What failed. A str, so a record of another kit version reads and writes it as plain JSON."""

    OVER_BOUND = "over-bound"  # max probability error above the bucket's (or decode step's) bound
    WINNER_CHANGE = "winner-change"  # the backend's greedy token is another of the golden's, outside a near-tie
    GREEDY_OUTSIDE_TOP = "greedy-outside-top"  # the backend's greedy token is not among the golden's top-k
    MISSING_TOKEN = "missing-token"  # a golden token is not among the backend's top-n
    NON_FINITE = "non-finite"  # a NaN or infinite logprob, or no logprob at all: nothing to score
    NOT_EXACT = "not-exact"  # an exact golden's pairs are not reproduced bit for bit
    DECODE_SHORT = "decode-short"  # the backend continued fewer steps than the case asks
    DECODE_DIVERGENCE = "decode-divergence"  # continuations diverged between two golden tokens, outside a near-tie
    DECODE_OUTSIDE_TOP = "decode-outside-top"  # continuations diverged to a token outside the golden's top-k
    NEAR_TIE_DIVERGENCE = "near-tie-divergence"  # diverged inside a near-tie at a step that fails its own tests
    DRIFT = "drift"  # the case's drift test against its calibration
    REPEAT = "repeat"  # repeats of a prompt that must be bit-exact are not
    OTHER = "other"  # a line of an older record that names none of these (legacy reading only)


# The kinds that are a winner change and nothing else: a flipped winner between two of the golden's tokens.
WINNER_CHANGES = frozenset({Kind.WINNER_CHANGE, Kind.DECODE_DIVERGENCE})


@dataclass(frozen=True)
class Failure:
    """One failure of a prompt, a decode step or a case. ``prompt`` is None for a case's own (drift)."""

    kind: Kind
    prompt: str | None = None
    bucket: int | None = None
    step: int | None = None  # 1-based decode step; None: the first token, or the decode check as a whole
    value: float | None = None  # the measured number the rule judged (an error, a spread, a drift mean)
    bound: float | None = None  # what it was judged against
    decode: bool = False  # a failure of the decode check (with or without a step)
    rejudged: bool = False  # found by the executor in the numbers of a result whose notebook said passed
    golden_token: int | None = None
    backend_token: int | None = None
    gap: float | None = None  # the golden's lead of its winner over the backend's choice
    rank: int | None = None  # 1-based rank of an exact mismatch
    count: int | None = None  # how many: the backend's top-n, logprobs returned, steps continued, repeat runs
    expected: int | None = None  # how many were asked: logprobs, decode steps, repeat launches
    golden_logprob: float | None = None
    backend_logprob: float | None = None
    probability_spread: float | None = None  # a repeat's spread in probability (value: in logprob)
    note: str | None = None  # a rule's own words for what no number holds (drift's statement, a first difference)
    said: str | None = None  # the line of an older record, as written (legacy reading): never rendered, never parsed

    @property
    def text(self) -> str:
        """The failure's line, as records, reports and the console show it."""
        if self.said is not None:
            return self.said
        return self.clause if self.prompt is None else f"{self.prompt}: {self.clause}"

    def __str__(self) -> str:
        return self.text

    @property
    def clause(self) -> str:
        """The line less its prompt: what failed, at which decode step."""
        if self.said is not None:
            return self.said.split(": ", 1)[-1] if self.prompt is not None else self.said
        where = f"decode step {self.step}: " if self.step is not None else "decode: " if self.decode else ""
        return f"{where}{_WORDS[self.kind](self)}{REJUDGED if self.rejudged else ''}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; fields left at their default are left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value is not False and f.name != "said":
                out[f.name] = value.value if isinstance(value, Kind) else value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Failure | None":
        """The failure a record holds; None for a kind this kit does not know (written by a newer kit): its line is
        then read as an older record's is."""
        raw = d.get("kind")
        if not isinstance(raw, str) or raw not in Kind._value2member_map_:
            return None
        kind = Kind(raw)
        names = {f.name for f in fields(cls)} - {"kind", "said"}
        given = {k: v for k, v in d.items() if k in names}
        if kind is Kind.OVER_BOUND and "value" in given and given["value"] is None:
            # strict JSON writes an infinity as null (kit.core.records.jsonio.json_safe), and an error over its bound
            # that is not a number is the infinite one of a prompt whose every golden token the backend left out
            given["value"] = math.inf
        return cls(kind, **given)


def texts(failures: Iterable[Failure]) -> list[str]:
    """The lines of ``failures``, as a record's ``failures`` holds them."""
    return [f.text for f in failures]


def divergence_why(golden_token: int, backend_token: int, gap: float | None, max_err: float, count: int,
                   inside: bool, step_failed: bool) -> str:
    """How two continuations diverged, as a decode score's ``why`` and a divergence failure's words say it."""
    if gap is None:
        return (f"outside a near-tie: golden token {golden_token}, backend token {backend_token}, which is not in the "
                f"golden top-{count}")
    if inside and step_failed:  # a tie only because the step is off by more than its bound
        return (f"at a step that fails its own tests: golden token {golden_token} leads backend token "
                f"{backend_token} by {gap:.4g}, within {WINNER_GAP_FACTOR:g} x a max error ({max_err:.4g}) that is "
                f"itself too large")
    relation = "<=" if inside else ">"
    return (f"{'inside' if inside else 'outside'} a near-tie: golden token {golden_token} leads backend token "
            f"{backend_token} by {gap:.4g} {relation} {WINNER_GAP_FACTOR:g} x max error {max_err:.4g}")


def _over_bound(f: Failure) -> str:
    line = f"max probability error {f.value:.4g} > bound {f.bound:g}"
    return line if f.rejudged else f"{line} (bucket {f.bucket})"


def _non_finite(f: Failure) -> str:
    if f.rejudged or f.backend_token is None:  # judged from a recorded error, no backend's answer at hand
        return f"no finite max probability error ({f.note})"
    return f"non-finite logprob {f.note} for token {f.backend_token} from the backend"


def _missing(f: Failure) -> str:
    top = "top list" if f.rejudged else f"top-{f.count}"
    return f"golden token {f.golden_token} is missing from the backend's {top}"


def _winner(f: Failure) -> str:
    if f.rejudged:
        return f"winner changed outside a near-tie: gap {f.gap:.4g} > {WINNER_GAP_FACTOR:g} x max error {f.value:.4g}"
    return (f"winner changed outside a near-tie: golden top token {f.golden_token} leads backend greedy token "
            f"{f.backend_token} by {f.gap:.4g} > {WINNER_GAP_FACTOR:g} x max error {f.value:.4g}")


def _not_exact(f: Failure) -> str:
    if f.rejudged:
        return f"not bit-exact against the exact golden (exact_match {f.note})"
    if f.rank is None:
        return f"exact golden needs {f.expected} logprobs, backend returned {f.count}"
    return (f"not bit-exact at rank {f.rank}: golden token {f.golden_token} logprob {f.golden_logprob!r}, "
            f"backend token {f.backend_token} logprob {f.backend_logprob!r}")


def _diverged(f: Failure) -> str:
    return "continuations diverged " + divergence_why(
        int(f.golden_token or 0), int(f.backend_token or 0), f.gap, float(f.value or 0.0), int(f.count or 0),
        f.kind is Kind.NEAR_TIE_DIVERGENCE, f.kind is Kind.NEAR_TIE_DIVERGENCE)


def _repeat(f: Failure) -> str:
    launches = int(f.expected or 1)
    return (f"repeats are not bit-exact across {f.count} runs in {launches} launch{'es' if launches > 1 else ''}: "
            f"max logprob difference {f.value:.3g}, max probability difference {f.probability_spread:.3g} ({f.note})")


_WORDS = {
    Kind.OVER_BOUND: _over_bound,
    Kind.WINNER_CHANGE: _winner,
    Kind.GREEDY_OUTSIDE_TOP: lambda f: f"backend greedy token {f.backend_token} is not in the golden top-{f.count}",
    Kind.MISSING_TOKEN: _missing,
    Kind.NON_FINITE: _non_finite,
    Kind.NOT_EXACT: _not_exact,
    Kind.DECODE_SHORT: lambda f: f"the backend continued {f.count} steps, the case asks for {f.expected}",
    Kind.DECODE_DIVERGENCE: _diverged,
    Kind.DECODE_OUTSIDE_TOP: _diverged,
    Kind.NEAR_TIE_DIVERGENCE: _diverged,
    Kind.DRIFT: lambda f: f"drift: {f.note}",
    Kind.REPEAT: _repeat,
    Kind.OTHER: lambda f: f.note or "failed",
}
