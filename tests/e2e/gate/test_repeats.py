"""Repeats, for every backend: the spread per prompt is the noise floor; exact_repeats is the rank sentinel.

The hf backend runs for real (it is the cheapest engine); the injected difference is one logprob
moved by a wrapper around it on its second observation, as a nondeterministic kernel would.
"""

from __future__ import annotations

import dataclasses

import pytest

from kit.backends.registry import open_backend
from kit.case import runner
from kit.core.errors import BadInput
from kit.core.records.records import Observation
from kit.core.verdict.scoring import repeat_spread
from kit.descriptor.load import load_descriptor
from support import parity_kit, write_descriptor

PROMPTS = ["chat-sharegpt-00", "tool-atlas-12"]


@pytest.fixture(scope="module")
def hf_spec(embedded):
    spec = load_descriptor(embedded.descriptor).case_specs(["checkpoint"])[0]
    # In this process torch is already loaded, too late for the AVX2 pin of the checkpoint case (a case kernel
    # gets it before torch starts): the float32 path on this host's own kernels, judged within float32 rounding.
    return dataclasses.replace(spec, prompt_ids=PROMPTS + ["math-gsm-03"], repeats=3, repeat_launches=2,
                               repeat_prompts=PROMPTS, options={**spec.options, "cpu_kernels": "native"},
                               golden_path=str(embedded.goldens["semantic"]), golden_kind="semantic", bound=1e-4,
                               runtime="")


class Jittery:
    """The real backend, with one logprob moved whenever a launch observes its prompts again (the scored
    pass may take several calls: the runner observes one bucket at a time)."""

    def __init__(self, inner, delta: float):
        self.inner, self.delta, self.seen = inner, delta, set()
        self.name = inner.name

    def observe(self, cases, top_n):
        out = self.inner.observe(cases, top_n)
        if not self.seen & {c.id for c in cases}:
            self.seen |= {c.id for c in cases}
            return out
        first = out[0]
        (t, lp), *rest = first.top_logprobs
        return [Observation(first.prompt_id, ((t, lp + self.delta), *rest), first.n_tokens), *out[1:]]

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_repeats_record_the_spread_per_prompt(hf_spec):
    result = runner.run_case(hf_spec)
    assert result.status == "passed", result.failures
    assert [r.id for r in result.repeat_spread] == PROMPTS
    for r in result.repeat_spread:
        # 3 in the first launch, 3 in the second: hf float32 on one host is bit-stable.
        assert (r.runs, r.launches, r.identical, r.max_logprob_spread) == (6, 2, True, 0.0)
    assert result.noise_floor == 0.0
    assert result.to_dict()["noise_floor"] == 0.0
    assert len(result.prompts) == 3  # repeats add no scored prompts


def test_a_difference_is_the_noise_floor_and_exact_repeats_fail_naming_case_and_size(hf_spec, monkeypatch):
    monkeypatch.setattr(runner, "open_backend", lambda spec: Jittery(open_backend(spec), 1e-3))
    loose = runner.run_case(dataclasses.replace(hf_spec, repeat_launches=1))
    assert loose.status == "passed", "without exact_repeats a spread is reported, not failed"
    first = loose.repeat_spread[0]
    assert first.identical is False and first.max_logprob_spread == pytest.approx(1e-3, rel=1e-6)
    assert 0 < first.max_probability_spread < 1e-3
    assert loose.repeat_spread[1].identical and loose.repeat_spread[1].max_logprob_spread == 0.0
    assert loose.noise_floor == first.max_probability_spread

    strict = runner.run_case(dataclasses.replace(hf_spec, repeat_launches=1, exact_repeats=True))
    assert strict.status == "failed"
    [message] = strict.failure_messages
    assert message.startswith("checkpoint: chat-sharegpt-00: repeats are not bit-exact across 3 runs in 1 launch: "
                              "max logprob difference 0.001, max probability difference ")
    assert "run 2 differs from run 1 at rank 1" in message


def test_spread_of_runs_that_return_other_tokens():
    a = Observation("p", ((1, -0.1), (2, -2.5)), 4)
    b = Observation("p", ((2, -0.2), (1, -0.3)), 4)
    r = repeat_spread("p", [a, a, b])
    assert not r.identical and r.runs == 3
    assert r.max_logprob_spread == pytest.approx(2.3)
    assert r.difference.startswith("run 3 differs from run 1 at rank 1: token 2")


def test_exact_repeats_without_repeats_is_refused_where_it_is_written(tmp_path, embedded):
    case = {**embedded.doc["cases"]["checkpoint"], "exact_repeats": True}
    desc = write_descriptor(tmp_path, embedded, cases={"c": case})
    with pytest.raises(BadInput) as err:
        load_descriptor(desc).case_specs()
    line = next(n for n, text in enumerate(desc.read_text().splitlines(), 1) if text.startswith("exact_repeats"))
    assert str(err.value) == (f"{desc}:{line}: cases.c.exact_repeats: nothing is repeated; "
                              "set `repeats` or `repeat_launches` above 1")


def test_a_repeat_prompt_the_case_does_not_score_is_refused(tmp_path, embedded):
    case = {**embedded.doc["cases"]["checkpoint"], "buckets": [128], "repeats": 2, "repeat_prompts": ["tool-atlas-12"]}
    desc = write_descriptor(tmp_path, embedded, cases={"c": case})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3 and not (tmp_path / "run").exists()
    line = next(n for n, text in enumerate(desc.read_text().splitlines(), 1) if text.startswith("repeat_prompts"))
    assert proc.stderr.strip() == (f"parity-kit: bad input: {desc}:{line}: case c: repeat prompt 'tool-atlas-12' "
                                   "is not among the prompts this case scores")
