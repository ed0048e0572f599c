"""JUnit XML for CI dashboards, read back as a dashboard reads it: each way a case can fall short
(failed, errored, timed out, never recorded) becomes the element that tool counts it under, with the
case's own message, and each <testsuite>'s counts agree with its cases."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from kit.core.records.records import CaseResult, Status
from kit.gate.junit import junit_xml
from support.records import failed_case, passed_case

EXPECTED = ["ok", "bad", "dies", "hangs", "gone"]


def suites() -> list:
    results = {
        "ok": passed_case("ok", err=0.0123, duration_s=1.25),
        "bad": failed_case("bad", {"p-1": "max probability error 0.5 > bound 0.075", "p-2": "first rank differs"}),
        "dies": CaseResult(case="dies", backend="vllm", status=Status.ERROR, error="kernel died (exit 137)",
                           duration_s=3.0, log_tail="Traceback\nMemoryError"),
        "hangs": CaseResult(case="hangs", backend="hf", status=Status.TIMEOUT, error="no result after 600 s",
                            duration_s=600.0),
    }
    clean = {"ok": passed_case("ok")}
    return [("tiny.current", EXPECTED, results, 612.5), ("tiny.candidate", ["ok"], clean, 2.0)]


def parsed() -> ET.Element:
    return ET.fromstring(junit_xml(suites()))


def case(suite: ET.Element, name: str) -> ET.Element:
    (node,) = suite.findall(f"testcase[@name='{name}']")
    return node


def test_each_suite_counts_its_own_tests_failures_and_errors():
    root = parsed()
    assert root.tag == "testsuites"
    assert [dict(s.attrib) for s in root.findall("testsuite")] == [
        {"name": "tiny.current", "tests": "5", "failures": "1", "errors": "3", "skipped": "0", "time": "612.500"},
        {"name": "tiny.candidate", "tests": "1", "failures": "0", "errors": "0", "skipped": "0", "time": "2.000"},
    ]
    current = root.find("testsuite")
    assert [c.get("name") for c in current.findall("testcase")] == EXPECTED
    # The counts are those of the elements a dashboard tallies, not only of the attributes.
    assert len(current.findall("testcase/failure")) == 1 and len(current.findall("testcase/error")) == 3


def test_a_failed_case_is_a_failure_with_every_reason():
    node = case(parsed().find("testsuite"), "bad")
    assert node.get("classname") == "tiny.current.hf" and node.get("time") == "2.000"
    (failure,) = list(node.iterfind("failure"))
    assert failure.attrib == {"message": "bad: p-1: max probability error 0.5 > bound 0.075", "type": "parity"}
    assert failure.text == "bad: p-1: max probability error 0.5 > bound 0.075\nbad: p-2: first rank differs"
    assert node.find("error") is None
    assert node.find("system-out").text == "max probability error 0.5, bound 0.075"


def test_an_errored_case_is_an_error_with_its_message_and_log_tail():
    node = case(parsed().find("testsuite"), "dies")
    assert node.get("classname") == "tiny.current.vllm" and node.get("time") == "3.000"
    (error,) = list(node.iterfind("error"))
    assert error.attrib == {"message": "dies: error: kernel died (exit 137)", "type": "error"}
    assert error.text == "Traceback\nMemoryError"
    assert node.find("failure") is None and node.find("system-out") is None  # no prompts were scored


def test_a_timed_out_case_is_an_error_of_type_timeout():
    node = case(parsed().find("testsuite"), "hangs")
    assert node.get("time") == "600.000"
    (error,) = list(node.iterfind("error"))
    assert error.attrib == {"message": "hangs: timeout: no result after 600 s", "type": "timeout"}
    assert not error.text  # no log tail was kept: an empty element, not the text "None"
    assert node.find("failure") is None


def test_a_case_never_recorded_is_a_missing_error():
    node = case(parsed().find("testsuite"), "gone")
    assert node.attrib == {"name": "gone", "classname": "tiny.current.unknown", "time": "0.000"}
    (error,) = list(node)
    assert error.tag == "error"
    assert error.attrib == {"message": "gone: missing (no result was recorded)", "type": "missing"}


def test_a_passed_case_has_only_its_largest_error():
    node = case(parsed().find("testsuite"), "ok")
    assert node.attrib == {"name": "ok", "classname": "tiny.current.hf", "time": "1.250"}
    assert [child.tag for child in node] == ["system-out"]
    assert node.find("system-out").text == "max probability error 0.0123, bound 0.075"


def test_a_case_without_a_baseline_is_skipped_with_its_own_type_never_failed_or_errored():
    from kit.core.records.records import Status

    why = "no baseline for this runtime: goldens.exact holds no exact golden made on torch-cpu x"
    results = {"ok": passed_case("ok"), "exact": CaseResult(case="exact", backend="hf", status=Status.NO_BASELINE,
                                                            error=why)}
    root = ET.fromstring(junit_xml([("tiny", ["ok", "exact"], results, 1.0)]))
    (suite,) = root.findall("testsuite")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("0", "0", "1")
    (skipped,) = case(suite, "exact").findall("skipped")
    assert skipped.get("type") == "no-baseline" and skipped.get("message") == f"exact: {why}"
