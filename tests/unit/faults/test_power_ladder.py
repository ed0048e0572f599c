"""The power command's ladder: where a family's search starts, found with as few float32 effects as it can,
effects kept in the run directory for every case measured on the same model, and magnitudes that the
checkpoint's precision rounds alike neither scored nor tried twice."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from kit.faults import ladder as ladder_module
from kit.faults import power
from kit.faults.checkpoint import load_checkpoint, write_checkpoint
from kit.faults.catalogue import BY_NAME


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """A fault whose float32 effect is its magnitude, counting each effect measured."""
    calls: list[str] = []
    monkeypatch.setattr(ladder_module, "faulted_copy", lambda fault, m, source, cache_dir: tmp_path / f"copy-{m!r}")
    monkeypatch.setattr(ladder_module, "model_digest", lambda folder: folder.name)  # every magnitude its own bytes

    def effect(folder, cases):
        calls.append(folder.name)
        return float(folder.name.removeprefix("copy-"))

    monkeypatch.setattr(ladder_module, "hf_float32_effect", effect)
    return calls


def ladder(tmp_path, source="model-a"):
    return ladder_module.Ladder(BY_NAME["logit_scale"], source, None, tmp_path / "faulted",
                                tmp_path / ladder_module.EFFECTS_FILE)


def first_reaching(magnitudes, noise):
    return next((i for i, m in enumerate(magnitudes) if m >= noise), len(magnitudes) - 1)


@pytest.mark.parametrize("noise", [0.0, 0.003, 0.01, 0.02, 0.049, 0.05, 0.5, 10.0])
def test_start_is_the_first_magnitude_whose_effect_reaches_the_noise(measured, tmp_path, noise):
    steps = ladder(tmp_path)
    start = steps.start(noise)
    assert start == first_reaching(steps.magnitudes, noise)
    # Bisection: never more than log2 of the ladder's length plus the two ends.
    assert len(measured) <= len(steps.magnitudes).bit_length() + 2


def test_decades_are_added_below_while_the_smallest_still_reaches_the_noise(measured, tmp_path):
    steps = ladder(tmp_path)
    smallest = steps.magnitudes[0]
    start = steps.start(smallest / 50)
    assert steps.magnitudes[start] == pytest.approx(smallest / 10)
    assert steps.magnitudes[0] == pytest.approx(smallest / 100)


def test_effects_are_kept_for_every_case_of_the_same_model_and_only_that_model(measured, tmp_path):
    first = ladder(tmp_path)
    start = first.start(0.02)
    assert measured
    kept = [json.loads(line) for line in (tmp_path / ladder_module.EFFECTS_FILE).read_text().splitlines()]
    assert {e["model"] for e in kept} == {"model-a"} and {e["fault"] for e in kept} == {"logit_scale"}

    measured.clear()
    assert ladder(tmp_path).start(0.02) == start
    assert measured == []  # another case on the same model: nothing measured again

    ladder(tmp_path, source="model-b").start(0.02)
    assert measured  # another model's effects are its own


def test_an_effect_on_some_buckets_is_kept_apart_from_the_whole_fixtures(measured, tmp_path):
    whole = ladder(tmp_path)
    whole.start(0.02)
    measured.clear()
    short = SimpleNamespace(float32=SimpleNamespace(buckets=[128], prompt_ids=None))
    kept_in = tmp_path / ladder_module.EFFECTS_FILE
    ladder_module.Ladder(BY_NAME["logit_scale"], "model-a", short, tmp_path / "faulted", kept_in).start(0.02)
    assert measured  # the 128 bucket's effects are measured, not taken from the whole fixture's
    kept = [json.loads(line) for line in (tmp_path / ladder_module.EFFECTS_FILE).read_text().splitlines()]
    assert {json.dumps(e["prompts"]) for e in kept} == {"null", json.dumps({"buckets": [128], "prompt_ids": None})}


BF16_STEP = 2.0 ** -7  # bfloat16's spacing just above 1.0: a norm weight of 1 can move by this and no less


@pytest.fixture
def rounded(monkeypatch, tmp_path):
    """norm_offset on norm weights of 1.0 stored in bfloat16: a copy's bytes are its magnitude rounded to the
    format's step (0.002 is 1.0 again, 0.005 and 0.01 are both 1.0078), counting the effects scored."""
    calls: list[float] = []
    monkeypatch.setattr(ladder_module, "faulted_copy", lambda fault, m, source, cache_dir: tmp_path / f"copy-{m!r}")
    monkeypatch.setattr(ladder_module, "model_digest",
                        lambda folder: str(round(float(folder.name.removeprefix("copy-")) / BF16_STEP)))

    def effect(folder, cases):
        calls.append(float(folder.name.removeprefix("copy-")))
        return round(calls[-1] / BF16_STEP) * BF16_STEP

    monkeypatch.setattr(ladder_module, "hf_float32_effect", effect)
    return calls


def norm_ladder(tmp_path):
    return ladder_module.Ladder(BY_NAME["norm_offset"], "model-a", None, tmp_path / "faulted",
                                tmp_path / ladder_module.EFFECTS_FILE)


def test_a_magnitude_the_checkpoint_rounds_away_is_no_fault_and_is_not_scored(rounded, tmp_path):
    steps = norm_ladder(tmp_path)
    assert steps.magnitudes[:3] == [0.002, 0.005, 0.01]
    assert steps.effect(0) == 0.0
    assert rounded == []  # the copy is the unfaulted model's bytes: nothing to score
    assert steps.twin(0, []) == ladder_module.SOURCE


def test_two_magnitudes_the_checkpoint_rounds_alike_share_one_effect(rounded, tmp_path):
    steps = norm_ladder(tmp_path)
    first = steps.effect(1)
    assert steps.effect(2) == first and rounded == [0.005]  # 0.01 is 0.005's copy: scored once
    assert steps.twin(2, [1]) == 0.005 and steps.twin(3, [1, 2]) is None
    kept = [json.loads(line) for line in (tmp_path / ladder_module.EFFECTS_FILE).read_text().splitlines()]
    assert [(e["magnitude"], e["effect"]) for e in kept] == [(0.005, first), (0.01, first)]


def test_the_search_does_not_try_a_magnitude_again_under_another_name(rounded, monkeypatch, tmp_path):
    tried: list[float] = []

    def trial(plan, family, fault, m, effect, folder, digest, spec, run_dir):
        tried.append(m)
        return SimpleNamespace(magnitude=m, samples=(None,) * 3)

    monkeypatch.setattr(power, "run_trial", trial)
    monkeypatch.setattr(power, "on_prompts_of", lambda effects, spec: None)
    # Caught from a real offset of 0.02 on: the copies of 0.005 and 0.01 (both 1.0078) are missed alike.
    monkeypatch.setattr(power, "caught_fraction", lambda t, reference: float(t.magnitude >= 0.02))
    spec = SimpleNamespace(name="case", model_path="model-a")
    trials = power.search_magnitudes(power.Climb(None, spec, {}, BF16_STEP / 2, None, tmp_path, steps_down=0),
                                     "normalization", BY_NAME["norm_offset"])
    assert tried == [0.005, 0.02]  # 0.01 is 0.005's model: its outcome is known, not paid for again
    assert [t.magnitude for t in trials] == [0.005, 0.02]


def test_real_bfloat16_copies_of_one_rounded_offset_have_the_same_bytes(embedded, tmp_path):
    """The same on a real checkpoint, written and hashed as a power run does."""
    tiny = load_checkpoint(embedded.model)
    tiny.dtypes = {name: "BF16" for name in tiny.dtypes}
    for name in tiny.norm_names():
        tiny.tensors[name] = np.ones_like(tiny.tensors[name])
    source = write_checkpoint(tiny, embedded.model, tmp_path / "bf16")
    steps = ladder_module.Ladder(BY_NAME["norm_offset"], str(source), None, tmp_path / "faulted")
    assert steps.twin(0, []) == ladder_module.SOURCE  # 1.002 is 1.0 in bfloat16
    assert steps.twin(2, [1]) == 0.005  # 1.005 and 1.01 are both 1.0078
    assert steps.twin(3, [1, 2]) is None  # 1.02 is 1.0234: another model
