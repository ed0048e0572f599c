"""The control diagnosis with the paired comparison: where pin and candidate fail the same case with metrics
equal within the noise, a candidate whose error is above the pin's on every prompt is worse still (both broken,
exit 4), not the pin's failure reproduced; the same failure stays a baseline blocker. Every case's line states
the effect and its interval. Synthetic case results: the numbers are chosen, not scored."""

from __future__ import annotations

from kit.core.verdict.diagnosis import ControlVerdict, Diagnosis, diagnose
from kit.core.exitcodes import ExitCode
from kit.core.records.records import CaseResult, PromptScore, Status
from kit.core.records.results import RunView

PIN_ERRORS = [0.30, 0.32, 0.35, 0.28, 0.40, 0.31, 0.33, 0.36]
# The calibration record's figures as a calibrated case carries them: the noise "equal" allows (0.01) and the
# clean error (largest clean error, 0.02) the paired effect is also stated in.
CALIBRATED = {"kind": "calibrated", "record": "ab" * 32, "rule": "largest-plus-margin/3", "noise": 0.01,
              "buckets": {"128": {"largest": 0.02, "spread": 0.01, "bound": 0.075}}}


def prompt(pid: str, err: float, bound: float = 0.075, flipped_gap: float | None = None) -> PromptScore:
    failed = err > bound
    flipped = flipped_gap is not None
    return PromptScore(id=pid, bucket=128, n_tokens=40, passed=not failed, bound=bound, max_probability_error=err,
                       top_probability_l1_error=err, kl_shared=0.0, first_rank_agreement=not flipped,
                       golden_top_token=5, golden_top_probability=0.6, backend_top_token=7 if flipped else 5,
                       backend_top_probability=0.5, winner_gap=flipped_gap if flipped else 0.0,
                       failures=[f"{pid}: max probability error {err:.4g} > bound {bound:g} (bucket 128)"] if failed
                       else [])


def case(name: str, errors: list[float], **kw) -> CaseResult:
    prompts = [prompt(f"p-{i}", e) for i, e in enumerate(errors)]
    failures = [line for p in prompts for line in p.failures]
    return CaseResult(case=name, backend="hf", status=Status.FAILED if failures else Status.PASSED, bound=0.075,
                      golden_kind="semantic", bound_source=dict(CALIBRATED), prompts=prompts, failures=failures, **kw)


def view(release: str, *results: CaseResult) -> RunView:
    manifest = {"cases": [r.case for r in results], "release": {"name": release}}
    return RunView(run_dir=None, manifest=manifest, results={r.case: r for r in results}, sources={})


def test_a_candidate_worse_on_every_prompt_than_a_failing_pin_is_worse_still():
    # Every prompt 0.001 to 0.0014 further off: each inside the calibrated noise (0.01), all the same way.
    # Mean 0.001175, sd 0.000167, t(0.975, 7) 2.365: 0.00104 .. 0.00131; all 8 signs positive: p = 2 / 2^8.
    shifted = [e + 0.001 + 0.0002 * (i % 3) for i, e in enumerate(PIN_ERRORS)]
    d = diagnose(view("current", case("a", PIN_ERRORS)), view("candidate", case("a", shifted)))
    row = d.rows[0]
    assert row.same_metrics is True  # what alone made it the pin's blocker before the paired test
    assert row.paired.worse and row.paired.paired == 8
    assert (d.verdict, d.exit_code) == (ControlVerdict.BOTH_BROKEN, ExitCode.BLOCKER)
    effect = ("candidate's error is 0.00117 above the pin's (95 % interval 0.00104 .. 0.00131, +0.059 x the clean "
              "error 0.02, p = 0.0078, 8 prompts paired)")
    assert row.paired_text == effect
    assert d.reason == (f"both releases fail `a`, and the candidate `candidate` is worse still: on `a` the {effect}; "
                        "repair the baseline first, then judge the candidate")
    assert d.case_lines == [f"`a` (failed in the pin, failed in the candidate): {effect}"]
    assert d.worse_still == [row]


def test_the_same_failure_is_still_the_pins_blocker_and_says_its_effect():
    # Each prompt moved 0.002 up or down, every other one: inside the noise, and no way more than the other.
    moved = [e + 0.002 * (-1) ** i for i, e in enumerate(PIN_ERRORS)]
    d = diagnose(view("current", case("a", PIN_ERRORS)), view("candidate", case("a", moved)))
    row = d.rows[0]
    assert row.same_metrics is True and not row.paired.worse and row.paired.low < 0 < row.paired.high
    assert (d.verdict, d.exit_code) == (ControlVerdict.BLOCKER, ExitCode.BLOCKER)
    assert d.reason == ("today's pin `current` reproduces the candidate's failure of `a` with metrics equal within "
                        "the calibrated noise (0.01): the golden or the oracle is broken; repair it before any "
                        "candidate can qualify")
    assert d.case_lines == ["`a` (failed in the pin, failed in the candidate): candidate's error is the pin's on "
                            "average (95 % interval -0.0018 .. 0.0018, +0 x the clean error 0.02, p = 1, "
                            "8 prompts paired)"]


def test_a_candidate_better_than_a_failing_pin_is_the_same_failure():
    better = [e - 0.003 for e in PIN_ERRORS]
    d = diagnose(view("current", case("a", PIN_ERRORS)), view("candidate", case("a", better)))
    assert d.verdict == ControlVerdict.BLOCKER and d.rows[0].paired.high < 0
    assert d.case_lines[0].startswith("`a` (failed in the pin, failed in the candidate): candidate's error is "
                                      "0.0030 below the pin's")


def test_near_ties_are_left_out_of_the_diagnosis_and_counted():
    pin, candidate = case("a", PIN_ERRORS), case("a", [e + 0.001 for e in PIN_ERRORS])
    candidate.prompts[3] = prompt("p-3", PIN_ERRORS[3] + 0.001, flipped_gap=0.1)  # <= 2 x 0.281: a near-tie
    d = diagnose(view("current", pin), view("candidate", candidate))
    assert (d.rows[0].paired.paired, d.rows[0].paired.near_ties) == (7, 1)
    assert d.rows[0].paired_text.endswith("7 prompts paired, 1 near-tie left out)")


def test_every_verdict_states_each_cases_effect():
    # A regression: the pin passes, the candidate fails; its line carries the effect too.
    passing = [0.01 + 0.001 * i for i in range(6)]
    d = diagnose(view("current", case("b", passing)), view("candidate", case("b", [e + 0.2 for e in passing])))
    assert d.verdict == ControlVerdict.REGRESSION
    assert d.case_lines == ["`b` (passed in the pin, failed in the candidate): candidate's error is 0.20 above the "
                            "pin's (95 % interval 0.20 .. 0.20, +10 x the clean error 0.02, p = 0.031, "
                            "6 prompts paired)"]
    # Too few prompts, and a case one side has no result for.
    few = diagnose(view("current", case("c", [0.3, 0.4])), view("candidate", case("c", [0.31, 0.41]), case("d", [])))
    assert few.case_lines == ["`c` (failed in the pin, failed in the candidate): too few prompts to pair "
                              "(2 prompts paired)",
                              "`d` (missing in the pin, passed in the candidate): not paired: a side has no result"]


def test_the_paired_effect_survives_the_diagnosis_record():
    shifted = [e + 0.001 + 0.0002 * (i % 3) for i, e in enumerate(PIN_ERRORS)]
    d = diagnose(view("current", case("a", PIN_ERRORS)), view("candidate", case("a", shifted)))
    doc = d.to_dict()
    assert doc["rows"][0]["paired"]["low"] > 0 and doc["rows"][0]["paired_text"] == d.rows[0].paired_text
    back = Diagnosis.from_dict(doc)
    assert back.rows[0].paired == d.rows[0].paired and back.case_lines == d.case_lines
    # A diagnosis written before the paired test has none, and reads.
    del doc["rows"][0]["paired"]
    assert Diagnosis.from_dict(doc).rows[0].paired_text == "not paired: a side scored no prompts"


def test_worse_still_where_the_failures_also_differ_names_both():
    shifted = [e + 0.001 + 0.0002 * (i % 3) for i, e in enumerate(PIN_ERRORS)]
    passing = [0.01, 0.02, 0.03]
    d = diagnose(view("current", case("a", PIN_ERRORS), case("b", passing)),
                 view("candidate", case("a", shifted), case("b", [0.2, 0.3, 0.4])))
    assert (d.verdict, d.exit_code) == (ControlVerdict.BOTH_BROKEN, ExitCode.BLOCKER) and d.worse_still == [d.rows[0]]
    assert d.reason == ("both releases fail, differently: today's pin `current` fails `a`, the candidate `candidate` "
                        f"fails `a`, `b`, and the candidate `candidate` is worse still: on `a` the "
                        f"{d.rows[0].paired_text}; repair the baseline first, then judge the candidate")
