"""The control diagnosis on the verdicts a control cannot reach cheaply end to end: two cases, failures
equal within the measured noise, both releases broken on different cases, errored and missing cases.
Each case result is real: the case runner scores a stand-in engine (the golden's own logprobs, moved)
against the embedded semantic golden, repeats and noise floor included."""

from __future__ import annotations

import dataclasses

import pytest

from kit.case import runner
from kit.core.noise.calibration import load_record
from kit.core.verdict.diagnosis import ControlVerdict, diagnose
from kit.core.exitcodes import ExitCode
from kit.core.baselines.golden import load_golden
from kit.core.records.records import CaseResult, Observation, Status
from kit.core.records.results import RunView
from kit.core.records.spec import CaseSpec
from kit.descriptor.load import load_descriptor

FAILS = -0.5  # every logprob 0.5 lower: each prompt's error is 0.39 of its top probability, > 0.075 here
PASSES = 0.0


class Moved:
    """An engine that answers with the golden's logprobs moved by ``shift``, and by ``jitter`` more on each
    later call (a noisy engine's repeats), and by ``wiggle`` up on every other prompt and down on the rest (noise
    that moves each prompt its own way, not every prompt the same way)."""

    def __init__(self, golden_path: str, shift: float, jitter: float, wiggle: float = 0.0):
        self.tops = load_golden(golden_path).prompts
        self.shift, self.jitter, self.wiggle, self.calls = shift, jitter, wiggle, 0

    def observe(self, prompts, top_n):
        offset = self.shift + self.jitter * self.calls
        self.calls += 1
        return [Observation(p.id, tuple((t, lp + offset + self.wiggle * (-1) ** i) for t, lp in self.tops[p.id]),
                            p.n_tokens) for i, p in enumerate(prompts)]

    def release(self) -> dict:
        return {"backend": "moved", "shift": self.shift}

    def details(self) -> dict:
        return {}

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def calibrated(embedded):
    """The embedded hf-bf16 case as the descriptor has it: bounds and noise from its calibration record."""
    spec = load_descriptor(embedded.descriptor).case_specs(["hf-bf16"])[0]
    return dataclasses.replace(spec, buckets=[128], drift=False)  # 16 prompts


@pytest.fixture(scope="module")
def base(calibrated):
    """The same case with a hand-set bound: no noise but what its repeats measure."""
    return dataclasses.replace(calibrated, calibration=None, bucket_bounds={}, bound=0.075)


@pytest.fixture
def scored(base, monkeypatch):
    """Run a case (named ``name``) through the real runner and scoring, against an engine moved by ``shift``."""
    def run(name: str, shift: float, jitter: float = 0.0, repeats: int = 1, spec: CaseSpec | None = None,
            wiggle: float = 0.0) -> CaseResult:
        monkeypatch.setattr(runner, "open_backend", lambda spec: Moved(spec.golden_path, shift, jitter, wiggle))
        spec = dataclasses.replace(spec or base, name=name, repeats=repeats,
                                   repeat_prompts=["chat-sharegpt-00"] if repeats > 1 else None)
        return runner.run_case(spec)
    return run


def view(release: str, cases: list[str], *results: CaseResult) -> RunView:
    manifest = {"cases": cases, "release": {"name": release}}
    return RunView(run_dir=None, manifest=manifest, results={r.case: r for r in results}, sources={})


def test_a_two_case_control_judges_each_case(scored):
    a, b = scored("a", PASSES), scored("b", PASSES)
    assert (a.status, b.status) == (Status.PASSED, Status.PASSED)
    d = diagnose(view("current", ["a", "b"], a, b), view("candidate", ["a", "b"], a, scored("b", FAILS)))
    assert (d.verdict, d.exit_code) == (ControlVerdict.REGRESSION, ExitCode.FAILED)
    assert d.reason == ("the candidate `candidate` fails `b`, which today's pin `current` passes: "
                        "a regression in the candidate")
    assert [(r.case, r.control_status, r.candidate_status) for r in d.rows] == [
        ("a", Status.PASSED, Status.PASSED), ("b", Status.PASSED, Status.FAILED)]
    assert d.failure_messages == ["candidate (candidate): b failed"]
    d = diagnose(view("current", ["a", "b"], a, b), view("candidate", ["a", "b"], a, b))
    assert d.verdict == ControlVerdict.QUALIFIED
    assert d.reason == "the candidate `candidate` passes all 2 cases, and so does today's pin `current`"


def test_failures_equal_within_the_measured_noise_are_a_baseline_blocker(scored):
    control = scored("a", FAILS)
    # The candidate's engine moves each prompt's logprobs by 1e-4 up or down (every other prompt), and its
    # repeats of one prompt spread by 1e-2: the difference is inside the noise the candidate measured, and
    # no systematic shift.
    noisy = scored("a", FAILS, jitter=1e-2, repeats=2, wiggle=1e-4)
    assert control.status == noisy.status == Status.FAILED
    assert control.max_probability_error != noisy.max_probability_error
    noise = noisy.noise_floor
    assert noise > 1e-3
    d = diagnose(view("current", ["a"], control), view("candidate", ["a"], noisy))
    assert (d.verdict, d.exit_code) == ("baseline-blocker", ExitCode.BLOCKER)
    assert d.rows[0].same_metrics is True and d.rows[0].noise_floor == noise
    assert d.rows[0].paired.low < 0 < d.rows[0].paired.high
    assert d.reason == (f"today's pin `current` reproduces the candidate's failure of `a` with metrics equal within "
                        f"the measured noise ({noise:.3g}): the golden or the oracle is broken; repair it before "
                        "any candidate can qualify")
    # Intended since the paired test: every prompt 1e-4 further off, the same noise, is no longer the pin's
    # failure reproduced; the candidate is worse still on every prompt (tests/unit/core/test_diagnosis_paired.py
    # pins the wording).
    systematic = scored("a", FAILS - 1e-4, jitter=1e-2, repeats=2)
    d = diagnose(view("current", ["a"], control), view("candidate", ["a"], systematic))
    assert d.rows[0].same_metrics is True and d.rows[0].paired.worse
    assert (d.verdict, d.exit_code) == (ControlVerdict.BOTH_BROKEN, ExitCode.BLOCKER)
    assert d.reason.startswith("both releases fail `a`, and the candidate `candidate` is worse still: on `a` the "
                               "candidate's error is ")
    # The same difference where nothing measured a noise floor is a different failure.
    quiet = scored("a", FAILS - 1e-4)
    d = diagnose(view("current", ["a"], control), view("candidate", ["a"], quiet))
    assert d.verdict == ControlVerdict.BOTH_BROKEN and d.rows[0].same_metrics is False


def test_failures_equal_within_the_calibrated_noise_are_a_baseline_blocker(scored, calibrated):
    # No repeats on either side: the calibration record's measured noise is what "equal" allows.
    control = scored("a", FAILS, spec=calibrated)
    candidate = scored("a", FAILS, spec=calibrated, wiggle=1e-4)
    assert control.status == candidate.status == Status.FAILED and control.noise_floor is None
    noise = control.calibrated_noise
    assert noise == max(b["spread"] for b in load_record(calibrated.calibration["path"]).buckets.values())
    d = diagnose(view("current", ["a"], control), view("candidate", ["a"], candidate))
    assert (d.verdict, d.rows[0].noise_source, d.rows[0].noise_floor) == ("baseline-blocker", "calibration", noise)
    assert d.reason == (f"today's pin `current` reproduces the candidate's failure of `a` with metrics equal within "
                        f"the calibrated noise ({noise:.3g}): the golden or the oracle is broken; repair it before "
                        "any candidate can qualify")
    # The record's clean error is the unit the paired effect is also stated in.
    assert d.rows[0].paired.clean_error == max(b["largest"] for b in control.bound_source["buckets"].values())
    assert " x the clean error " in d.rows[0].paired_text


def test_both_broken_on_different_cases(scored):
    a_fails, a_passes = scored("a", FAILS), scored("a", PASSES)
    b_fails, b_passes = scored("b", FAILS), scored("b", PASSES)
    d = diagnose(view("current", ["a", "b"], a_fails, b_passes), view("candidate", ["a", "b"], a_passes, b_fails))
    assert (d.verdict, d.exit_code) == (ControlVerdict.BOTH_BROKEN, ExitCode.BLOCKER)
    assert (d.control_failures, d.candidate_failures) == (["a"], ["b"])
    assert d.reason == ("both releases fail, differently: today's pin `current` fails `a`, the candidate `candidate` "
                        "fails `b`; repair the baseline first, then judge the candidate")
    assert d.failure_messages == ["current (control): a failed", "candidate (candidate): b failed"]


def test_errored_and_missing_cases_are_incomplete_whatever_else_failed(scored, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    notebook = tmp_path / "current" / "cases" / "a.ipynb"
    errored = CaseResult(case="a", backend="hf", status=Status.ERROR, notebook=str(notebook),
                         error="cell 3 raised RuntimeError: engine died")
    b_fails = scored("b", FAILS)
    d = diagnose(view("current", ["a", "b"], errored, b_fails), view("candidate", ["a", "b"], scored("a", PASSES)))
    lines = ["current: case a errored; partial notebook current/cases/a.ipynb",
             "candidate: case b is missing (no result was recorded)"]
    assert (d.verdict, d.exit_code) == (ControlVerdict.INCOMPLETE, ExitCode.INCOMPLETE)
    assert d.incomplete == lines
    assert d.reason == f"the gate did not finish: {lines[0]}; {lines[1]}"
    assert [(r.case, r.control_status, r.candidate_status) for r in d.rows] == [("a", Status.ERROR, Status.PASSED),
                                                                                ("b", Status.FAILED, "missing")]
    assert d.failure_messages == [*lines, "current (control): b failed"]
    # An errored case without a notebook says so.
    errored = dataclasses.replace(errored, notebook=None)
    d = diagnose(view("current", ["a"], errored), view("candidate", ["a"], scored("a", PASSES)))
    assert d.incomplete == ["current: case a errored; no notebook was kept"]
