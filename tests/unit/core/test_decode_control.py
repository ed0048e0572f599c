"""A control compares decode checks too: a candidate whose continuation diverges elsewhere than the pin's is
not the pin's failure reproduced, and a prompt that fails only its decode check is named as failing."""

from __future__ import annotations

from kit.core.verdict.diagnosis import compare_case, decode_equal
from kit.core.records.records import CaseResult, DecodeScore, PromptScore, Status


def _prompt(pid: str) -> PromptScore:
    return PromptScore(id=pid, bucket=128, n_tokens=40, passed=True, bound=0.075, max_probability_error=0.01,
                       top_probability_l1_error=0.02, kl_shared=0.0, first_rank_agreement=True, golden_top_token=5,
                       golden_top_probability=0.6, backend_top_token=5, backend_top_probability=0.59, winner_gap=0.0)


def _decode(pid: str, diverged_at: int | None, err: float, passed: bool = False) -> DecodeScore:
    return DecodeScore(pid, 128, 8, diverged_at or 8, passed, err, diverged_at=diverged_at,
                       golden_token=7 if diverged_at else None, backend_token=9 if diverged_at else None,
                       accepted=passed if diverged_at else None,
                       failures=[] if passed else [f"{pid}: decode step {diverged_at or 2}: max probability error"])


def _result(*decode: DecodeScore) -> CaseResult:
    return CaseResult(case="d", backend="hf", status=Status.FAILED, bound=0.075,
                      prompts=[_prompt(d.id) for d in decode], decode=list(decode))


def test_the_same_decode_failure_within_the_noise_is_the_same():
    pin = _result(_decode("a", None, 1.0, passed=True), _decode("b", 3, 0.9))
    candidate = _result(_decode("a", None, 1.0, passed=True), _decode("b", 3, 0.9 + 1e-4))
    row = compare_case("d", pin, candidate)
    assert row.same_metrics is False  # bit for bit without a measured noise
    assert decode_equal(pin.decode, candidate.decode, 1e-3)
    assert row.control_failed == row.candidate_failed == ["b"]  # every first token passed


def test_a_divergence_at_another_step_is_another_failure():
    pin, candidate = _result(_decode("b", 3, 0.9)), _result(_decode("b", 4, 0.9))
    assert not decode_equal(pin.decode, candidate.decode, 1.0)
    assert compare_case("d", pin, candidate).same_metrics is False
    assert compare_case("d", pin, _result(_decode("b", 3, 0.9))).same_metrics is True
