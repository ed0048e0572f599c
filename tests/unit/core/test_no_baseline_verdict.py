"""A case with no baseline for its runtime is its own outcome: never passed, never failed, and it yields to
a failure or an unfinished case in the gate's verdict (they say more about the release)."""

from __future__ import annotations

from kit.core.exitcodes import ExitCode
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import GATE_EXIT_CODES, counts_sentence, gate_verdict, status_counts
from support.records import failed_case, passed_case

NONE_HERE = CaseResult(case="exact", backend="hf", status=Status.NO_BASELINE, error="no baseline for this runtime: ...")


def test_no_baseline_alone_beside_passes_is_its_own_verdict_and_exit_code():
    results = {"ok": passed_case("ok"), "exact": NONE_HERE}
    assert gate_verdict(["ok", "exact"], results) == "no-baseline"
    assert GATE_EXIT_CODES["no-baseline"] == ExitCode.NO_BASELINE == 7
    assert counts_sentence(status_counts(["ok", "exact"], results), 3) == "1 without a baseline, 1 passed in 3 s"


def test_a_failure_or_an_unfinished_case_decides_before_no_baseline():
    bad = failed_case("bad", {"p-1": "max probability error 0.5 > bound 0.075"})
    assert gate_verdict(["bad", "exact"], {"bad": bad, "exact": NONE_HERE}) == "failed"
    died = CaseResult(case="died", backend="hf", status=Status.ERROR, error="kernel died")
    assert gate_verdict(["died", "exact"], {"died": died, "exact": NONE_HERE}) == "incomplete"
    assert gate_verdict(["gone", "exact"], {"exact": NONE_HERE}) == "incomplete"


def test_its_message_is_the_reason_it_was_not_judged():
    assert NONE_HERE.failure_messages == ["exact: no baseline for this runtime: ..."]
