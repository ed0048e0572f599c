"""What a case result must cover before its verdict counts.

A case notebook is code, and a backend is code: either can write or return less than it was asked
for. A result that says ``passed`` over no prompts, half of them, or another case's inputs must not
pass the gate. The executor holds every verdict to what it asked for (``Expected``); the kernel holds
each backend's observations to the prompts it gave it (``prompt_mismatch``). Stdlib only: both sides
import it, Levanter's kernel included.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from kit.core.records.records import CaseResult, Status
from kit.core.rules import rules
from kit.core.rules.failure import texts

SHOWN = 3  # ids named in a message; the rest are counted


@dataclass(frozen=True)
class Expected:
    """What the executor asked one case for: a verdict on exactly these prompts, for these inputs."""

    case: str
    backend: str
    prompt_ids: tuple[str, ...]
    inputs_digest: str
    # Each prompt's bound as the case sets it (None: exact, or no bound), by the bucket the fixture gives it;
    # None: the verdict is not judged again (``rejudged``).
    bounds: Mapping[str, float | None] | None = None
    exact: bool = False

    def to_dict(self) -> dict:
        """What a case must cover, as the run's manifest records it: the verdict is judged against this, not
        against what the case says of itself."""
        return {"case": self.case, "backend": self.backend, "prompt_ids": list(self.prompt_ids),
                "inputs_digest": self.inputs_digest, "bounds": None if self.bounds is None else dict(self.bounds),
                "exact": self.exact}

    @classmethod
    def from_dict(cls, d: dict) -> "Expected":
        """What a case must cover, read back from a manifest."""
        return cls(d["case"], d["backend"], tuple(d["prompt_ids"]), d["inputs_digest"], d.get("bounds"),
                   bool(d.get("exact", False)))


def some(ids: Sequence[str]) -> str:
    """'a, b, c, ... (+61)': the first few ids and how many more."""
    shown = ", ".join(ids[:SHOWN])
    return f"{shown}, ... (+{len(ids) - SHOWN})" if len(ids) > SHOWN else shown


def prompt_mismatch(expected: Sequence[str], got: Iterable[str]) -> str | None:
    """What is missing, extra or duplicated among ``got`` against ``expected`` (order aside); None if
    they are the same ids once each."""
    got = list(got)
    counts = Counter(got)
    wanted = set(expected)
    missing = [i for i in expected if i not in counts]
    extra = list(dict.fromkeys(i for i in got if i not in wanted))
    twice = list(dict.fromkeys(i for i in got if i in wanted and counts[i] > 1))
    parts = ([f"missing {some(missing)}"] if missing else []) + ([f"extra {some(extra)}"] if extra else []) + \
        ([f"more than once {some(twice)}"] if twice else [])
    return "; ".join(parts) or None


class Uncovered(enum.StrEnum):
    """What a result fails to cover of what was asked: what a reader decides by, never the problem's words."""

    CASE = "another case"
    BACKEND = "another backend"
    PROMPTS = "other prompts"
    INPUTS = "other inputs"
    PASSED_WITH_FAILURES = "passed with failures"
    FAILED_WITHOUT_FAILURE = "failed without a failure"


@dataclass(frozen=True)
class CoverageProblem:
    """Why a result is not a verdict on what was asked: its ``kind``, and ``text``, one line for a person."""

    kind: Uncovered
    text: str

    def __str__(self) -> str:
        return self.text


def coverage_problem(result: CaseResult, expected: Expected) -> CoverageProblem | None:
    """Why ``result`` is not a verdict on what was asked (a typed problem), or None when it is.

    Only a verdict (passed, failed) is held to this; an error or timeout claims nothing."""
    if result.status not in (Status.PASSED, Status.FAILED):
        return None
    where = f"case {expected.case}"
    if result.case != expected.case:
        return CoverageProblem(Uncovered.CASE, f"{where}: result is for case {result.case!r}")
    if result.backend != expected.backend:
        return CoverageProblem(Uncovered.BACKEND,
                               f"{where}: result is from backend {result.backend!r}, not {expected.backend!r}")
    got = [p.id for p in result.prompts]
    wrong = prompt_mismatch(expected.prompt_ids, got)
    if wrong:
        covered = len(set(got) & set(expected.prompt_ids))
        return CoverageProblem(Uncovered.PROMPTS, f"{where}: result covers {covered} of {len(expected.prompt_ids)} "
                                                  f"prompts; {wrong}")
    if result.inputs_digest != expected.inputs_digest:
        return CoverageProblem(Uncovered.INPUTS, f"{where}: result was computed for other inputs (inputs digest "
                                                 f"{str(result.inputs_digest)[:12]}, expected "
                                                 f"{expected.inputs_digest[:12]})")
    failed = [p.id for p in result.prompts if not p.passed]
    if result.status == Status.PASSED and (failed or result.failures):
        return CoverageProblem(Uncovered.PASSED_WITH_FAILURES, f"{where}: result says passed but lists failures "
                                                               f"({some(failed) or result.failures[0]})")
    if result.status == Status.FAILED and not (failed or result.failures):
        return CoverageProblem(Uncovered.FAILED_WITHOUT_FAILURE, f"{where}: result says failed but lists no failure")
    return None


def rejudged(result: CaseResult, expected: Expected) -> CaseResult:
    """``result`` judged again from its own numbers under the case's bounds: a case notebook is code, and
    one (a trusted custom notebook, a broken one) may say passed over a prompt whose recorded error is
    above its bound. Each prompt's pass is re-derived by the first token's rules (kit.core.rules.rules) from
    the metrics the result records; one that fails makes the case failed, saying that the notebook's
    verdict disagreed with its own numbers. A verdict of failed is left as it is: it claims nothing."""
    if result.status != Status.PASSED or expected.bounds is None:
        return result
    prompts, found = [], []
    for p in result.prompts:
        bound = expected.bounds.get(p.id)
        failure = rules.recorded(p, bound, expected.exact)
        if failure is None:
            prompts.append(p)
            continue
        found.append(failure)
        prompts.append(dataclasses.replace(p, passed=False, bound=bound, failures=[*p.failures, failure.text],
                                           typed_failures=[*p.typed_failures, failure]))
    if not found:
        return result
    return dataclasses.replace(result, status=Status.FAILED, prompts=prompts, failures=[*result.failures,
                                                                                        *texts(found)],
                               typed_failures=[*result.typed_failures, *found])
