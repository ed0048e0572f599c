"""Case results on disk and the gate verdict derived from them."""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from kit.core.records import rundir
from kit.core.exitcodes import ExitCode
from kit.core.records.jsonio import read_json, write_json
from kit.core.records.records import BORROWED, ERROR, FAILED, INCONCLUSIVE, NO_BASELINE, PASSED, TIMEOUT, CaseResult
from kit.core.records.resultcheck import check_case_result, check_manifest, read_checked

GATE_PASSED, GATE_FAILED, GATE_INCOMPLETE = "passed", "failed", "incomplete"
GATE_NO_BASELINE = "no-baseline"  # every case that ran passed, and some exact case had nothing to judge it by
# Nothing failed or went missing, but some case could not have seen a fault as small as the descriptor asks.
GATE_INCONCLUSIVE = "inconclusive"
# Nothing failed or went missing, but some case failed under another class of hardware's bounds by no more than
# classes differ (kit.core.verdict.borrowed): the host needs its own measurement before anything is claimed.
GATE_BORROWED = "borrowed-bounds"
# What `parity-kit gate` exits with for each gate verdict.
GATE_EXIT_CODES = {GATE_PASSED: ExitCode.PASSED, GATE_FAILED: ExitCode.FAILED, GATE_INCOMPLETE: ExitCode.INCOMPLETE,
                   GATE_NO_BASELINE: ExitCode.NO_BASELINE, GATE_INCONCLUSIVE: ExitCode.INCONCLUSIVE,
                   GATE_BORROWED: ExitCode.BORROWED_BOUNDS}


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


def gate_verdict(expected: Sequence[str], results: Mapping[str, CaseResult]) -> str:
    """``failed`` when any case failed (that answer stands whatever else happened),
    else ``incomplete`` when a case errored, timed out or is missing, else ``borrowed-bounds`` when a case failed
    only under another class of hardware's bounds, else ``inconclusive``, else ``no-baseline`` when an exact
    case had no golden for its runtime, else ``passed``. Never ``passed`` with a missing or unjudged case."""
    statuses = [results[name].status if name in results else None for name in expected]
    if FAILED in statuses:
        return GATE_FAILED
    if any(s in (ERROR, TIMEOUT, None) for s in statuses) or not expected:
        return GATE_INCOMPLETE
    # A case that says it could not see the faults asked of it outranks one with nothing to judge it by: both
    # stop a pin, and the inconclusive one needs a better measurement, not only a golden.
    # A bound crossed under borrowed bounds outranks a case that could not see enough: something did move.
    if BORROWED in statuses:
        return GATE_BORROWED
    if INCONCLUSIVE in statuses:
        return GATE_INCONCLUSIVE
    if NO_BASELINE in statuses:
        return GATE_NO_BASELINE
    assert all(s == PASSED for s in statuses)
    return GATE_PASSED


def status_counts(expected: Sequence[str], results: Mapping[str, CaseResult]) -> dict[str, int]:
    """How many of the ``expected`` cases ended with each status, a case without a result counted as missing: the
    counts every report and exit code use."""
    counts = {PASSED: 0, FAILED: 0, ERROR: 0, TIMEOUT: 0, NO_BASELINE: 0, INCONCLUSIVE: 0, BORROWED: 0, "missing": 0}
    for name in expected:
        counts[results[name].status if name in results else "missing"] += 1
    return counts


def counts_sentence(counts: Mapping[str, int], duration_s: float) -> str:
    """'1 failed, 2 passed in 991 s' (zero counts left out)."""
    words = {FAILED: "failed", ERROR: "errored", TIMEOUT: "timed out", "missing": "missing",
             BORROWED: "failed under borrowed bounds", NO_BASELINE: "without a baseline",
             INCONCLUSIVE: "inconclusive", PASSED: "passed"}
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


def read_run(run_dir: str | Path) -> RunView:
    """A run from the case results the executor wrote (no notebook parsing). A record that is damaged, or
    that an older kit wrote without what this one reads, is refused in one line naming its file and key."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir / rundir.MANIFEST)
    results = {}
    for name in manifest["cases"]:
        path = recorded_result(run_dir, name)
        if path is not None:
            results[name] = read_case_result(path, name, manifest.get("kit_version"))
    return RunView(run_dir, manifest, results, {name: "executor" for name in results})


def recorded_result(run_dir: Path, case: str) -> Path | None:
    """The file of the result the executor recorded for ``case`` (``cases/<case>.json``), None when there is none
    yet; a name or a link that leads out of ``run_dir`` is refused (kit.core.records.rundir)."""
    path = rundir.case_file(run_dir / rundir.CASES, case)
    if not path.is_file():
        return None
    rundir.inside(path, run_dir, "case result")
    return path


def read_manifest(path: Path) -> dict:
    """A gate run's manifest, checked for what its readers take from it."""
    return read_checked(path, check_manifest, version_key="kit_version")


def read_case_result(path: Path, case: str, kit_version: str | None = None) -> CaseResult:
    """The result of ``case`` in ``path``, checked whole before any of it is used (``kit_version``: the
    version the run's manifest names, for the message when it is not this kit's)."""
    return CaseResult.from_dict(read_checked(path, lambda doc: check_case_result(doc, case), kit_version))
