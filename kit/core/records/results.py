"""Case results on disk, the gate verdict derived from them, and the one reader of a run directory.

``RunDir`` reads a gate run's manifest, its result.json and its case files, wherever the run is kept (a folder
here or a bucket prefix: kit.core.records.store). Every command that reads a run back (verify, the summary, the
baselines archive, the history, control, JUnit) reads it here, so a damaged or hostile file is refused one way,
a link that leads out of the run is refused by one rule, and the messages name the file the same way.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import posixpath
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping, Sequence

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.exitcodes import ExitCode
from kit.core.records.jsonio import parse_json_input, read_json, write_json
from kit.core.records.records import CaseResult, Status
from kit.core.records.recordcheck import Wrong, mapping, text
from kit.core.records.resultcheck import check_case_result, check_manifest, checked
from kit.core.records.store import Store, local_store

class Verdict(StrEnum):
    """A gate run's verdict, derived from its cases' statuses (``gate_verdict``): the word result.json keeps."""
    PASSED = "passed"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    NO_BASELINE = "no-baseline"  # every case that ran passed, and some exact case had nothing to judge it by
    # Nothing failed or went missing, but some case could not have seen a fault as small as the descriptor asks.
    INCONCLUSIVE = "inconclusive"
    # Nothing failed or went missing, but some case failed under another class of hardware's bounds by no more than
    # classes differ (kit.core.verdict.borrowed): the host needs its own measurement before anything is claimed.
    BORROWED = "borrowed-bounds"


# What `parity-kit gate` exits with for each gate verdict.
GATE_EXIT_CODES = {Verdict.PASSED: ExitCode.PASSED, Verdict.FAILED: ExitCode.FAILED,
                   Verdict.INCOMPLETE: ExitCode.INCOMPLETE, Verdict.NO_BASELINE: ExitCode.NO_BASELINE,
                   Verdict.INCONCLUSIVE: ExitCode.INCONCLUSIVE, Verdict.BORROWED: ExitCode.BORROWED_BOUNDS}


def now_iso() -> str:
    """The time now in UTC, to the second, ISO 8601: how every record dates itself, comparable as text."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def save_case_result(result: CaseResult, path: str | Path) -> Path:
    """Write a case result to ``path`` atomically (a reader never sees half of one)."""
    return write_json(path, result.to_dict())


def load_case_result(path: str | Path) -> CaseResult:
    """A case result read back as written; one read from a run directory someone else may have written is
    shape-checked (kit.core.records.resultcheck)."""
    return CaseResult.from_dict(read_json(path))


def gate_verdict(expected: Sequence[str], results: Mapping[str, CaseResult]) -> Verdict:
    """``failed`` when any case failed (that answer stands whatever else happened),
    else ``incomplete`` when a case errored, timed out or is missing, else ``borrowed-bounds`` when a case failed
    only under another class of hardware's bounds, else ``inconclusive``, else ``no-baseline`` when an exact
    case had no golden for its runtime, else ``passed``. Never ``passed`` with a missing or unjudged case."""
    statuses = [results[name].status if name in results else None for name in expected]
    if Status.FAILED in statuses:
        return Verdict.FAILED
    if any(s in (Status.ERROR, Status.TIMEOUT, None) for s in statuses) or not expected:
        return Verdict.INCOMPLETE
    # A case that says it could not see the faults asked of it outranks one with nothing to judge it by: both
    # stop a pin, and the inconclusive one needs a better measurement, not only a golden.
    # A bound crossed under borrowed bounds outranks a case that could not see enough: something did move.
    if Status.BORROWED in statuses:
        return Verdict.BORROWED
    if Status.INCONCLUSIVE in statuses:
        return Verdict.INCONCLUSIVE
    if Status.NO_BASELINE in statuses:
        return Verdict.NO_BASELINE
    assert all(s == Status.PASSED for s in statuses)
    return Verdict.PASSED


def status_counts(expected: Sequence[str], results: Mapping[str, CaseResult]) -> dict[str, int]:
    """How many of the ``expected`` cases ended with each status, a case without a result counted as missing: the
    counts every report and exit code use."""
    counts = {Status.PASSED: 0, Status.FAILED: 0, Status.ERROR: 0, Status.TIMEOUT: 0, Status.NO_BASELINE: 0,
              Status.INCONCLUSIVE: 0, Status.BORROWED: 0, "missing": 0}
    for name in expected:
        counts[results[name].status if name in results else "missing"] += 1
    return counts


def counts_sentence(counts: Mapping[str, int], duration_s: float) -> str:
    """'1 failed, 2 passed in 991 s' (zero counts left out)."""
    words = {Status.FAILED: "failed", Status.ERROR: "errored", Status.TIMEOUT: "timed out", "missing": "missing",
             Status.BORROWED: "failed under borrowed bounds", Status.NO_BASELINE: "without a baseline",
             Status.INCONCLUSIVE: "inconclusive", Status.PASSED: "passed"}
    parts = [f"{counts[k]} {word}" for k, word in words.items() if counts.get(k)]
    return f"{', '.join(parts) or 'no cases'} in {duration_s:.0f} s"


def error_parts(r: CaseResult) -> list[str]:
    """The case's largest error as the console and JUnit say it, and what no number says: prompts whose golden tokens
    the backend left out of its top list, whose error is not a number (never "max error nan")."""
    def finite(p) -> bool:
        return isinstance(p.max_probability_error, (int, float)) and math.isfinite(p.max_probability_error)

    parts = []
    missing = sum(1 for p in r.prompts if p.missing_tokens)
    if missing:
        parts.append(f"{missing} with golden tokens missing from the backend's top list")
    unexplained = sum(1 for p in r.prompts if not finite(p) and not p.missing_tokens)
    if unexplained:
        parts.append(f"{unexplained} with no finite error")
    errors = [p.max_probability_error for p in r.prompts if finite(p)]
    if errors:
        parts.append(f"max error {max(errors):.3g}" + (" of the others" if len(errors) < len(r.prompts) else ""))
    return parts


@dataclass(frozen=True)
class RunView:
    """A finished gate run read back from its directory: manifest and case results."""

    run_dir: Path
    manifest: dict
    results: dict[str, CaseResult]
    sources: dict[str, str]  # per case: "scrap" (from its notebook) or "executor" (its JSON)

    @property
    def expected(self) -> list[str]:
        """The cases the run's manifest says it ran: those a missing result counts against."""
        return list(self.manifest.get("cases", []))

    @property
    def verdict(self) -> str:
        """The run's verdict from its results, as the gate derived it."""
        return gate_verdict(self.expected, self.results)

    @property
    def counts(self) -> dict[str, int]:
        """How many of the run's cases ended with each status."""
        return status_counts(self.expected, self.results)

    @property
    def release(self) -> str | None:
        """The release the run was gated against (None for a run of the descriptor's own kernels)."""
        return (self.manifest.get("release") or {}).get("name")


@dataclass(frozen=True)
class Recorded:
    """What a run's result.json states: the verdict, and each case's status as the gate recorded it (a stopped
    run writes none). A reader compares them with what the case files give (verify, the history)."""

    verdict: str | None
    statuses: dict[str, Any]


@dataclass(frozen=True)
class RunDir:
    """One gate run directory, read through a Store: ``location`` is its folder below the store's root (``""``:
    the root is the run). Each accessor reads one of its files, checked whole, and refuses a damaged one in one
    line naming it; every path is kept inside the store (a case name or a link that leads out is refused)."""

    store: Store
    location: str = ""

    @classmethod
    def local(cls, run_dir: str | Path) -> RunDir:
        """The run directory ``run_dir`` on this machine, its own root (nothing outside it is read)."""
        return cls(local_store(run_dir))

    def rel(self, name: str) -> str:
        """``name`` (a file of the run: ``result.json``, ``cases/x.json``) relative to the store's root."""
        return posixpath.join(self.location, name) if self.location else name

    def where(self, name: str) -> str:
        """A file of the run as messages name it."""
        return self.store.where(self.rel(name))

    def has(self, name: str) -> bool:
        """Whether the run holds the file ``name`` (a link out of the run is refused, not answered)."""
        return self.store.exists(self.rel(name))

    def read_bytes(self, name: str) -> bytes | None:
        """The bytes of the run's file ``name``; None when it has none."""
        return self.store.read_bytes(self.rel(name)) if self.has(name) else None

    def read_json(self, name: str) -> Any:
        """The run's JSON file ``name``, refused in one line naming it when it is not JSON."""
        return self.store.read_json(self.rel(name))

    def manifest_doc(self, where: str | None = None) -> Any:
        """The run's manifest as written, unchecked, for a reader that checks what it takes (``where``: how to
        name it in a message, the file's name when not given)."""
        return parse_json_input(self.store.read_bytes(self.rel(rundir.MANIFEST)), where or self.where(rundir.MANIFEST))

    def manifest(self) -> dict:
        """The run's manifest, checked for what its readers take from it."""
        return checked(self.read_json(rundir.MANIFEST), self.where(rundir.MANIFEST), check_manifest,
                       version_key="kit_version")

    def recorded(self) -> Recorded | None:
        """What the run's result.json states; None when it wrote none (it was stopped). A value that is not a
        verdict or not a table of cases is kept as None or empty: the caller says what it differs from."""
        if not self.has(rundir.RESULT):
            return None
        doc = self.read_json(rundir.RESULT)
        doc = doc if isinstance(doc, dict) else {}
        verdict, cases = doc.get("verdict"), doc.get("cases")
        statuses = {name: entry.get("status") if isinstance(entry, dict) else None
                    for name, entry in (cases.items() if isinstance(cases, dict) else ())}
        return Recorded(verdict if isinstance(verdict, str) else None, statuses)

    def recorded_verdict(self) -> str | None:
        """The verdict the run's result.json states, refused in one line when it states none; None when the run
        wrote no result.json."""
        if not self.has(rundir.RESULT):
            return None
        try:
            return text(mapping(self.read_json(rundir.RESULT), "").get("verdict"), "verdict")
        except Wrong as wrong:
            raise BadInput(f"{self.where(rundir.RESULT)}: malformed run result: {wrong.text}") from None

    def case_name(self, case: str, suffix: str = rundir.CASE_RESULT) -> str:
        """``cases/<case>.json`` of the run (``suffix``: another of the case's files, ``rundir.CASE_EVIDENCE``); a
        case name that leads out of cases/ is refused."""
        return posixpath.join(rundir.CASES, posixpath.basename(rundir.case_member("", case, suffix)))

    def case_doc(self, case: str) -> Any | None:
        """The JSON of ``case``'s result file as recorded, unchecked (a reader that takes only a few fields checks
        those); None when the case wrote none."""
        name = self.case_name(case)
        return self.read_json(name) if self.has(name) else None

    def case_result(self, case: str, kit_version: str | None = None) -> CaseResult | None:
        """``case``'s result, checked whole (``kit_version``: the version the manifest names, for the message);
        None when the case wrote none (it was stopped before it finished)."""
        doc = self.case_doc(case)
        if doc is None:
            return None
        return CaseResult.from_dict(checked(doc, self.where(self.case_name(case)),
                                            lambda d: check_case_result(d, case), kit_version))


def kernel_result(cases_dir: str | Path, case: str, written_since: float | None = None) -> CaseResult | None:
    """The result a kernel the executor started wrote for ``case`` into the run's ``cases_dir``, as written: the
    executor judges it itself (its coverage, its numbers), so only its JSON and fields are read here, and a damaged
    one raises what its reading raises (ValueError, TypeError, KeyError; BadInput where the file cannot be read),
    for the executor to weigh. None when the case wrote none, or (``written_since``, a ``time.time()``) none since
    then: a file an earlier attempt left is not this attempt's verdict. Read through the run's reader, rooted at
    the cases folder the executor holds."""
    cases = RunDir.local(cases_dir)
    name = posixpath.basename(rundir.case_member("", case))
    if not cases.has(name):
        return None
    if written_since is not None and os.stat(cases.store.path(name)).st_mtime < written_since:
        return None
    return CaseResult.from_dict(json.loads(cases.store.read_bytes(name).decode("utf-8")))


def read_run(run_dir: str | Path) -> RunView:
    """A run from the case results the executor wrote (no notebook parsing). A record that is damaged, or
    that an older kit wrote without what this one reads, is refused in one line naming its file and key."""
    run_dir = Path(run_dir)
    run = RunDir.local(run_dir)
    manifest = run.manifest()
    results = {}
    for name in manifest["cases"]:
        result = run.case_result(name, manifest.get("kit_version"))
        if result is not None:
            results[name] = result
    return RunView(run_dir, manifest, results, {name: "executor" for name in results})
