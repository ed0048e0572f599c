"""Every observation is held to being a next-token distribution before it is scored, by the kit, whatever
the backend: a duplicate token id (the later one would win the lookup), a positive logprob, a mass of 40, an
order that is not descending, an id no vocabulary holds, or another prompt length would otherwise score, with
an error of 0. Such an answer is the backend's fault: the case ends as an error naming the prompt."""

from __future__ import annotations

import dataclasses

import pytest

from kit.case import runner
from kit.case.runner import InvalidObservation
from kit.core.baselines.golden import load_golden
from kit.core.records.observations import continuation_problem, observation_problem
from kit.core.records.records import Continuation, Observation
from kit.descriptor.load import load_descriptor

VOCAB = 768  # the tiny model's
GOOD = ((7, -0.2), (3, -2.5), (9, -4.0))


@pytest.mark.parametrize("top, n_tokens, problem", [
    (((7, -0.1), (3, -2.5), (7, -0.05)), 130, "token id 7 is listed twice"),
    (((7, 0.5), (3, -2.5)), 130, "token 7 (rank 1) has logprob 0.5; a logprob is at most 0"),
    (tuple((t, 0.0) for t in range(40)), 130,
     "its 40 probabilities sum to 40; a distribution's probabilities sum to at most 1"),
    (((7, -2.5), (3, -0.1)), 130,
     "logprobs are not in descending order: token 3 (rank 2) has -0.1, above rank 1's -2.5"),
    (((10**9, -0.1), (3, -2.5)), 130, "token id 1000000000 (rank 1) is outside the vocabulary (0..767)"),
    (((7, -0.1), (-5, -2.5)), 130, "token id -5 (rank 2) is outside the vocabulary (0..767)"),
    (((7, -0.1), (768, -2.5)), 130, "token id 768 (rank 2) is outside the vocabulary (0..767)"),
    ((), 130, "an empty top list"),
    (GOOD, 3, "it reports 130 prompt tokens; the prompt has 3"),
])
def test_what_no_distribution_could_be_is_named(top, n_tokens, problem):
    assert observation_problem(Observation("p", top, 130), n_tokens, VOCAB) == problem


@pytest.mark.parametrize("top", [
    GOOD,
    ((7, 4e-7), (3, -20.0)),  # float32 rounding of a near-certain token
    ((7, -0.6931), (3, -0.6931)),  # a tie, and a mass of 1.00003: rounding
    ((7, -0.1), (3, float("nan"))),  # left to scoring, which fails the prompt naming the token
])
def test_a_distribution_within_rounding_passes(top):
    assert observation_problem(Observation("p", top, 130), 130, VOCAB) is None


def test_a_continuation_is_held_to_the_same_and_its_chosen_tokens_to_the_vocabulary():
    steps = ((7, GOOD), (900, GOOD))
    assert continuation_problem(Continuation("p", steps), VOCAB) == (
        "decode step 2: chosen token id 900 is outside the vocabulary (0..767)")
    steps = ((7, GOOD), (3, ((3, -0.1), (3, -0.2))))
    assert continuation_problem(Continuation("p", steps), VOCAB) == "decode step 2: token id 3 is listed twice"
    assert continuation_problem(Continuation("p", ((7, GOOD), (3, GOOD))), VOCAB) is None


class Replay:
    """An engine that answers with the golden's own top lists, one prompt's changed by ``edit``: a
    perfect engine but for that one answer."""

    def __init__(self, golden_path: str, prompt: str, edit):
        self.tops = load_golden(golden_path).prompts
        self.prompt, self.edit = prompt, edit

    def observe(self, prompts, top_n):
        return [Observation(p.id, self.edit(self.tops[p.id]) if p.id == self.prompt else self.tops[p.id], p.n_tokens)
                for p in prompts]

    def release(self) -> dict:
        return {"backend": "replay"}

    def details(self) -> dict:
        return {}

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def spec(embedded):
    spec = load_descriptor(embedded.descriptor).case_specs(["hf-bf16"])[0]
    return dataclasses.replace(spec, buckets=[128], drift=False)  # 16 prompts


def run(spec, monkeypatch, edit, prompt="chat-sharegpt-00"):
    monkeypatch.setattr(runner, "open_backend", lambda s: Replay(s.golden_path, prompt, edit))
    return runner.run_case(spec)


@pytest.mark.parametrize("edit, problem", [
    (lambda top: tuple((t, lp + 3.7) for t, lp in top), "(rank 1) has logprob"),
    (lambda top: (*top[:-1], (10**9, top[-1][1])), "token id 1000000000 (rank 25) is outside the vocabulary"),
])
def test_an_invalid_answer_ends_the_case_naming_the_prompt_instead_of_scoring(spec, monkeypatch, edit, problem):
    with pytest.raises(InvalidObservation) as err:
        run(spec, monkeypatch, edit)
    message = str(err.value)
    assert message.startswith("backend hf returned an invalid distribution for prompt chat-sharegpt-00: ")
    assert problem in message


def test_the_duplicate_that_would_have_scored_zero_error_is_refused(spec, monkeypatch):
    top = load_golden(spec.golden_path).prompts["chat-sharegpt-00"]
    token = top[0][0]
    with pytest.raises(InvalidObservation) as err:
        run(spec, monkeypatch, lambda t: ((token, -0.001), *t[1:], t[0]))
    assert str(err.value) == (f"backend hf returned an invalid distribution for prompt chat-sharegpt-00: "
                              f"token id {token} is listed twice")


def test_a_prompt_length_other_than_the_prompts_is_refused(spec, monkeypatch):
    class Short(Replay):
        def observe(self, prompts, top_n):
            return [dataclasses.replace(o, n_tokens=o.n_tokens - 1) if o.prompt_id == self.prompt else o
                    for o in super().observe(prompts, top_n)]

    monkeypatch.setattr(runner, "open_backend", lambda s: Short(s.golden_path, "chat-sharegpt-01", lambda t: t))
    wrong = (r"^backend hf returned an invalid distribution for prompt "
             r"chat-sharegpt-01: it reports \d+ prompt tokens; the prompt has \d+$")
    with pytest.raises(InvalidObservation, match=wrong):
        runner.run_case(spec)


def test_the_golden_replayed_as_it_is_passes(spec, monkeypatch):
    assert run(spec, monkeypatch, lambda top: top).status == "passed"
