"""What a backend returns, held to being a next-token distribution before anything scores it.

Scoring compares the golden's tokens with what the backend returned, looked up by token id: a list
with a token twice (the later one wins the lookup), positive logprobs, probabilities summing to 40, an
order that is not descending, or ids no vocabulary holds would still score, and could score an error
of 0. So every observation is checked first, by the kit, whatever the backend, and one that no model
could have produced ends the case as the backend's fault, naming the prompt and what is wrong.

Non-finite logprobs are left to scoring, which fails the prompt naming them (kit.core.verdict.scoring): an
engine that computes NaN has broken parity, where these checks catch an answer that is malformed.
Stdlib only: it runs in every kernel.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Sequence

from kit.core.records.records import Continuation, Observation

# float32 log-softmax rounds the top logprob of a near-certain token to a few ulps above 0, and the
# exponentials of a full top list to a mass a little above 1; these are far beyond both, and far
# below any answer that is wrong.
LOGPROB_EPSILON = 1e-6
MASS_EPSILON = 1e-3


def top_list_problem(top: Sequence[tuple[int, float]], vocab_size: int | None) -> str | None:
    """What makes ``top`` (``(token_id, logprob)`` pairs, most likely first) no distribution's top list,
    or None: unique integer ids within the vocabulary, logprobs at most 0 and descending, and a total
    probability of at most 1, each within rounding."""
    if not top:
        return "an empty top list"
    seen: set[int] = set()
    for rank, (token, _) in enumerate(top, start=1):
        problem = _id_problem(token, f"token id {token!r} (rank {rank})", vocab_size)
        if problem:
            return problem
        if token in seen:
            return f"token id {token} is listed twice"
        seen.add(token)
    logprobs = [float(lp) for _, lp in top]
    if not all(map(math.isfinite, logprobs)):
        return None  # scoring fails the prompt, naming the token
    for rank, ((token, _), lp) in enumerate(zip(top, logprobs), start=1):
        if lp > LOGPROB_EPSILON:
            return f"token {token} (rank {rank}) has logprob {lp!r}; a logprob is at most 0"
        if rank > 1 and lp > logprobs[rank - 2]:
            return (f"logprobs are not in descending order: token {token} (rank {rank}) has {lp!r}, above rank "
                    f"{rank - 1}'s {logprobs[rank - 2]!r}")
    mass = math.fsum(math.exp(lp) for lp in logprobs)
    if mass > 1 + MASS_EPSILON:
        return f"its {len(top)} probabilities sum to {mass:.4g}; a distribution's probabilities sum to at most 1"
    return None


def _id_problem(token, what: str, vocab_size: int | None) -> str | None:
    if isinstance(token, bool) or not isinstance(token, Integral):
        return f"{what} is not an integer"
    value = int(token)
    if value < 0 or (vocab_size is not None and value >= vocab_size):
        holds = f"0..{vocab_size - 1}" if vocab_size is not None else "ids from 0"
        return f"{what} is outside the vocabulary ({holds})"
    return None


def observation_problem(obs: Observation, n_tokens: int, vocab_size: int | None) -> str | None:
    """What is wrong with one observation of a prompt of ``n_tokens`` tokens, or None."""
    if obs.n_tokens != n_tokens:
        return f"it reports {obs.n_tokens!r} prompt tokens; the prompt has {n_tokens}"
    return top_list_problem(obs.top_logprobs, vocab_size)


def continuation_problem(cont: Continuation, vocab_size: int | None) -> str | None:
    """What is wrong with one greedy continuation, or None: each step's chosen token an id of the
    vocabulary and its top list a distribution's."""
    for n, (token, top) in enumerate(cont.steps, start=1):
        problem = _id_problem(token, f"chosen token id {token!r}", vocab_size) or top_list_problem(top, vocab_size)
        if problem:
            return f"decode step {n}: {problem}"
    return None
