"""JUnit XML for CI dashboards: one testcase per gate case, failures with their messages."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Mapping, Sequence

from kit.core.jsonio import atomic_write_bytes
from kit.core.records import ERROR, FAILED, TIMEOUT, CaseResult


Suite = tuple[str, Sequence[str], Mapping[str, CaseResult], float]  # name, expected cases, results, duration


def junit_xml(suites: Sequence[Suite]) -> bytes:
    """One testsuite per gate run (a control run has two: today's pin and the candidate)."""
    root = ET.Element("testsuites")
    for suite in suites:
        _suite(root, *suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _suite(root: ET.Element, suite: str, expected: Sequence[str], results: Mapping[str, CaseResult],
           duration_s: float) -> None:
    counts = {"failures": 0, "errors": 0}
    tests = ET.SubElement(root, "testsuite", name=suite, tests=str(len(expected)), time=f"{duration_s:.3f}")
    for name in expected:
        r = results.get(name)
        case = ET.SubElement(tests, "testcase", name=name, classname=f"{suite}.{r.backend if r else 'unknown'}",
                             time=f"{(r.duration_s or 0) if r else 0:.3f}")
        if r is None:
            counts["errors"] += 1
            ET.SubElement(case, "error", message=f"{name}: missing (no result was recorded)", type="missing")
        elif r.status == FAILED:
            counts["failures"] += 1
            messages = r.failure_messages
            node = ET.SubElement(case, "failure", message=messages[0] if messages else "failed", type="parity")
            node.text = "\n".join(messages)
        elif r.status in (ERROR, TIMEOUT):
            counts["errors"] += 1
            node = ET.SubElement(case, "error", message=r.failure_messages[0], type=r.status)
            node.text = r.log_tail or ""
        if r is not None and r.prompts:
            err = r.max_probability_error
            out = ET.SubElement(case, "system-out")
            out.text = (f"max probability error {err:.6g}" if err is not None and err == err else "no error") + (
                f", bound {r.bound:g}" if r.bound is not None else f", {r.golden_kind} golden")
    tests.set("failures", str(counts["failures"]))
    tests.set("errors", str(counts["errors"]))


def write_junit(path: str | Path, suites: Sequence[Suite]) -> Path:
    return atomic_write_bytes(Path(path), junit_xml(suites))
