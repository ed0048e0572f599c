"""The search itself, with no git, build or kernel in it: which state to probe next, and what the
probes found.

The states of a bisect are numbered 0..n: state 0 is the base (the overlay's upstream without any
overlay commit), state k the base with the first k overlay commits. The tip (n) is probed first: it
must fail, and its failing prompts are the only ones later probes run. The base (0) next: it must
pass, or no overlay commit is to blame. Then a binary search between the last passing and the first
failing state, on the usual bisect assumption that once a commit breaks parity the later ones stay
broken. Every decision is a function of the probes recorded so far, so a bisect resumed from its
record continues exactly where it stopped, without probing a finished state again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Callable, Mapping

# The bisect record's verdict while it has no answer yet, and after a stop before one (never a search state).
INCOMPLETE = "incomplete"


class Answer(StrEnum):
    """What the probes so far establish: the search's answer (the bisect record's verdict), or that it goes on."""
    PASSES_AT_TIP = "passes-at-tip"
    FAILS_AT_BASE = "fails-at-base"
    FIRST_BAD = "first-bad-commit"
    UNFINISHED = "unfinished"


@dataclass(frozen=True)
class Conclusion:
    """What the probes so far establish: ``kind`` is one of the four ``Answer`` words; ``index`` is the first bad
    state (FIRST_BAD), the tip or base it is about (PASSES_AT_TIP, FAILS_AT_BASE), or the state to probe
    next (UNFINISHED)."""

    kind: Answer
    index: int


def next_state(n: int, bad: Mapping[int, bool]) -> Conclusion:
    """The state to probe next given ``bad`` (state -> whether it failed), or the search's answer."""
    if n < 1:
        raise ValueError(f"a bisect needs at least one overlay commit (states 0..{n})")
    if n not in bad:
        return Conclusion(Answer.UNFINISHED, n)
    if not bad[n]:
        return Conclusion(Answer.PASSES_AT_TIP, n)
    if 0 not in bad:
        return Conclusion(Answer.UNFINISHED, 0)
    if bad[0]:
        return Conclusion(Answer.FAILS_AT_BASE, 0)
    good, first_bad = 0, n
    while first_bad - good > 1:
        mid = (good + first_bad) // 2
        if mid not in bad:
            return Conclusion(Answer.UNFINISHED, mid)
        good, first_bad = (good, mid) if bad[mid] else (mid, first_bad)
    return Conclusion(Answer.FIRST_BAD, first_bad)


def search(n: int, is_bad: Callable[[int], bool],
           known: Mapping[int, bool] | None = None) -> tuple[Conclusion, list[int]]:
    """Run the whole search with ``is_bad`` as the oracle; returns the answer and the states probed,
    in order (those in ``known`` are not probed again)."""
    bad = dict(known or {})
    probed = []
    while (c := next_state(n, bad)).kind == Answer.UNFINISHED:
        probed.append(c.index)
        bad[c.index] = is_bad(c.index)
    return c, probed


def most_probes(n: int) -> int:
    """The probes a search over n overlay commits takes at most: tip, base, then ceil(log2 n)."""
    return 2 + max(0, (n - 1).bit_length())
