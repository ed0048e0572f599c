"""The power command's ladder: where a family's search starts, found with as few float32 effects as it can,
and effects kept in the run directory for every case measured on the same model."""

from __future__ import annotations

import json

import pytest

from kit.faults import power
from kit.faults.catalogue import BY_NAME


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """A fault whose float32 effect is its magnitude, counting each effect measured."""
    calls: list[str] = []
    monkeypatch.setattr(power, "faulted_copy", lambda fault, m, source, cache_dir: tmp_path / f"copy-{m!r}")

    def effect(folder, cases):
        calls.append(folder.name)
        return float(folder.name.removeprefix("copy-"))

    monkeypatch.setattr(power, "hf_float32_effect", effect)
    return calls


def ladder(tmp_path, source="model-a"):
    return power.Ladder(BY_NAME["logit_scale"], source, None, tmp_path / "faulted", tmp_path / power.EFFECTS_FILE)


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
    kept = [json.loads(line) for line in (tmp_path / power.EFFECTS_FILE).read_text().splitlines()]
    assert {e["model"] for e in kept} == {"model-a"} and {e["fault"] for e in kept} == {"logit_scale"}

    measured.clear()
    assert ladder(tmp_path).start(0.02) == start
    assert measured == []  # another case on the same model: nothing measured again

    ladder(tmp_path, source="model-b").start(0.02)
    assert measured  # another model's effects are its own


def test_an_effect_on_some_buckets_is_kept_apart_from_the_whole_fixtures(measured, tmp_path):
    from types import SimpleNamespace

    whole = ladder(tmp_path)
    whole.start(0.02)
    measured.clear()
    short = SimpleNamespace(float32=SimpleNamespace(buckets=[128], prompt_ids=None))
    kept_in = tmp_path / power.EFFECTS_FILE
    power.Ladder(BY_NAME["logit_scale"], "model-a", short, tmp_path / "faulted", kept_in).start(0.02)
    assert measured  # the 128 bucket's effects are measured, not taken from the whole fixture's
    kept = [json.loads(line) for line in (tmp_path / power.EFFECTS_FILE).read_text().splitlines()]
    assert {json.dumps(e["prompts"]) for e in kept} == {"null", json.dumps({"buckets": [128], "prompt_ids": None})}
