"""The drift test: Student's t done right, clean runs pass, systematic shifts fail with their direction."""

from __future__ import annotations

import random

import pytest

from kit.core.noise.drift import MIN_RELATIVE_ERROR, drift_test, t_quantile_two_sided, t_two_sided_p
from kit.core.records.records import PromptScore

pytestmark = pytest.mark.unit

PROMPTS = [f"p{i:02d}" for i in range(64)]


@pytest.mark.parametrize("df,t", [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (7, 2.365), (30, 2.042)])
def test_t_distribution_matches_the_tables_at_five_percent(df, t):
    assert t_two_sided_p(t, df) == pytest.approx(0.05, abs=2e-4)
    assert t_quantile_two_sided(0.05, df) == pytest.approx(t, abs=2e-3)


# What every clean variant shares: bfloat16's rounding of the weights, per prompt (seeded once).
_COMMON = random.Random(0)
COMMON = {p: (abs(_COMMON.gauss(0, 0.004)) + 1e-4, _COMMON.gauss(-0.001, 0.004)) for p in PROMPTS}


def noise(seed: int, scale: float = 0.0015) -> tuple[dict, dict]:
    """One clean variant: the shared rounding plus its own, as the tiny model's bfloat16 variants show
    (each prompt moves by up to half its error, the mean over prompts by a few percent)."""
    rng = random.Random(seed)
    errors = {p: abs(COMMON[p][0] + rng.gauss(0, scale)) + 1e-4 for p in PROMPTS}
    shifts = {p: COMMON[p][1] + rng.gauss(0, scale) for p in PROMPTS}
    return errors, shifts


def reference(n: int = 6) -> dict:
    samples = [dict(zip(("errors", "shifts"), noise(seed))) for seed in range(1, n + 1)]
    return {"sha256": "c" * 64, "drift": {"alpha": 1e-3, "samples": samples}}


def scores(errors: dict, shifts: dict) -> list[PromptScore]:
    return [PromptScore(id=p, bucket=128, n_tokens=100, passed=True, bound=0.02, max_probability_error=errors[p],
                        top_probability_l1_error=errors[p], kl_shared=0.0, first_rank_agreement=True,
                        golden_top_token=1, golden_top_probability=0.5, backend_top_token=1,
                        backend_top_probability=0.5, winner_gap=0.0, top_probability_shift=shifts[p])
            for p in PROMPTS]


def test_fresh_clean_runs_pass():
    ref = reference()
    results = [drift_test(scores(*noise(seed)), ref) for seed in range(100, 140)]
    assert all(r.passed for r in results), [r.failures for r in results if not r.passed]
    assert all(0 < r.p_value <= 1 for r in results)


def test_errors_that_grow_on_every_prompt_fail_the_error_test():
    errors, shifts = noise(200)
    grown = {p: e * 1.4 for p, e in errors.items()}
    r = drift_test(scores(grown, shifts), reference())
    assert not r.passed
    [stat] = [s for s in r.statistics if s.failed]
    assert stat.test == "error" and stat.value > stat.high
    assert r.failures == [
        f"drift: mean max probability error over 64 prompts grew to {stat.value:.4g}, "
        f"{stat.value / stat.reference:.2f} x the calibrated {stat.reference:.4g} (clean runs stay below "
        f"{stat.high:.4g}); p = {stat.p_value:.2g} from 6 clean samples"]


@pytest.mark.parametrize("delta,way", [(0.003, "up: the distributions sharpened"),
                                       (-0.003, "down: the distributions flattened")])
def test_a_shift_of_the_top_probability_fails_with_its_direction(delta, way):
    errors, shifts = noise(300)
    moved = {p: s + delta for p, s in shifts.items()}
    r = drift_test(scores(errors, moved), reference())
    shift = next(s for s in r.statistics if s.test == "shift")
    assert shift.failed
    assert any(f.startswith(f"drift: golden top token's probability moved {way}; mean shift over 64 prompts")
               for f in r.failures)


def test_samples_that_agree_bit_for_bit_still_allow_the_minimum_margin():
    errors, shifts = noise(1)
    ref = {"sha256": "c" * 64, "drift": {"alpha": 1e-3, "samples": [{"errors": errors, "shifts": shifts}] * 3}}
    slightly = {p: e * (1 + MIN_RELATIVE_ERROR / 2) for p, e in errors.items()}
    assert drift_test(scores(slightly, shifts), ref).passed
    beyond = {p: e * (1 + 2 * MIN_RELATIVE_ERROR) for p, e in errors.items()}
    assert not drift_test(scores(beyond, shifts), ref).passed


def test_prompts_without_a_finite_error_are_left_out_of_the_means():
    errors, shifts = noise(400)
    errors["p00"] = float("nan")
    r = drift_test(scores(errors, shifts), reference())
    assert r.prompts == 63 and r.passed


def test_two_samples_take_their_range_widened_as_the_bound_rule_widens_a_spread():
    (e1, s1), (e2, s2) = noise(1), noise(2)
    ref = {"sha256": "c" * 64, "drift": {"alpha": 1e-3, "samples": [{"errors": e1, "shifts": s1},
                                                                    {"errors": e2, "shifts": s2}]}}
    assert drift_test(scores(*noise(3)), ref).passed
    r = drift_test(scores({p: e * 1.3 for p, e in e1.items()}, s1), ref)
    error = r.statistics[0]
    assert not r.passed and error.p_value is None and r.p_value is None
    assert r.failures[0].endswith("the range rule, no p-value from 2 clean samples")


def test_a_run_implausibly_exact_for_its_noise_class_fails_saying_so():
    # A bfloat16 engine whose error against the float32 golden is exactly 0: it computes in float32, or
    # replays the golden. Below the calibrated interval's lower end, which is well above zero here.
    ref = {**reference(), "noise_class": {"device": "cpu", "dtype": "bfloat16"}}
    errors, shifts = noise(500)
    r = drift_test(scores(dict.fromkeys(errors, 0.0), shifts), ref)
    error = r.statistics[0]
    assert not r.passed and error.failed and 0 < error.low < error.reference
    assert r.failures == [
        f"drift: mean max probability error over 64 prompts fell to 0, 0.00 x the calibrated {error.reference:.4g} "
        f"(clean runs stay above {error.low:.4g}): implausibly exact for its noise class (bfloat16 on cpu); an engine "
        "of that class does not reproduce the golden this closely: it is not computing in bfloat16, or it replays "
        f"the golden; p = {error.p_value:.2g} from 6 clean samples"]
    assert error.p_value < 1e-5
    third = drift_test(scores({p: e / 3 for p, e in errors.items()}, shifts), ref)  # far below, not only 0
    assert not third.passed and "fell to" in third.failures[0]


def test_a_float32_case_at_its_floor_and_a_two_sample_record_have_no_lower_side():
    # Levanter float32: mean errors near 1e-7, under the dtype's cross-host resolution; an exact run is ordinary.
    floor = {p: 1e-7 for p in PROMPTS}
    samples = [{"errors": {p: e * (1 + k / 50) for p, e in floor.items()}, "shifts": dict.fromkeys(PROMPTS, 0.0)}
               for k in range(4)]
    ref = {"sha256": "c" * 64, "resolution": 2e-6, "drift": {"alpha": 1e-3, "samples": samples}}
    zero = dict.fromkeys(PROMPTS, 0.0)
    r = drift_test(scores(zero, zero), ref)
    assert r.passed and r.statistics[0].low == float("-inf")
    (e1, s1), (e2, s2) = noise(1), noise(2)  # two samples give a range, not a rate
    ref = {"sha256": "c" * 64, "drift": {"alpha": 1e-3, "samples": [{"errors": e1, "shifts": s1},
                                                                    {"errors": e2, "shifts": s2}]}}
    assert drift_test(scores(dict.fromkeys(PROMPTS, 0.0), s1), ref).passed


def test_the_false_failure_rate_stays_alpha_split_over_four_sides():
    from kit.core.noise.drift import LOW_SHARE, interval, sample_means

    ref = reference()
    means = sample_means(ref["drift"]["samples"], PROMPTS)
    r = drift_test(scores(*noise(600)), ref)
    error, shift = r.statistics
    minimum = MIN_RELATIVE_ERROR * error.reference
    assert error.high == interval(means["error"], 1e-3 / 2 * (1 - LOW_SHARE), False, minimum)[1]
    assert error.low == interval(means["error"], 1e-3 / 2 * LOW_SHARE, True, minimum)[0]
    assert (shift.low, shift.high) == interval(means["shift"], 1e-3 / 4, True, 0.1 * error.reference)


def test_a_records_depth_is_read_from_the_drift_test_it_ran_and_a_thin_one_says_so():
    from kit.core.noise.drift import record_depth
    from kit.core.noise.rule import SETTLES_FROM

    errors, shifts = noise(99)
    scores = [PromptScore(id=p, bucket=128, n_tokens=10, passed=True, bound=0.1, max_probability_error=errors[p],
                          top_probability_l1_error=errors[p], kl_shared=0.0, first_rank_agreement=True,
                          golden_top_token=1, golden_top_probability=0.5, backend_top_token=1,
                          backend_top_probability=0.5, winner_gap=0.0, top_probability_shift=shifts[p])
              for p in PROMPTS]
    thin = record_depth(drift_test(scores, reference(3)).to_dict())
    deep = record_depth(drift_test(scores, reference(SETTLES_FROM)).to_dict())
    assert (thin.samples, thin.dof, deep.samples, deep.dof) == (3, 2, SETTLES_FROM, SETTLES_FROM - 1)
    # More samples: a narrower interval, so a smaller rise of the mean error fails the test.
    assert 0 < deep.detects_rise < thin.detects_rise
    assert deep.thin("c", "d.toml") is None
    assert thin.thin("c", "d.toml") == (
        f"c: its record holds 3 distinct samples, and bounds settle from {SETTLES_FROM}: its bounds are wider and its "
        f"drift test weaker than its noise needs ({thin.text()}); `parity-kit baseline deepen d.toml --case c "
        "--reason \"...\"` adds clean launches")
    two = record_depth(drift_test(scores, reference(2)).to_dict())
    assert two.dof is None and "the range rule (two samples)" in two.text()
    assert record_depth(None) is None
