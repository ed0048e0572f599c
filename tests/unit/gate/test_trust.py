"""A run never says passed for what it did not check: case results are held to what was asked, a backend
to the prompts it was given, custom notebooks must say they are code, a resume reuses only what is whole,
and a result that cannot be written is an error. No kernels: records, plans and stand-ins only."""

from __future__ import annotations

import dataclasses
import errno
import json

import nbformat
import pytest

from kit import cli
from kit.cli import entry
from kit.case.runner import BackendMismatch, observe_by_bucket
from kit.core.records import paths
from kit.core.verdict.coverage import Expected, Uncovered, coverage_problem, prompt_mismatch
from kit.core.errors import BadInput
from kit.core.exitcodes import ExitCode
from kit.core.records.fixture import Prompt, load_fixture
from kit.core.records.progress import ProgressWriter
from kit.core.records.records import CaseResult, Observation, PromptScore, Status
from kit.core.records.results import save_case_result
from kit.descriptor.load import load_descriptor
from kit.gate import executor, resume
from support import trusted, write_descriptor

DIGEST = "a" * 64


def score(pid: str, passed: bool = True) -> PromptScore:
    return PromptScore(id=pid, bucket=128, n_tokens=3, passed=passed, bound=0.1, max_probability_error=0.01,
                       top_probability_l1_error=0.02, kl_shared=0.0, first_rank_agreement=True, golden_top_token=1,
                       golden_top_probability=0.9, backend_top_token=1, backend_top_probability=0.9, winner_gap=0.0,
                       failures=[] if passed else [f"{pid}: max probability error 0.5 exceeds bound 0.1"])


def result(ids, status=Status.PASSED, case="hf-bf16", backend="hf", digest=DIGEST) -> CaseResult:
    prompts = [score(i) for i in ids]
    return CaseResult(case=case, backend=backend, status=status, inputs_digest=digest, prompts=prompts)


@pytest.fixture(scope="module")
def all_ids(embedded) -> tuple[str, ...]:
    return tuple(load_fixture(embedded.fixture).ids)


@pytest.fixture
def asked(all_ids) -> Expected:
    return Expected("hf-bf16", "hf", all_ids, DIGEST)


def _said(problem):
    """A coverage problem as (its kind, its line)."""
    return (problem.kind, problem.text)


def test_a_passed_result_over_no_prompts_is_not_a_verdict(asked):
    assert _said(coverage_problem(result([]), asked)) == (Uncovered.PROMPTS,
        "case hf-bf16: result covers 0 of 64 prompts; missing chat-sharegpt-00, chat-sharegpt-01, "
        "chat-sharegpt-02, ... (+61)")


def test_half_the_prompts_extra_ones_and_repeats_are_named(asked, all_ids):
    half = all_ids[:32]
    assert _said(coverage_problem(result(half), asked)) == (Uncovered.PROMPTS,
        f"case hf-bf16: result covers 32 of 64 prompts; missing {all_ids[32]}, {all_ids[33]}, {all_ids[34]}, ... (+29)")
    assert _said(coverage_problem(result([*all_ids, "made-up-00", all_ids[0]]), asked)) == (Uncovered.PROMPTS,
        "case hf-bf16: result covers 64 of 64 prompts; extra made-up-00; more than once chat-sharegpt-00")


def test_a_result_for_other_inputs_another_case_or_backend_is_refused(asked, all_ids):
    assert _said(coverage_problem(result(all_ids, digest="b" * 64), asked)) == (Uncovered.INPUTS,
        "case hf-bf16: result was computed for other inputs (inputs digest bbbbbbbbbbbb, expected aaaaaaaaaaaa)")
    assert _said(coverage_problem(result(all_ids, case="checkpoint"), asked)) == (Uncovered.CASE,
        "case hf-bf16: result is for case 'checkpoint'")
    assert _said(coverage_problem(result(all_ids, backend="vllm"), asked)) == (Uncovered.BACKEND,
        "case hf-bf16: result is from backend 'vllm', not 'hf'")


def test_a_status_must_agree_with_its_prompts(asked, all_ids):
    failing = result(all_ids)
    failing.prompts[1] = score(all_ids[1], passed=False)
    assert _said(coverage_problem(failing, asked)) == (
        Uncovered.PASSED_WITH_FAILURES, f"case hf-bf16: result says passed but lists failures ({all_ids[1]})")
    assert _said(coverage_problem(result(all_ids, status=Status.FAILED), asked)) == (Uncovered.FAILED_WITHOUT_FAILURE,
        "case hf-bf16: result says failed but lists no failure")
    failing = dataclasses.replace(failing, status=Status.FAILED)
    assert coverage_problem(failing, asked) is None
    assert coverage_problem(result(all_ids), asked) is None
    assert coverage_problem(result([], status=Status.ERROR), asked) is None  # an error claims nothing


def test_prompt_mismatch_ignores_order():
    assert prompt_mismatch(["a", "b"], ["b", "a"]) is None
    assert prompt_mismatch(["a", "b"], ["a"]) == "missing b"


class Short:
    """A stand-in backend that drops the last prompt of every call and answers the rest in reverse."""

    def observe(self, cases, top_n):
        return [Observation(c.id, ((1, -0.1),), 3) for c in reversed(cases[:-1])]

    def details(self) -> dict:
        return {}


class Reversed(Short):
    def observe(self, cases, top_n):
        return [Observation(c.id, ((1, -0.1),), 3) for c in reversed(cases)]


def prompts() -> list[Prompt]:
    return [Prompt(id=f"p{n}", bucket=128, prompt="", prompt_token_ids=(1, 2)) for n in range(4)]


def test_a_backend_returning_fewer_observations_is_refused_by_name(tmp_path):
    with pytest.raises(BackendMismatch) as err:
        observe_by_bucket(Short(), prompts(), 5, ProgressWriter(str(tmp_path / "case")), "hf")
    assert str(err.value) == "backend hf returned 3 observations for the 4 prompts of bucket 128: missing p3"


def test_a_backend_may_answer_out_of_order(tmp_path):
    observed, _ = observe_by_bucket(Reversed(), prompts(), 5, ProgressWriter(str(tmp_path / "case")), "hf")
    assert [o.prompt_id for o in observed] == ["p0", "p1", "p2", "p3"]


def test_a_result_that_cannot_be_written_ends_the_case_as_an_error(tmp_path, monkeypatch):
    path = tmp_path / "hf-bf16.json"
    save_case_result(result(["p0"]), path)  # e.g. the kernel's own verdict, written before the disk filled

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(executor, "save_case_result", full)
    out = executor.saved(result(["p0"]), path)
    assert out.status == Status.ERROR
    assert out.error == f"its result could not be written to {paths.display(path)}: No space left on device"
    assert not path.exists(), "no verdict stays behind for a resume to reuse"


def case_files(cases_dir, spec, status=Status.PASSED, notebook="whole"):
    save_case_result(CaseResult(case=spec.name, backend=spec.backend, status=status, inputs_digest=DIGEST), cases_dir
                     / f"{spec.name}.json")
    nb = cases_dir / f"{spec.name}.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), str(nb))
    if notebook == "truncated":
        nb.write_bytes(nb.read_bytes()[:40])


def test_resume_reruns_a_case_whose_notebook_is_truncated(tmp_path, embedded, monkeypatch):
    specs = load_descriptor(embedded.descriptor).case_specs(["checkpoint", "hf-bf16"])
    monkeypatch.setattr(type(specs[0]), "inputs_digest", lambda self, f, g: DIGEST)
    case_files(tmp_path, specs[0], notebook="truncated")
    case_files(tmp_path, specs[1])
    goldens = {s.golden_path: "g" for s in specs}
    plan = resume.plan(resume.ResumeInputs(tmp_path, specs, "f", goldens, {"parity-kit": "k"}, {"parity-kit": "k"}))
    assert list(plan.reused) == ["hf-bf16"]
    assert plan.rerun == {"checkpoint": "its earlier notebook is unreadable (NotJSONError)"}


def test_resume_with_case_keeps_the_others(tmp_path, embedded, monkeypatch):
    specs = load_descriptor(embedded.descriptor).case_specs(["checkpoint", "hf-bf16", "vllm-pp1"])
    monkeypatch.setattr(type(specs[0]), "inputs_digest", lambda self, f, g: DIGEST)
    case_files(tmp_path, specs[0], status=Status.ERROR)
    case_files(tmp_path, specs[1], notebook="truncated")
    case_files(tmp_path, specs[2], status=Status.FAILED)
    goldens = {s.golden_path: "g" for s in specs}
    plan = resume.plan(resume.ResumeInputs(tmp_path, specs, "f", goldens, {"parity-kit": "k"}, {"parity-kit": "k"},
                                           selected=["vllm-pp1"]))
    assert plan.rerun == {} and list(plan.reused) == ["vllm-pp1"]
    assert plan.kept == {"checkpoint": "not selected by --case; its earlier attempt ended with error",
                         "hf-bf16": "not selected by --case; its earlier notebook is unreadable (NotJSONError): "
                                    "counted missing"}
    assert list(plan.kept_results) == ["checkpoint"]


def test_a_custom_notebook_must_say_it_is_code(tmp_path, embedded):
    case = {**embedded.doc["cases"]["hf-bf16"]}
    mine = tmp_path / "mine.ipynb"
    # Refused when the descriptor loads: a case's notebook is a rule of the document, whichever cases run.
    with pytest.raises(BadInput) as err:
        load_descriptor(write_descriptor(tmp_path, embedded, cases={"x": {**case, "notebook": str(mine)}}))
    assert str(err.value).endswith(f"cases.x.notebook: {str(mine)!r} is not in the kit's notebooks folder "
                                   f"({paths.NOTEBOOKS}); a notebook of your own runs as code: write notebook = "
                                   f"{{path = {str(mine)!r}, trusted = true}}")
    with pytest.raises(BadInput, match=r"cases\.x\.notebook: trusted = false: a case notebook is code"):
        load_descriptor(write_descriptor(tmp_path, embedded, cases={"x": {**case, "notebook": {
            "path": str(mine), "trusted": False}}}))
    result_file = tmp_path / "result.json"
    with pytest.raises(BadInput) as err:
        load_descriptor(write_descriptor(tmp_path, embedded, cases={"x": {**case, "notebook": trusted(result_file)}}))
    assert str(err.value).endswith(f"cases.x.notebook: {paths.display(result_file)} is not a notebook "
                                   "(a case notebook ends in .ipynb)")
    desc = load_descriptor(write_descriptor(tmp_path, embedded, cases={
        "x": {**case, "notebook": trusted(mine)}, "y": {**case, "notebook": "parity.ipynb"}}))
    x, y = desc.case_specs()
    assert (x.notebook, y.notebook) == (str(mine), str(paths.NOTEBOOKS.resolve() / "parity.ipynb"))
    mine.write_text(json.dumps({"cells": []}))
    assert executor.custom_notebooks([x, y]) == {"x": {"path": str(mine), "sha256": executor.sha256_file(mine)}}


def test_an_unexpected_exception_is_an_internal_error(monkeypatch, capsys):
    def bug(args):
        raise KeyError("oops")

    monkeypatch.setattr(cli.tools, "_backends", bug)
    monkeypatch.setattr(entry, "_parser", _with_func(entry._parser, bug))
    assert entry.main(["backends"]) == ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1] == "parity-kit: internal error: KeyError: 'oops'"
    assert ExitCode.INTERNAL.meaning.startswith("internal error: an unexpected exception in parity-kit")


def _with_func(make, func):
    """The real parser, with the parsed command's handler replaced (set_defaults is bound at build time)."""
    def parser():
        p = make()
        original = p.parse_args
        p.parse_args = lambda argv: setattr(ns := original(argv), "func", func) or ns
        return p
    return parser
