"""What a run's reader does next: each case that did not pass, the kind of thing that happened to it, and the one
command that moves it on.

A verdict alone ("failed", "incomplete") sends a reader to the bottom of the page for the why and to the docs for
the what-now. The kinds a reader acts on differ: a **numeric** failure is a question for a control (is it the
candidate, or a stale golden?), **no baseline** is a baseline to make on this machine, **infrastructure** is a run
to resume, **borrowed bounds** is this machine's own record to measure, **inconclusive** is power to measure. Each
comes from typed fields of the case result (its status, its triage class, its remedy), never from its words, so
the summary's first screen and evidence.md say the same thing. Stdlib only.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import StrEnum
from typing import Mapping, Sequence

from kit.core.verdict import triage
from kit.core.records.records import CaseResult, Status

class NextKind(StrEnum):
    """What kind of thing happened to a case that did not pass, as a next step names it; in the order a reader
    meets them: what blocks a pin first."""

    NUMERIC = "numeric"
    NEAR_TIE = "near-tie"
    CASE_ERROR = "case error"
    INFRASTRUCTURE = "infrastructure"
    MISSING = "missing"
    BORROWED_KIND = "borrowed bounds"
    INCONCLUSIVE_KIND = "inconclusive"
    NO_BASELINE_KIND = "no baseline"


ORDER: list[str] = list(NextKind)



@dataclass(frozen=True)
class NextStep:
    """One case that did not pass: what kind of thing happened, in a few words why, and the command to run next."""

    case: str
    kind: str  # a NextKind's word
    why: str
    command: str | None


def next_kind_of(result: CaseResult | None) -> str | None:
    """The kind a reader acts on for a case result; None for a passed case."""
    if result is None:
        return NextKind.MISSING
    if result.status == Status.PASSED:
        return None
    classed = (result.triage or {}).get("class")
    if result.status == Status.FAILED:
        return NextKind.NEAR_TIE if classed == triage.TriageClass.NEAR_TIE else NextKind.NUMERIC
    if result.status in (Status.ERROR, Status.TIMEOUT):
        job = classed == triage.TriageClass.INFRASTRUCTURE or result.status == Status.TIMEOUT
        return NextKind.INFRASTRUCTURE if job else NextKind.CASE_ERROR
    unjudged: dict[str, NextKind] = {Status.NO_BASELINE: NextKind.NO_BASELINE_KIND,
                                     Status.BORROWED: NextKind.BORROWED_KIND,
                                     Status.INCONCLUSIVE: NextKind.INCONCLUSIVE_KIND}
    return unjudged.get(result.status, NextKind.CASE_ERROR)


def next_steps(expected: Sequence[str], results: Mapping[str, CaseResult], descriptor: str,
               run_dir: str) -> list[NextStep]:
    """One step per case of ``expected`` that did not pass, in ORDER, then the cases' own order; ``descriptor`` and
    ``run_dir`` as the commands should name them."""
    steps = []
    for name in expected:
        r = results.get(name)
        kind = next_kind_of(r)
        if kind is None:
            continue
        steps.append(NextStep(name, kind, _why(kind, r), _command(kind, name, r, descriptor, run_dir)))
    return sorted(steps, key=lambda s: ORDER.index(s.kind))


def _why(kind: str, r: CaseResult | None) -> str:
    if r is None:
        return "no result was recorded"
    if kind in (NextKind.NUMERIC, NextKind.NEAR_TIE):
        failed = sum(1 for p in r.prompts if not p.passed)
        decode = sum(1 for d in r.decode if not d.passed)
        said = [f"{failed} of {len(r.prompts)} prompts outside their bounds" if failed else "",
                f"{decode} decode continuation(s) failed" if decode else "",
                "its drift test failed" if r.drift and not r.drift.get("passed") else ""]
        return "; ".join(s for s in said if s) or "failed as a whole (its repeats or its coverage)"
    if kind == NextKind.INFRASTRUCTURE:
        return f"{r.status}: {(r.triage or {}).get('evidence') or r.error or ''}".rstrip(": ")
    return r.error or r.status


def _command(kind: str, case: str, r: CaseResult | None, descriptor: str, run_dir: str) -> str | None:
    quoted = shlex.quote(descriptor) if descriptor else "DESCRIPTOR"
    if kind in (NextKind.NUMERIC, NextKind.NEAR_TIE):
        # Whose fault is it: the same command against today's pin tells a regression from a stale golden.
        return f"parity-kit control {quoted} --case {shlex.quote(case)}"
    if kind in (NextKind.INFRASTRUCTURE, NextKind.MISSING):
        return f"parity-kit gate {quoted} --resume {shlex.quote(run_dir)}"
    if kind == NextKind.INCONCLUSIVE_KIND:
        return f"parity-kit power {quoted} --case {shlex.quote(case)}"
    return r.remedy if r is not None else None


def one_command(steps: Sequence[NextStep], descriptor: str) -> str | None:
    """Where several cases lack a baseline here, the one `baseline make` that makes them all (its --case-less
    form makes every missing record of the descriptor); None where there are fewer than two."""
    missing = [s for s in steps if s.kind in (NextKind.NO_BASELINE_KIND, NextKind.BORROWED_KIND) and s.command
               and s.command.startswith("parity-kit baseline make ")]
    if len(missing) < 2:
        return None
    return f"parity-kit baseline make {shlex.quote(descriptor) if descriptor else 'DESCRIPTOR'} --reason \"...\""
