"""A failure under another class of hardware's bounds: borrowed-bounds when the classes' difference explains it,
failed when it does not, and every committed pair of records within the factor the rule stands on."""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
from pathlib import Path

import pytest

from kit.core.verdict.borrowed import CROSS_CLASS_FACTOR, explained, judged_under_borrowed_bounds
from kit.core.noise.calibration import load_record, measured_on
from kit.core.verdict.decode import compare_continuation
from kit.core.exitcodes import ExitCode
from kit.core.records.records import CaseResult, Continuation, DecodeScore, Observation, Status
from kit.core.records.results import GATE_EXIT_CODES, Verdict, gate_verdict
from kit.core.verdict.scoring import score_prompt
from kit.core.verdict.triage import TriageClass, classify

ROOT = Path(__file__).resolve().parents[3]
COMMAND = "parity-kit baseline make descriptors/tiny-cpu.toml --case c --reason \"...\""
V4, V3 = "cpu (x86-64-v4)", "cpu (x86-64-v3)"

# A golden whose top token leads by far (no near-tie), and one backend distribution per error size.
GOLDEN = ((5, -0.105360516), (7, -2.302585093), (9, -4.605170186))  # p = 0.9, 0.1, 0.01


def _observation(shift: float, winner: int = 5) -> Observation:
    import math
    p = {5: 0.9 - shift, 7: 0.1 + shift, 9: 0.01}
    if winner != 5:
        p = {5: 0.1, 7: 0.9, 9: 0.01}
    ranked = sorted(p.items(), key=lambda kv: -kv[1])
    return Observation("p", tuple((t, math.log(v)) for t, v in ranked), 100)


def _case(*shifts: float, bound: float = 0.01, winner: int = 5) -> CaseResult:
    """A case scored by the real rule: one prompt per shift, the last one's winner as given."""
    prompts = [score_prompt(f"p{i}", 128, GOLDEN, _observation(s, winner if i == len(shifts) - 1 else 5), bound)
               for i, s in enumerate(shifts)]
    failures = [f for p in prompts for f in p.failures]
    return CaseResult(case="c", backend="hf", status=Status.FAILED if failures else Status.PASSED, bound=bound,
                      bucket_bounds={"128": bound}, prompts=prompts, failures=failures, duration_s=60.0)


def test_a_failure_within_the_factor_is_borrowed_with_the_command_that_measures_this_host():
    result = judged_under_borrowed_bounds(_case(0.001, 0.02), V4, V3, COMMAND, 300.0)
    assert result.status == Status.BORROWED
    assert result.error == (
        "failed only under bounds measured on cpu (x86-64-v4), this host is cpu (x86-64-v3): every failure is an error "
        f"over its bound by at most {CROSS_CLASS_FACTOR:g}x, as far as classes of hardware differ; not a regression "
        f"until this host is measured: `{COMMAND}` (about 5 min)")
    assert result.failures == _case(0.001, 0.02).failures  # what crossed stays on record
    assert classify(result).kind == TriageClass.BORROWED_BOUNDS
    assert result.failure_messages[0].startswith("c: borrowed bounds: failed only under bounds measured on")


def test_an_error_beyond_the_factor_stays_failed_and_says_why():
    result = judged_under_borrowed_bounds(_case(0.001, 0.035), V4, V3, COMMAND)
    assert result.status == Status.FAILED
    assert result.notes[-1] == ("bounds measured on cpu (x86-64-v4), this host is cpu (x86-64-v3); the failure is not "
                                f"one that the difference between classes explains (more than {CROSS_CLASS_FACTOR:g}x "
                                "a bound, or not a bound's): it stands")
    assert classify(result).kind == TriageClass.NUMERIC


def test_a_winner_change_outside_a_near_tie_stays_failed_whatever_the_bound():
    case = _case(0.001, 0.0, winner=7)
    assert case.status == Status.FAILED and not explained(case)
    assert judged_under_borrowed_bounds(case, V4, V3, COMMAND).status == Status.FAILED


def test_a_failure_of_the_case_as_a_whole_is_never_explained_by_a_bound():
    case = _case(0.001, 0.02)
    with_drift = dataclasses.replace(case, failures=[*case.failures, "drift: every prompt moved one way"])
    assert not explained(with_drift)
    assert judged_under_borrowed_bounds(with_drift, V4, V3, COMMAND).status == Status.FAILED


def test_a_passed_case_is_left_as_it_is():
    case = _case(0.001)
    assert judged_under_borrowed_bounds(case, V4, V3, COMMAND) is case


def _decode(step_errors_shift: list[float], step_bounds: dict[str, float]) -> DecodeScore:
    golden = [(5, GOLDEN)] * len(step_errors_shift)
    backend = Continuation("p", tuple((5, _observation(s).top_logprobs) for s in step_errors_shift))
    return compare_continuation("p", 128, 100, golden, backend, 0.05, step_bounds)


@pytest.mark.parametrize("shift, status", [(0.012, Status.BORROWED), (0.05, Status.FAILED)])
def test_a_decode_step_over_its_own_bound_is_judged_against_that_bound(shift, status):
    steps = {"1": 0.02, "2": 0.005, "3": 0.02}
    d = _decode([0.001, shift, 0.001], steps)
    assert not d.passed
    case = CaseResult(case="c", backend="vllm", status=Status.FAILED, bound=0.05, bucket_bounds={"128": 0.05},
                      prompts=[score_prompt("p", 128, GOLDEN, _observation(0.001), 0.05)], decode=[d],
                      failures=list(d.failures), bound_source={"kind": "calibrated", "step_bounds": steps})
    assert judged_under_borrowed_bounds(case, V4, V3, COMMAND).status == status


def test_the_verdict_ranks_borrowed_bounds_below_a_failure_and_above_inconclusive():
    borrowed = dataclasses.replace(_case(0.02), status=Status.BORROWED)
    passed = _case(0.001)
    assert gate_verdict(["a", "b"], {"a": borrowed, "b": passed}) == Verdict.BORROWED
    assert gate_verdict(["a", "b"], {"a": borrowed, "b": _case(0.5)}) == Verdict.FAILED
    inconclusive = dataclasses.replace(passed, status="inconclusive")
    assert gate_verdict(["a", "b"], {"a": borrowed, "b": inconclusive}) == Verdict.BORROWED
    assert gate_verdict(["b"], {"b": inconclusive}) == Verdict.INCONCLUSIVE
    assert GATE_EXIT_CODES[Verdict.BORROWED] == ExitCode.BORROWED_BOUNDS == 9


def _committed_record_pairs():
    """Every pair of records of one case that the committed descriptors list, and every pair of one case's records
    in calibrations/ (a lineage head reaches a descriptor without being listed in it)."""
    for desc in sorted((ROOT / "descriptors").glob("*.toml")):
        doc = tomllib.loads(desc.read_text())
        for name, case in doc.get("cases", {}).items():
            files = case.get("calibration") or []
            records = [load_record(desc.parent / f) for f in ([files] if isinstance(files, str) else files)]
            for a, b in itertools.combinations(records, 2):
                yield f"{desc.name}:{name}", a, b
    by_case: dict[str, list] = {}
    for path in sorted((ROOT / "calibrations").glob("*.json")):
        record = load_record(path)
        by_case.setdefault(record.case, []).append(record)
    for case, records in by_case.items():
        for a, b in itertools.combinations(records, 2):
            if measured_on({"fingerprint": a.fingerprint}) != measured_on({"fingerprint": b.fingerprint}):
                yield f"calibrations:{case}", a, b


def _ratios(a, b):
    for bucket in set(a.bounds) & set(b.bounds):
        yield f"bucket {bucket}", a.bounds[bucket], b.bounds[bucket]
    sa, sb = a.decode_reference().get("step_bounds", {}), b.decode_reference().get("step_bounds", {})
    for step in set(sa) & set(sb):
        yield f"decode step {step}", sa[step], sb[step]


def test_every_committed_pair_of_classes_differs_by_less_than_the_factor():
    """The factor is the rule's evidence: a record whose bounds differ from another class's by more would make a
    real difference between classes read as a regression, so it cannot land without the factor (and its docs)."""
    seen = 0
    for where, a, b in _committed_record_pairs():
        if measured_on({"fingerprint": a.fingerprint}) == measured_on({"fingerprint": b.fingerprint}):
            continue
        if a.noise_class != b.noise_class or a.inputs != b.inputs:
            continue
        for what, x, y in _ratios(a, b):
            seen += 1
            assert max(x, y) <= CROSS_CLASS_FACTOR * min(x, y), (where, what, x, y)
    assert seen >= 20  # the embedded descriptor's semantic cases, each on two classes
