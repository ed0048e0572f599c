"""Every reason a resume runs a case again, each with the exact words the gate records and prints, and
a failed case that resumes as what it was. The earlier results carry real inputs digests of the
embedded descriptor's cases (a fixture or golden digest stands in as a short string)."""

from __future__ import annotations

import dataclasses

import nbformat
import pytest

from kit.core.verdict.coverage import Expected
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import save_case_result
from kit.descriptor.load import load_descriptor
from kit.gate import resume

FIXTURE, GOLDEN, KERNEL = "fixture-now", "golden-now", "release-now"


@pytest.fixture
def spec(embedded):
    return load_descriptor(embedded.descriptor).case_specs(["hf-bf16"])[0]


def earlier(cases_dir, spec, *, status=Status.PASSED, fixture=FIXTURE, golden=GOLDEN, made_by=None, notebook=True):
    """What a finished earlier attempt left in cases/: its result (computed by ``made_by``, the case as it
    was then, else as it is now) and its executed notebook."""
    then = made_by or spec
    result = CaseResult(case=spec.name, backend=spec.backend, status=status, fixture_sha256=fixture,
                        golden_sha256=golden, model_digest=then.model_digest,
                        inputs_digest=then.inputs_digest(fixture, golden))
    save_case_result(result, cases_dir / f"{spec.name}.json")
    if notebook:
        nbformat.write(nbformat.v4.new_notebook(), str(cases_dir / f"{spec.name}.ipynb"))
    return result


def plan(cases_dir, spec, then=KERNEL, now=KERNEL, **kw):
    return resume.plan(resume.ResumeInputs(cases_dir, [spec], FIXTURE, {spec.golden_path: GOLDEN}, {spec.kernel: now},
                       {spec.kernel: then}, **kw))


def why(cases_dir, spec, **kw) -> str:
    p = plan(cases_dir, spec, **kw)
    assert p.reused == {} and list(p.rerun) == [spec.name]
    return p.rerun[spec.name]


def test_the_unchanged_case_is_reused(tmp_path, spec):
    earlier(tmp_path, spec)
    p = plan(tmp_path, spec)
    assert list(p.reused) == ["hf-bf16"] and p.rerun == {} and p.kept == {}


def test_a_case_without_a_result_runs(tmp_path, spec):
    assert why(tmp_path, spec) == "no earlier result"


def test_an_unreadable_result_is_rerun(tmp_path, spec):
    earlier(tmp_path, spec)
    path = tmp_path / "hf-bf16.json"
    path.write_bytes(path.read_bytes()[:50])  # cut short, as a full disk leaves it
    assert why(tmp_path, spec) == "its earlier result is unreadable (JSONDecodeError)"


@pytest.mark.parametrize("status", [Status.ERROR, Status.TIMEOUT])
def test_an_error_or_timeout_is_rerun(tmp_path, spec, status):
    earlier(tmp_path, spec, status=status)
    assert why(tmp_path, spec) == f"its earlier attempt ended with {status}"


def test_a_result_without_its_notebook_is_rerun(tmp_path, spec):
    earlier(tmp_path, spec, notebook=False)
    assert why(tmp_path, spec) == "its earlier notebook is missing"


def test_changed_inputs_are_named(tmp_path, spec):
    earlier(tmp_path, spec, fixture="fixture-then")
    assert why(tmp_path, spec) == "its inputs changed: fixture"
    earlier(tmp_path, spec, made_by=dataclasses.replace(spec, model_digest="0" * 64))
    assert why(tmp_path, spec) == "its inputs changed: model"
    earlier(tmp_path, spec, made_by=dataclasses.replace(spec, bound=0.05))
    assert why(tmp_path, spec) == "its inputs changed: descriptor entry"
    earlier(tmp_path, spec, fixture="fixture-then", golden="golden-then")
    assert why(tmp_path, spec) == "its inputs changed: golden, fixture"


def test_a_case_whose_release_changed_or_was_not_recorded_is_rerun(tmp_path, spec):
    earlier(tmp_path, spec)
    line = "the release in kernel 'parity-kit' changed (or was not recorded)"
    assert why(tmp_path, spec, then="release-then") == line
    assert why(tmp_path, spec, then=None) == line  # a run from before fingerprints were recorded
    assert why(tmp_path, spec, then=None, now=None) == line  # the kernel is gone: nothing vouches for it


def test_a_result_that_no_longer_covers_its_prompts_is_rerun(tmp_path, spec):
    earlier(tmp_path, spec)  # a passed verdict over no prompts
    asked = {"hf-bf16": Expected("hf-bf16", "hf", ("chat-sharegpt-00", "math-gsm-00"),
                                 spec.inputs_digest(FIXTURE, GOLDEN))}
    assert why(tmp_path, spec, expected=asked) == (
        "its earlier result does not hold: case hf-bf16: result covers 0 of 2 prompts; missing chat-sharegpt-00, "
        "math-gsm-00")


def test_a_changed_custom_notebook_is_rerun(tmp_path, spec):
    earlier(tmp_path, spec)
    mine = {"path": "mine.ipynb"}
    assert why(tmp_path, spec, notebooks_then={"hf-bf16": {**mine, "sha256": "1" * 64}},
               notebooks_now={"hf-bf16": {**mine, "sha256": "2" * 64}}) == "its custom notebook changed"


def test_a_failed_case_is_reused_as_failed_with_or_without_case(tmp_path, spec):
    """A failed verdict is a verdict: resuming reuses it (never reruns it hoping for a pass), whether or not
    --case selects it, as long as its inputs and release hold."""
    old = earlier(tmp_path, spec, status=Status.FAILED)
    for selected in (None, ["hf-bf16"], ["checkpoint"]):
        p = plan(tmp_path, spec, selected=selected)
        assert p.rerun == {} and p.kept == {} and list(p.reused) == ["hf-bf16"]
        assert p.reused["hf-bf16"].status == Status.FAILED and p.reused["hf-bf16"].inputs_digest == old.inputs_digest


def test_a_failed_case_whose_release_changed_stays_failed_unless_selected(tmp_path, spec):
    """Not selected by --case, a recorded failure is kept as the failure it is (docs/gate.md: a failed case stays failed
    until it is itself rerun and passes), never reported missing; its files stay where they are."""
    old = earlier(tmp_path, spec, status=Status.FAILED)
    p = plan(tmp_path, spec, then="release-then", selected=["checkpoint"])
    assert p.reused == {} and p.rerun == {} and p.superseded == []
    assert p.kept == {"hf-bf16": "not selected by --case; the release in kernel 'parity-kit' changed (or was not "
                                 "recorded): its recorded failure stands until it runs again"}
    kept = p.kept_results["hf-bf16"]
    assert kept.status == Status.FAILED and kept.inputs_digest == old.inputs_digest


def test_a_passed_case_that_no_longer_holds_counts_missing_and_its_files_are_set_aside(tmp_path, spec):
    """A pass under another release is no pass of this run: counted missing, and its files go to superseded/ as a
    rerun case's do, so the report and summary (which read cases/) say missing too, not passed."""
    earlier(tmp_path, spec, status=Status.PASSED)
    p = plan(tmp_path, spec, then="release-then", selected=["checkpoint"])
    assert p.kept == {"hf-bf16": "not selected by --case; the release in kernel 'parity-kit' changed (or was not "
                                 "recorded): counted missing"}
    assert p.kept_results == {} and p.superseded == ["hf-bf16"]


def test_the_evidence_does_not_call_a_kept_case_unrecorded():
    from kit.gate.report import evidence_markdown

    why = "not selected by --case; the release in kernel 'parity-kit' changed (or was not recorded): counted missing"
    manifest = {"name": "tiny", "cases": ["hf-bf16", "gone"], "fixture_sha256": "ab" * 32, "model_digest": "cd" * 32,
                "kit_version": "0.1.0", "kept": {"hf-bf16": why}}
    text = evidence_markdown(manifest, "incomplete", {"missing": 2}, 1.0, {})
    assert "- `hf-bf16`: missing (not run again, and no earlier result of it holds)" in text
    assert "- `gone`: missing (no result was recorded)" in text
