"""The executor judges every case result again from its own numbers under the case's bounds, whatever
notebook wrote it: a trusted custom notebook (or a broken one) that says passed over a prompt whose recorded
error is above its bound is failed, saying the verdict disagreed with its numbers. No kernels: records only."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from kit.core.verdict.coverage import Expected
from kit.core.records.fixture import load_fixture
from kit.core.records.records import CaseResult, PromptScore, Status
from kit.core.records.results import gate_verdict, load_case_result, save_case_result, status_counts
from kit.core.records.spec import CaseSpec
from kit.gate import executor, report

DIGEST = "a" * 64
SPEC = SimpleNamespace(name="custom", backend="hf")  # what checked() names in an error


def score(pid: str, err: float, bound: float = 0.015, bucket: int = 128, **kw) -> PromptScore:
    return PromptScore(id=pid, bucket=bucket, n_tokens=100, passed=True, bound=bound, max_probability_error=err,
                       top_probability_l1_error=err, kl_shared=0.0, first_rank_agreement=True, golden_top_token=1,
                       golden_top_probability=0.9, backend_top_token=1, backend_top_probability=0.9,
                       **{"winner_gap": 0.0, **kw})


def passed(*prompts: PromptScore, case: str = "custom") -> CaseResult:
    return CaseResult(case=case, backend="hf", status=Status.PASSED, golden_kind="semantic", bound=0.015,
                      inputs_digest=DIGEST, prompts=list(prompts))


def asked(bounds: dict, exact: bool = False) -> Expected:
    return Expected("custom", "hf", tuple(bounds), DIGEST, bounds, exact)


def test_a_passed_verdict_over_a_prompt_beyond_its_bound_is_failed_saying_the_numbers_disagree(tmp_path):
    result = passed(score("chat-00", 0.0217), score("chat-01", 0.004))
    out = executor.judged_again(result, SPEC, asked({"chat-00": 0.015, "chat-01": 0.015}))
    line = ("chat-00: max probability error 0.0217 > bound 0.015; the notebook said passed: its verdict disagreed "
            "with its own numbers")
    assert out.status == Status.FAILED and out.failures == [line]
    assert [(p.id, p.passed) for p in out.prompts] == [("chat-00", False), ("chat-01", True)]
    assert gate_verdict(["custom"], {"custom": out}) == "failed"
    manifest = {"name": "t", "cases": ["custom"], "fixture_sha256": "f" * 64, "model_digest": "m" * 64,
                "goldens": {}, "kit_version": "0"}
    evidence = report.evidence_markdown(manifest, "failed", status_counts(["custom"], {"custom": out}), 1.0,
                                        {"custom": out})
    assert ("- `custom` (hf): **failed** on 1 of 2 prompts; worst `chat-00` (bucket 128): max probability error "
            "0.0217 > bound 0.015; the notebook said passed: its verdict disagreed with its own numbers") in evidence


def test_the_case_bound_counts_not_the_one_the_notebook_recorded():
    # The notebook wrote a looser bound beside the error; the case's own (by the fixture's bucket) judges.
    out = executor.judged_again(passed(score("chat-00", 0.0217, bound=0.05)), SPEC, asked({"chat-00": 0.015}))
    assert out.status == Status.FAILED and out.prompts[0].bound == 0.015


def test_other_numbers_a_pass_cannot_have_are_failed_too():
    cases = {
        "nan": score("p", float("nan")),
        "missing": score("p", 0.001, missing_tokens=[17]),
        "winner": score("p", 0.001, winner_gap=0.5),
    }
    said = {name: executor.judged_again(passed(s), SPEC, asked({"p": 0.015})).failures for name, s in cases.items()}
    tail = "; the notebook said passed: its verdict disagreed with its own numbers"
    assert said == {"nan": [f"p: no finite max probability error (nan){tail}"],
                    "missing": [f"p: golden token 17 is missing from the backend's top list{tail}"],
                    "winner": [f"p: winner changed outside a near-tie: gap 0.5 > 2 x max error 0.001{tail}"]}
    exact = executor.judged_again(passed(score("p", 0.0, bound=None, exact_match=False)), SPEC,
                                  asked({"p": None}, True))
    assert exact.failures == [f"p: not bit-exact against the exact golden (exact_match False){tail}"]


def test_a_verdict_its_numbers_support_is_kept_as_it_is():
    result = passed(score("chat-00", 0.0149), score("chat-01", 0.0))
    assert executor.judged_again(result, SPEC, asked({"chat-00": 0.015, "chat-01": 0.015})) is result
    failing = passed(score("chat-00", 0.0217))
    failing = dataclasses.replace(failing, status=Status.FAILED,
                                  prompts=[dataclasses.replace(failing.prompts[0], passed=False)],
                                  failures=["chat-00: max probability error 0.0217 > bound 0.015 (bucket 128)"])
    assert executor.judged_again(failing, SPEC, asked({"chat-00": 0.015})) is failing


def test_each_prompt_is_held_to_the_bound_of_the_bucket_the_fixture_gives_it(embedded):
    fixture = load_fixture(embedded.fixture)
    golden = SimpleNamespace(path=embedded.goldens["semantic"], sha256="g" * 64)
    spec = CaseSpec(name="custom", backend="hf", kernel="k", notebook="n.ipynb", timeout_s=60, model_path="m",
                    model_digest="d" * 64, fixture_path=str(embedded.fixture), golden_path=str(golden.path),
                    golden_kind="semantic", bound=0.075, top_n=64, descriptor="t.toml",
                    bucket_bounds={"1024": 0.015}, buckets=[128, 1024])
    inputs = SimpleNamespace(fixture=fixture, goldens={"semantic": golden})
    expected = executor.expectations([spec], inputs)["custom"]
    long = next(p for p in fixture.prompts if p.bucket == 1024)
    short = next(p for p in fixture.prompts if p.bucket == 128)
    assert expected.bounds[long.id] == 0.015 and expected.bounds[short.id] == 0.075
    assert expected.exact is False
    assert Expected.from_dict(expected.to_dict()) == expected  # as the Ray executor hands it to its task
    # A notebook that files the long prompt under bucket 128 still meets the 1024 bucket's bound.
    scores = [score(p.id, 0.02 if p.id == long.id else 0.001, bound=0.075, bucket=128) for p in
              fixture.select(None, [128, 1024])]
    out = executor.judged_again(CaseResult(case="custom", backend="hf", status=Status.PASSED,
                                           inputs_digest=expected.inputs_digest, prompts=scores), spec, expected)
    assert out.status == Status.FAILED and [p.id for p in out.prompts if not p.passed] == [long.id]


def test_a_verdict_the_kernel_wrote_past_the_executor_is_judged_when_recorded(tmp_path):
    # The Ray executor takes a finished result a lost worker left behind: judged again, and saved so.
    path = tmp_path / "custom.json"
    save_case_result(passed(score("chat-00", 0.0217)), path)
    lost = CaseResult(case="custom", backend="hf", status="error", error="worker died")
    out = executor.record(tmp_path, lost, asked({"chat-00": 0.015}))
    assert out.status == Status.FAILED and load_case_result(path).status == Status.FAILED
