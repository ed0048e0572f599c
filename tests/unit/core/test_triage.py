"""Every rule of kit.core.verdict.triage, from constructed case results: the class and the exact evidence. An error is
classed by its kind; the text rules are tried on records without one (written before kinds existed) only."""

from __future__ import annotations

import json

import pytest

from kit.core import outcomes
from kit.core.records.records import CaseResult
from kit.core.verdict.triage import RULES, Triage, TriageClass, classify

BOUND = "p1: max probability error 0.2 > bound 0.075 (bucket 8)"
WINNER = ("p2: winner changed outside a near-tie: golden top token 5 leads backend greedy token 9 by 0.031 > "
          "2 x max error 0.012")
DECODE_WINNER = ("p3: decode step 2: continuations diverged outside a near-tie: golden token 4 leads backend token 7 "
                 "by 0.05 > 2 x max error 0.02")


def error(error: str, case: str = "c", backend: str = "hf", log_tail: str | None = None,
          kind: str | None = None) -> CaseResult:
    return CaseResult(case, backend, "error", error=error, log_tail=log_tail, error_kind=kind)


def failed(*failures: str, drift: dict | None = None) -> CaseResult:
    return CaseResult("c", "hf", "failed", failures=list(failures), drift=drift)


def test_passed_and_no_baseline_cases_have_no_class():
    assert classify(CaseResult("c", "hf", "passed")) is None
    assert classify(CaseResult("c", "hf", "no-baseline", error="no golden for runtime x")) is None


def test_a_timeout_is_infrastructure():
    r = CaseResult("c", "hf", "timeout",
                   error="exceeded its timeout of 15 s; its kernel was killed; partial notebook n")
    assert classify(r) == Triage(TriageClass.INFRASTRUCTURE,
                                 "infrastructure: timeout: exceeded its timeout of 15 s; its kernel "
                                                 "was killed; partial notebook n")


@pytest.mark.parametrize("text, words", [
    ("the kernel died mid-case; partial notebook n", "the kernel died"),
    ("cell 3 raised VllmServerError: vllm serve was not healthy within 0.01 s (log x)", "the engine failed to start"),
    ("cell 3 raised VllmServerError: vllm serve exited with code 1 before it became healthy (log x)",
     "the engine failed to start"),
    ("cell 3 raised URLError: <urlopen error [Errno 111] Connection refused>", "the engine stopped answering"),
    ("cell 3 raised RemoteDisconnected: Remote end closed connection without response", "the engine stopped answering"),
    ("cell 3 raised OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of memory"),
    ("its Ray worker died (WorkerCrashedError) on attempt 2 of 2; partial notebook n", "lost worker (Ray)"),
    ("cannot start: GPU 1 is gone", "the executor could not start or record the case"),
    ("executor failed: OSError: no space left", "the executor could not start or record the case"),
    ("interrupted; its kernel was killed; partial notebook n", "the run was interrupted"),
])
def test_an_older_record_whose_error_names_the_job_is_infrastructure(text, words):
    assert classify(error(text)) == Triage(TriageClass.INFRASTRUCTURE, f"infrastructure: {words}: {text}")


@pytest.mark.parametrize("kind, words", [
    (outcomes.Outcome.ENGINE_DID_NOT_START, "the engine failed to start"),
    (outcomes.Outcome.ENGINE_STOPPED_ANSWERING, "the engine stopped answering"),
    (outcomes.Outcome.KERNEL_DIED, "the kernel died"),
    (outcomes.Outcome.TIMEOUT, "timeout"),
    (outcomes.Outcome.OUT_OF_MEMORY, "out of memory"),
    (outcomes.Outcome.WORKER_LOST, "lost worker"),
    (outcomes.Outcome.INTERRUPTED, "the run was interrupted"),
    (outcomes.Outcome.EXECUTOR, "the executor could not start or record the case"),
])
def test_an_error_of_a_kind_of_the_job_is_infrastructure_whatever_its_text(kind, words):
    text = "cell 3 raised SomethingElse: nothing any rule reads"
    assert classify(error(text, kind=kind)) == Triage(TriageClass.INFRASTRUCTURE, f"infrastructure: {words}: {text}")


def test_a_new_backend_whose_engine_did_not_start_is_infrastructure_in_its_own_words():
    text = "cell 3 raised EngineDidNotStart: llama-server: model load aborted (see llama.log)"
    assert classify(error(text, kind=outcomes.Outcome.ENGINE_DID_NOT_START)) == Triage(
        TriageClass.INFRASTRUCTURE, f"infrastructure: the engine failed to start: {text}")
    assert classify(error(text)).kind == TriageClass.CASE_ERROR  # the same words, without the kind: no rule knows them


def test_a_case_error_kind_is_never_read_as_text():
    text = "cell 3 raised ValueError: the prompt says: Connection refused, kernel died, out of memory"
    r = error(text, log_tail="torch.OutOfMemoryError: CUDA out of memory", kind=outcomes.Outcome.CASE_ERROR)
    assert classify(r) == Triage(TriageClass.CASE_ERROR, f"case error: {text}")


def test_a_case_error_kind_while_other_backends_errored_is_still_a_job_level_event():
    a = error("cell 3 raised KeyError: 'x'", "a", "hf", kind=outcomes.Outcome.CASE_ERROR)
    b = error("cell 2 raised OSError: y", "b", "vllm", kind=outcomes.Outcome.CASE_ERROR)
    assert classify(a, [a, b]).evidence.startswith("infrastructure: 2 cases of backends hf, vllm errored")


def test_a_refused_input_is_the_cases_own_however_many_errored_beside_it():
    # On a GPU of another model two bfloat16 cases refuse their records while a third runs out of memory: the
    # refusals are not a job-level event, not retried, and do not make the third one.
    text = ("cell 3 raised BadInput: case hf-bf16: calibration c.json measured noise on NVIDIA H200, this case runs "
            "on NVIDIA H100 80GB HBM3: calibrate here, or set accept_noise_changes = [\"hardware\"]")
    a = error(text, "hf-bf16", "hf", kind=outcomes.Outcome.BAD_INPUT)
    b = error(text.replace("hf-bf16", "jax-bf16"), "jax-bf16", "jax", kind=outcomes.Outcome.BAD_INPUT)
    c = error("cell 3 raised JaxRuntimeError: RESOURCE_EXHAUSTED", "jax-f32", "jax", kind=outcomes.Outcome.CASE_ERROR)
    run = [a, b, c, CaseResult("hf-f32", "hf", "passed")]
    assert classify(a, run) == Triage(TriageClass.CASE_ERROR, f"case error: {text}")
    assert classify(c, run) == Triage(TriageClass.CASE_ERROR,
                                      "case error: cell 3 raised JaxRuntimeError: RESOURCE_EXHAUSTED")
    # Two unexplained errors of two backends stay a job-level event beside a refusal.
    d = error("cell 2 raised OSError: y", "hf-f32", "hf", kind=outcomes.Outcome.CASE_ERROR)
    assert classify(c, [a, c, d]).evidence.startswith("infrastructure: 2 cases of backends hf, jax errored")


def test_a_kind_this_kit_does_not_know_is_read_as_an_older_record():
    assert classify(error("the kernel died mid-case", kind="from-a-newer-kit")) == Triage(
        TriageClass.INFRASTRUCTURE, "infrastructure: the kernel died: the kernel died mid-case")


def test_the_log_tail_speaks_when_the_error_names_nothing():
    r = error("cell 3 raised RuntimeError: engine core died", log_tail="loading\n[rank0] torch.OutOfMemoryError: "
                                                                       "CUDA out of memory\nbye")
    assert classify(r) == Triage(TriageClass.INFRASTRUCTURE, "infrastructure: out of memory: its log: [rank0] "
                                                 "torch.OutOfMemoryError: CUDA out of memory")


def test_an_unexplained_error_alone_is_the_cases_own():
    r = error("cell 3 raised KeyError: 'layers'")
    assert classify(r, {"c": r, "d": CaseResult("d", "vllm", "passed")}) == Triage(
        TriageClass.CASE_ERROR, "case error: cell 3 raised KeyError: 'layers'")


def test_errors_of_several_backends_in_one_run_are_infrastructure():
    a, b = error("cell 3 raised KeyError: 'x'", "a", "hf"), error("cell 2 raised OSError: y", "b", "vllm")
    run = {"a": a, "b": b, "c": CaseResult("c", "jax", "passed")}
    assert classify(a, run) == Triage(TriageClass.INFRASTRUCTURE,
                                      "infrastructure: 2 cases of backends hf, vllm errored in this "
                                                      "run together (a, b): a job-level event, not independent "
                                                      "regressions; this one: cell 3 raised KeyError: 'x'")


def test_errors_of_one_backend_are_not_correlated():
    a, b = error("cell 3 raised KeyError: 'x'", "a", "hf"), error("cell 3 raised KeyError: 'x'", "b", "hf")
    assert classify(a, [a, b]).kind == TriageClass.CASE_ERROR


def test_several_numeric_failures_never_become_infrastructure():
    a, b = failed(BOUND), CaseResult("b", "vllm", "failed", failures=[BOUND])
    assert classify(a, [a, b]).kind == TriageClass.NUMERIC


def test_winner_changes_alone_are_the_near_tie_family():
    r = failed(WINNER, DECODE_WINNER)
    assert classify(r) == Triage(TriageClass.NEAR_TIE,
                                 "near-tie: only winner changes between near-tied tokens (2 on p2, p3), no "
                                           "bound exceeded, no drift failure: the near-tie flake family; first: "
                                           + WINNER)


def test_a_winner_change_with_a_bound_exceeded_is_numeric():
    assert classify(failed(WINNER, BOUND)) == Triage(
        TriageClass.NUMERIC, f"numeric: winner changes (1), over the bound (1); first: {WINNER}")


def test_a_winner_change_with_drift_failed_is_numeric():
    r = failed(WINNER, drift={"passed": False})
    assert classify(r) == Triage(TriageClass.NUMERIC, f"numeric: winner changes (1), drift (1); first: {WINNER}")


@pytest.mark.parametrize("line, family", [
    (BOUND, "over the bound"),
    ("drift: mean max probability error over 64 prompts grew to 0.02; p = 0.001 from 8 clean samples", "drift"),
    ("p1: non-finite logprob nan for token 7 from the backend", "non-finite logprobs"),
    ("p1: golden token 12 is missing from the backend's top-64", "missing tokens"),
    ("p1: backend greedy token 99 is not in the golden top-20", "missing tokens"),
    ("p1: not bit-exact at rank 1: golden token 1 logprob -0.5, backend token 1 logprob -0.50001", "exact mismatch"),
    ("p1: decode step 2: continuations diverged outside a near-tie: golden token 4, backend token 9, which is not in "
     "the golden top-20", "missing tokens"),
])
def test_each_numeric_family_is_named(line, family):
    assert classify(failed(line)) == Triage(TriageClass.NUMERIC, f"numeric: {family} (1); first: {line}")


def test_a_failed_case_with_no_line_is_numeric_all_the_same():
    assert classify(failed()) == Triage(TriageClass.NUMERIC, "numeric: failed, with no failure line recorded")


def test_evidence_is_one_line_of_bounded_length():
    r = error("the kernel died mid-case\n" + "x" * 1000)
    found = classify(r)
    assert "\n" not in found.evidence and len(found.evidence) == 300 and found.evidence.endswith("…")


def test_the_table_names_each_class_and_round_trips():
    assert len(RULES) == 8 and all(why for why, _ in RULES)
    t = Triage(TriageClass.NEAR_TIE, "near-tie: x")
    assert t.to_dict() == {"class": "near-tie", "evidence": "near-tie: x"} and Triage.from_dict(t.to_dict()) == t
    assert set(TriageClass) == {TriageClass.INFRASTRUCTURE, TriageClass.NEAR_TIE, TriageClass.NUMERIC,
                                TriageClass.CASE_ERROR, TriageClass.BORROWED_BOUNDS}


def test_a_record_without_triage_still_loads():
    d = CaseResult("c", "hf", "failed").to_dict()
    del d["triage"], d["attempts"]
    r = CaseResult.from_dict(d)
    assert r.triage is None and r.attempts == []


def test_a_record_without_an_error_kind_still_loads_checks_and_triages_as_before(tmp_path):
    from kit.core.records.resultcheck import check_case_result
    from kit.core.records.results import load_case_result

    d = error("cell 3 raised VllmServerError: vllm serve was not healthy within 1 s (log x)").to_dict()
    del d["error_kind"]
    check_case_result(d, "c")
    path = tmp_path / "c.json"
    path.write_text(json.dumps(d))
    r = load_case_result(path)
    assert r.error_kind is None
    assert classify(r) == Triage(TriageClass.INFRASTRUCTURE,
                                 "infrastructure: the engine failed to start: cell 3 raised "
                                                 "VllmServerError: vllm serve was not healthy within 1 s (log x)")


def test_an_error_kind_round_trips_and_is_checked_as_a_string():
    from kit.core.records.recordcheck import Wrong
    from kit.core.records.resultcheck import check_case_result

    r = error("x", kind=outcomes.Outcome.KERNEL_DIED)
    assert CaseResult.from_dict(r.to_dict()).error_kind == outcomes.Outcome.KERNEL_DIED
    with pytest.raises(Wrong, match="error_kind"):
        check_case_result({**r.to_dict(), "error_kind": 3}, "c")


def test_every_kind_is_infrastructure_but_a_case_error_a_bad_input_and_no_baseline():
    assert {k.name for k in outcomes.KINDS.values() if not k.infrastructure} == {outcomes.Outcome.CASE_ERROR,
                                                                                outcomes.Outcome.BAD_INPUT,
                                                                                outcomes.Outcome.NO_BASELINE}
    assert all(k.words for k in outcomes.KINDS.values())
