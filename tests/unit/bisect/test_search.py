"""The bisect's search against a fake oracle: which states it probes, in which order, what it answers,
and that a search resumed from recorded probes never probes a state twice."""

from __future__ import annotations

import pytest

from kit.bisect.search import (Answer, Conclusion, most_probes,
                               next_state, search)


def oracle(first_bad: int):
    """States from ``first_bad`` on fail (the bisect's assumption); records every call."""
    calls = []

    def is_bad(i: int) -> bool:
        calls.append(i)
        return i >= first_bad

    return is_bad, calls


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 13, 64])
def test_every_first_bad_commit_is_named_within_the_probe_bound(n):
    for first_bad in range(1, n + 1):
        is_bad, calls = oracle(first_bad)
        answer, probed = search(n, is_bad)
        assert answer == Conclusion(Answer.FIRST_BAD, first_bad)
        assert probed == calls and probed[:2] == [n, 0]  # the tip first, then the base
        assert len(probed) == len(set(probed)) <= most_probes(n)


def test_probe_order_on_four_commits():
    # The toy fork's overlay: the third commit breaks the numbers.
    answer, probed = search(4, oracle(3)[0])
    assert answer == Conclusion(Answer.FIRST_BAD, 3) and probed == [4, 0, 2, 3]
    assert most_probes(4) == 4 and most_probes(1) == 2 and most_probes(64) == 8


def test_a_tip_that_passes_ends_the_search_at_once():
    answer, probed = search(5, lambda i: False)
    assert answer == Conclusion(Answer.PASSES_AT_TIP, 5) and probed == [5]


def test_a_base_that_fails_names_no_commit():
    answer, probed = search(5, lambda i: True)
    assert answer == Conclusion(Answer.FAILS_AT_BASE, 0) and probed == [5, 0]


def test_a_resumed_search_probes_only_what_is_left():
    is_bad, calls = oracle(6)
    full, probed = search(10, is_bad)
    for cut in range(len(probed) + 1):
        known = {i: i >= 6 for i in probed[:cut]}
        again, rest = search(10, oracle(6)[0], known)
        assert again == full and rest == probed[cut:]


def test_next_state_says_what_to_probe():
    assert next_state(4, {}) == Conclusion(Answer.UNFINISHED, 4)
    assert next_state(4, {4: True}) == Conclusion(Answer.UNFINISHED, 0)
    assert next_state(4, {4: True, 0: False}) == Conclusion(Answer.UNFINISHED, 2)
    assert next_state(4, {4: True, 0: False, 2: True}) == Conclusion(Answer.UNFINISHED, 1)
    assert next_state(4, {4: True, 0: False, 2: True, 1: False}) == Conclusion(Answer.FIRST_BAD, 2)
    with pytest.raises(ValueError, match="at least one overlay commit"):
        next_state(0, {})
