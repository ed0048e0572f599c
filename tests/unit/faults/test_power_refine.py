"""The power search's refinement: once a magnitude missed lies directly under the lowest caught, geometric
midpoints between them, each between the highest miss and the lowest catch so far, and the figure the record
then reports; and trials of an earlier record taken as measured."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kit.core.noise.power import FaultedSample, Trial, summarize
from kit.faults import ladder as ladder_module
from kit.faults import power
from kit.faults.catalogue import BY_NAME

CLEAN = 0.05
REFERENCE = {"bounds": {"256": 0.1}, "prompt_buckets": {"p": 256}, "buckets": {"256": {"largest": CLEAN}}}
SPEC = SimpleNamespace(name="case", model_path="model-a")


def samples(caught: bool) -> tuple[FaultedSample, ...]:
    """Three faulted samples, over the bucket's bound (caught) or well under it."""
    return tuple(FaultedSample("v", launch, {"p": 0.2 if caught else 0.01}, {}) for launch in (1, 2, 3))


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """rope_base whose float32 effect is its magnitude and which is caught from ``threshold`` on; records the
    magnitudes tried and the effects measured, in order."""
    state = SimpleNamespace(threshold=None, tried=[], effects=[])
    monkeypatch.setattr(ladder_module, "faulted_copy", lambda fault, m, source, cache_dir: tmp_path / f"copy-{m!r}")
    monkeypatch.setattr(ladder_module, "model_digest", lambda folder: folder.name)

    def effect(folder, cases):
        state.effects.append(float(folder.name.removeprefix("copy-")))
        return state.effects[-1]

    def trial(plan, family, fault, m, effect, folder, digest, spec, run_dir):
        state.tried.append(m)
        return Trial(family, fault.name, m, effect, samples(m >= state.threshold))

    monkeypatch.setattr(ladder_module, "hf_float32_effect", effect)
    monkeypatch.setattr(power, "run_trial", trial)
    monkeypatch.setattr(power, "on_prompts_of", lambda effects, spec: None)
    return state


def search(tmp_path, noise, known=(), **kw):
    return power.search_magnitudes(power.Climb(None, SPEC, REFERENCE, noise, None, tmp_path, **kw), "position",
                        BY_NAME["rope_base"], known)


def figure(trials):
    return summarize(trials, REFERENCE)["families"]["position"]


def test_two_midpoints_between_a_decade_below_and_the_first_catch(fake, tmp_path):
    # The H200's position family: 0.002 caught, the decade added below it (0.0002) missed.
    fake.threshold = 0.0007
    trials = search(tmp_path, 0.0015, steps_down=1, refine=2)
    # sqrt(0.0002 * 0.002) = 0.000632 is missed, so the next lies between it and 0.002: sqrt(0.000632 * 0.002).
    assert fake.tried == [0.002, 0.0002, 0.000632, 0.00112]
    assert [t.magnitude for t in trials] == [0.0002, 0.000632, 0.00112, 0.002]
    got = figure(trials)
    assert (got["magnitude"], got["below"], got["effect"]) == (0.00112, 0.000632, 0.00112)
    assert got["ratio"] == pytest.approx(0.00112 / CLEAN, abs=1e-4)
    # The midpoints' effects were measured like any magnitude's and kept in the run's effects file.
    kept = [json.loads(line) for line in (tmp_path / ladder_module.EFFECTS_FILE).read_text().splitlines()]
    assert {e["magnitude"] for e in kept} >= {0.000632, 0.00112}


def test_a_caught_midpoint_moves_the_catch_down(fake, tmp_path):
    # Started at 0.005 and walked up: 0.005 and 0.01 missed, 0.02 caught.
    fake.threshold = 0.012
    trials = search(tmp_path, 0.004, steps_down=1, refine=2)
    # sqrt(0.01 * 0.02) = 0.0141 is caught, so the next lies under it: sqrt(0.01 * 0.0141) = 0.0119, missed.
    assert fake.tried == [0.005, 0.01, 0.02, 0.0141, 0.0119]
    got = figure(trials)
    assert (got["magnitude"], got["below"]) == (0.0141, 0.0119)


def test_no_refinement_by_default_nor_without_a_miss_under_the_catch(fake, tmp_path):
    fake.threshold = 0.0007
    assert [t.magnitude for t in search(tmp_path, 0.0015)] == [0.0002, 0.002]
    assert fake.tried == [0.002, 0.0002]
    fake.tried.clear()
    # --steps-down 0: the first catch has nothing tried under it, so there is no gap to refine.
    assert [t.magnitude for t in search(tmp_path, 0.0015, steps_down=0, refine=2)] == [0.002]
    assert fake.tried == [0.002]


def test_earlier_trials_are_taken_as_measured_and_kept(fake, tmp_path):
    fake.threshold = 0.0007
    earlier = [Trial("position", "rope_base", 0.0002, 0.0002, samples(False)),
               Trial("position", "rope_base", 0.002, 0.002, samples(True)),
               Trial("attention", "attention_scale", 0.05, 0.05, samples(True))]  # another fault's: left alone
    trials = search(tmp_path, 0.0015, steps_down=1, refine=2, known=earlier)
    assert fake.tried == [0.000632, 0.00112]  # only the midpoints run
    # The earlier effects bracket the start (0.0002 under the noise, 0.002 over it): only the midpoints' measured.
    assert fake.effects == [0.000632, 0.00112]
    assert [t.magnitude for t in trials] == [0.0002, 0.000632, 0.00112, 0.002]
    assert trials[0] == earlier[0] and trials[-1] == earlier[1]
    assert figure(trials)["magnitude"] == 0.00112

    # Another case of the run, on the same model, whose earlier record caught 0.002 and tried nothing below: the
    # decade under it is tried, then one midpoint, every effect taken from the run's effects file.
    fake.tried.clear(), fake.effects.clear()
    fake.threshold = 0.0005
    other = search(tmp_path, 0.0015, steps_down=1, refine=1, known=[earlier[1]])
    assert fake.tried == [0.0002, 0.000632] and fake.effects == []
    got = figure(other)
    assert (got["magnitude"], got["below"]) == (0.000632, 0.0002)


def test_bracket_and_midpoint():
    # The highest miss under the catches from which every larger magnitude is caught: a lucky catch below a miss
    # does not count (as the power record judges it).
    assert power.bracket({0.05: True, 0.1: False, 0.2: True, 0.5: True}) == (0.1, 0.2)
    assert power.bracket({0.1: True, 0.2: True}) is None
    assert power.bracket({0.1: False, 0.2: False}) is None
    assert power.midpoint(0.0002, 0.002) == 0.000632
    assert power.midpoint(0.01, 0.0141) == 0.0119


def test_reuse_takes_a_record_of_the_case_against_the_record_it_uses(tmp_path):
    import tomllib

    from kit.core.records import paths
    from kit.core.errors import BadInput
    from kit.descriptor.load import load_descriptor
    from kit.descriptor.plan import resolve

    embedded = paths.EMBEDDED_DESCRIPTOR
    judged = resolve(load_descriptor(embedded), ["hf-bf16", "levanter"])
    record = embedded.parent / tomllib.loads(embedded.read_text())["cases"]["hf-bf16"]["power"][0]
    assert power.reused(judged, ["levanter"], [record]) == {}  # another case's record: passed over
    against = json.loads(record.read_text())["record_sha256"]
    if judged.cases["hf-bf16"].spec.calibration["sha256"] == against:
        assert power.reused(judged, ["hf-bf16"], [record])["hf-bf16"].record_sha256 == against
        with pytest.raises(BadInput, match="second record"):
            power.reused(judged, ["hf-bf16"], [record, record])
    else:  # this host uses another class's record: trials judged against another record are refused
        with pytest.raises(BadInput, match="measured against calibration record"):
            power.reused(judged, ["hf-bf16"], [record])


def test_earlier_trials_take_this_measurements_family_name(fake, tmp_path):
    fake.threshold = 0.0007
    earlier = [Trial("rope", "rope_base", 0.0002, 0.0002, samples(False)),
               Trial("rope", "rope_base", 0.002, 0.002, samples(True))]
    trials = search(tmp_path, 0.0015, steps_down=1, known=earlier)
    assert fake.tried == [] and {t.family for t in trials} == {"position"}
