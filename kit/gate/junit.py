"""JUnit XML for CI dashboards: one testcase per gate case, failures with their messages.

Messages and log tails come from kernels and engines: colored logs carry ESC, a decoded byte
stream may carry lone surrogates. XML 1.0 cannot hold those characters at all (not even as
character references), and one of them makes the whole file unreadable to the CI tool, so every
attribute and text is made XML-safe on its way out.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import atomic_write_bytes
from kit.core.noise.power import headline
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import error_parts, read_run

Suite = tuple[str, Sequence[str], Mapping[str, CaseResult], float]  # name, expected cases, results, duration


REPORT_NAME = "parity-kit"


def junit_xml(suites: Sequence[Suite]) -> bytes:
    """One testsuite per gate run (a control run has two: today's pin and the candidate)."""
    root = ET.Element("testsuites", name=REPORT_NAME)  # marks the file as the kit's: a later report may replace it
    for suite in suites:
        _suite(root, *suite)
    _make_safe(root)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _suite(root: ET.Element, suite: str, expected: Sequence[str], results: Mapping[str, CaseResult],
           duration_s: float) -> None:
    counts = {"failures": 0, "errors": 0, "skipped": 0}
    tests = ET.SubElement(root, "testsuite", name=suite, tests=str(len(expected)), time=f"{duration_s:.3f}")
    for name in expected:
        r = results.get(name)
        case = ET.SubElement(tests, "testcase", name=name, classname=f"{suite}.{r.backend if r else 'unknown'}",
                             time=f"{(r.duration_s or 0) if r else 0:.3f}")
        if r is None:
            counts["errors"] += 1
            ET.SubElement(case, "error", message=f"{name}: missing (no result was recorded)", type="missing")
        elif r.status == Status.FAILED:
            counts["failures"] += 1
            messages = r.failure_messages
            node = ET.SubElement(case, "failure", message=messages[0] if messages else "failed", type="parity")
            node.text = "\n".join([*_triage_line(r), *messages])
        elif r.status in (Status.ERROR, Status.TIMEOUT):
            counts["errors"] += 1
            node = ET.SubElement(case, "error", message=r.failure_messages[0], type=r.status)
            node.text = "\n".join([*_triage_line(r), r.log_tail or ""])
        elif r.status == Status.NO_BASELINE:  # not judged: skipped, with its own type, never a failure or an error
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=r.failure_messages[0], type=Status.NO_BASELINE)
        elif r.status == Status.INCONCLUSIVE:  # within its bounds, unable to see what was asked: not passed, not failed
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=r.failure_messages[0], type=Status.INCONCLUSIVE)
        elif r.status == Status.BORROWED:  # over another class of hardware's bounds by what classes differ: not judged
            counts["skipped"] += 1
            node = ET.SubElement(case, "skipped", message=r.failure_messages[0], type=Status.BORROWED)
            node.text = "\n".join([*_triage_line(r), *(f"{r.case}: {line}" for line in r.failures)])
        if r is not None and (r.triage or r.attempts):
            _triage_properties(case, r)
        if r is not None and r.prompts:
            err = r.max_probability_error
            out = ET.SubElement(case, "system-out")
            # an error that is not a number says why (golden tokens missing), never "no error"
            said = f"max probability error {err:.6g}" if err is not None and math.isfinite(err) else (
                ", ".join(error_parts(r)) or "no error")
            out.text = said + (f", bound {r.bound:g}" if r.bound is not None else f", {r.golden_kind} golden") + (
                f"; {headline(r.detectable)}" if r.detectable else "")
    tests.set("failures", str(counts["failures"]))
    tests.set("errors", str(counts["errors"]))
    tests.set("skipped", str(counts["skipped"]))


def _triage_line(r: CaseResult) -> list[str]:
    return [f"triage: {r.triage.get('evidence')}"] if r.triage else []


def _triage_properties(case: ET.Element, r: CaseResult) -> None:
    """The case's class and evidence (kit.core.verdict.triage), and its retried attempts, as testcase properties:
    a dashboard can group failures by class without parsing the message."""
    props = ET.Element("properties")
    if r.triage:
        ET.SubElement(props, "property", name="triage", value=str(r.triage.get("class")))
        ET.SubElement(props, "property", name="triage.evidence", value=str(r.triage.get("evidence")))
    for a in r.attempts:
        ET.SubElement(props, "property", name=f"attempt{a.get('attempt')}",
                      value=f"{a.get('status')}: {(a.get('triage') or {}).get('evidence') or a.get('error')}")
    case.insert(0, props)


def write_junit(path: str | Path, suites: Sequence[Suite]) -> Path:
    """Write the suites as JUnit XML to ``path``, atomically, for CI dashboards that read JUnit."""
    return atomic_write_bytes(Path(path), junit_xml(suites))


@contextlib.contextmanager
def written_when_interrupted(path: str | Path | None, run_dirs: Sequence[str | Path | None],
                             per_release: bool = False) -> Iterator[None]:
    """Refuse an unwritable JUnit ``path`` before anything runs; if the run is then interrupted (Ctrl-C,
    a cancelled CI job), still write the JUnit of the cases that finished, from the run directories
    (known only when the caller named them before the run: --out or --resume). No ``path``: nothing to do."""
    if not path:
        yield
        return
    check_junit_path(path)
    began = time.time()
    try:
        yield
    except KeyboardInterrupt:
        write_junit_from_disk(path, run_dirs, began, per_release)
        raise


def write_junit_from_disk(path: str | Path, run_dirs: Sequence[str | Path | None], since: float,
                          per_release: bool = False) -> Path | None:
    """JUnit for runs cut short (Ctrl-C, a cancelled CI job), from what their directories hold:
    the finished cases with their results, the others as missing. A directory counts only when
    its manifest was written at or after ``since`` (epoch seconds), so an earlier run that
    happens to live there is never reported as this one. Returns None when no run had started."""
    suites = []
    for run_dir in run_dirs:
        if not run_dir:
            continue
        manifest = Path(run_dir) / rundir.MANIFEST
        if not manifest.is_file() or manifest.stat().st_mtime < since - 1:
            continue  # the 1 s: coarse file-system clocks
        view = read_run(run_dir)
        name = view.manifest["name"] + (f".{view.release}" if per_release else "")
        suites.append((name, view.expected, view.results, view.manifest.get("duration_s") or 0.0))
    return write_junit(path, suites) if suites else None


# Color and cursor sequences (CSI): presentation, not content; a dashboard shows them as noise.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Everything outside XML 1.0's Char production: C0 controls but tab, newline and CR, the
# surrogates (only lone ones reach a str) and U+FFFE/U+FFFF.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` as XML 1.0 can hold it: color codes dropped, any other forbidden character
    written as its Python escape (``\\x1b``, ``\\ud800``, ``\\uffff``) so the reader still sees it."""
    return _NOT_XML.sub(_escaped, _ANSI.sub("", text))


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _make_safe(root: ET.Element) -> None:
    for node in root.iter():
        node.text = xml_text(node.text) if node.text else node.text
        for key, value in list(node.attrib.items()):
            node.set(key, xml_text(value))


def check_junit_path(path: str | Path) -> Path:
    """Refuse a JUnit path that could not be written, before the run it reports on starts:
    finding out after an hour of cases would lose the report that CI reads."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise BadInput(f"--junit {path} is a folder; give the path of the XML file to write")
    if not folder.is_dir():
        raise BadInput(f"--junit {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise BadInput(f"--junit {path}: {target if target.exists() else folder} is not writable")
    if (target.exists() or target.is_symlink()) and not _kits_report(target):
        raise BadInput(f"--junit {path}: the file there is no JUnit report of parity-kit; a file the kit did not "
                       "write is never written over (give a new path, or remove it)")
    return target


def _kits_report(path: Path) -> bool:
    """Whether ``path`` is a plain file holding a JUnit report this kit wrote (its root named by it): the one
    kind of file at a --junit path that a new report replaces. A link, a descriptor, a run's own result is not."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError, ValueError):
        return False
    return root.tag == "testsuites" and root.get("name") == REPORT_NAME
