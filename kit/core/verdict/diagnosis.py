"""Control against candidate: whose fault is a failing gate (docs/architecture.md, Diagnosis).

A failure only the candidate shows is a regression. A failure today's pin
reproduces with the same metrics is a baseline blocker: the golden or the oracle
is broken, and no candidate can qualify until it is repaired. "The same metrics"
means equal within the noise the case's calibration record or its repeats measured
(the larger), and bit for bit where nothing measured one.

Every case is also compared prompt by prompt (kit.core.verdict.paired: the candidate's error minus the pin's, a
paired test near-tie aware), and every diagnosis states that effect and its interval. Where both releases
fail the same cases with metrics equal within the noise, the paired test has the last word: a candidate
whose error is above the pin's beyond chance (the interval entirely above 0) is not the pin's failure
reproduced but both broken, the candidate worse still (docs/architecture.md, Diagnosis, says why not a
regression).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Sequence, TypeGuard

from kit.core.records import paths
from kit.core.exitcodes import ExitCode
from kit.core.verdict.paired import PairedResult
from kit.core.verdict.paired import compare as compare_paired
from kit.core.noise.power import clean_error
from kit.core.records.records import CaseResult, DecodeScore, PromptScore, Status, known_fields
from kit.core.records.results import RunView


class ControlVerdict(StrEnum):
    """A control's verdict on the candidate against today's pin, as control.json (and a refresh's record) keep it."""
    QUALIFIED = "qualified"
    REGRESSION = "regression"
    BLOCKER = "baseline-blocker"
    BOTH_BROKEN = "both-broken"
    INCOMPLETE = "incomplete"


# Both-broken also refuses the candidate first for the baseline's sake: the pin must be repaired
# before the candidate's own failures can be judged against it.
DIAGNOSIS_EXIT_CODES = {ControlVerdict.QUALIFIED: ExitCode.PASSED, ControlVerdict.REGRESSION: ExitCode.FAILED,
                        ControlVerdict.INCOMPLETE: ExitCode.INCOMPLETE, ControlVerdict.BLOCKER: ExitCode.BLOCKER,
                        ControlVerdict.BOTH_BROKEN: ExitCode.BLOCKER}
HEADLINES = {ControlVerdict.QUALIFIED: "qualified", ControlVerdict.REGRESSION: "regression in the candidate",
             ControlVerdict.BLOCKER: "baseline blocker", ControlVerdict.BOTH_BROKEN: "both broken",
             ControlVerdict.INCOMPLETE: "incomplete"}


class NoiseSource(StrEnum):
    """What set a case's noise floor (``CaseComparison.noise_source``), as control.json spells it: the calibration
    record's noise, or this run's repeats."""
    CALIBRATION = "calibration"
    REPEATS = "repeats"


@dataclass(frozen=True)
class CaseComparison:
    """One case under both releases, side by side."""

    case: str
    backend: str | None
    control_status: str
    candidate_status: str
    control_error: float | None
    candidate_error: float | None
    bound: float | None
    noise_floor: float
    same_metrics: bool | None  # None when either side has no metrics to compare
    # What set noise_floor: a NoiseSource (this run's spread, or the calibration record's), or "" (none: bit for
    # bit). A str: a comparison read back from control.json holds the word.
    noise_source: str = ""
    control_failed: list[str] = field(default_factory=list)
    candidate_failed: list[str] = field(default_factory=list)
    # The prompt-by-prompt comparison (kit.core.verdict.paired); None where either side has no prompts scored.
    paired: PairedResult | None = None

    @property
    def paired_text(self) -> str:
        """The paired effect in a few words, or why there is none."""
        if self.paired is not None:
            return self.paired.text
        return "not paired: " + ("a side has no result" if "missing" in (self.control_status, self.candidate_status)
                                 else "a side scored no prompts")

    @property
    def line(self) -> str:
        """The case's line of the diagnosis: both statuses and the paired effect."""
        return f"`{self.case}` ({self.control_status} in the pin, {self.candidate_status} in the candidate): " \
               f"{self.paired_text}"

    @property
    def delta(self) -> float | None:
        """The candidate's error less the pin's, where both are numbers: the change a reader weighs against
        the noise."""
        if _num(self.control_error) and _num(self.candidate_error):
            return self.candidate_error - self.control_error
        return None

    def to_dict(self) -> dict:
        """The row as control.json holds it, with its delta and its paired comparison's words."""
        return {**asdict(self), "delta": self.delta, "paired_text": self.paired_text}

    @classmethod
    def from_dict(cls, d: dict) -> "CaseComparison":
        """A row read back from control.json, its paired comparison with it."""
        kw = known_fields(cls, d)
        if kw.get("paired") is not None:
            kw["paired"] = PairedResult.from_dict(kw["paired"])
        return cls(**kw)


@dataclass(frozen=True)
class Diagnosis:
    verdict: ControlVerdict
    reason: str
    current: str
    candidate: str
    rows: list[CaseComparison]
    control_failures: list[str] = field(default_factory=list)
    candidate_failures: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The control's exit code for its verdict, so CI reads whose fault it is without parsing a line."""
        return DIAGNOSIS_EXIT_CODES[self.verdict]

    @property
    def qualified(self) -> bool:
        """Whether the candidate may be pinned: the verdict is qualified."""
        return self.verdict == ControlVerdict.QUALIFIED

    @property
    def failure_messages(self) -> list[str]:
        """One line per reason the candidate is not qualified."""
        if self.qualified:
            return []
        lines = list(self.incomplete)
        lines += [f"{self.current} (control): {c} failed" for c in self.control_failures]
        lines += [f"{self.candidate} (candidate): {c} failed" for c in self.candidate_failures]
        return lines or [self.reason]

    @property
    def case_lines(self) -> list[str]:
        """One line per case: its statuses and the paired effect of the candidate against the pin."""
        return [r.line for r in self.rows]

    @property
    def worse_still(self) -> list[CaseComparison]:
        """The cases both releases fail on which the candidate's error is above the pin's beyond chance."""
        return [r for r in self.rows if r.case in self.control_failures and r.case in self.candidate_failures
                and r.paired is not None and r.paired.worse]

    def to_dict(self) -> dict:
        """The diagnosis as control.json holds it, with its exit code."""
        d = asdict(self)
        d["rows"] = [r.to_dict() for r in self.rows]
        d["exit_code"] = self.exit_code
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Diagnosis":
        """A diagnosis read back from control.json."""
        rows = [CaseComparison.from_dict(r) for r in d["rows"]]
        return cls(**{**known_fields(cls, d), "rows": rows})


def diagnose(control: RunView, candidate: RunView) -> Diagnosis:
    """Whose fault a failing candidate is: each case of the two runs compared (its noise, its paired effect),
    then the control's verdict (qualified, regression, not-a-regression, blocker, incomplete) from those rows."""
    current_name = control.release or "control"
    candidate_name = candidate.release or "candidate"
    names = list(dict.fromkeys([*control.expected, *candidate.expected]))
    rows = [compare_case(n, control.results.get(n), candidate.results.get(n)) for n in names]

    incomplete = [line for label, view in ((current_name, control), (candidate_name, candidate))
                  for line in _incomplete_lines(label, view)]
    control_failed = [r.case for r in rows if r.control_status == Status.FAILED]
    candidate_failed = [r.case for r in rows if r.candidate_status == Status.FAILED]
    d = Diagnosis(ControlVerdict.INCOMPLETE, "", current_name, candidate_name, rows, control_failed, candidate_failed,
                  incomplete)
    verdict, reason = _verdict(d)  # judged from the rows alone: the verdict and reason are not among them
    return dataclasses.replace(d, verdict=verdict, reason=reason)


def compare_case(name: str, control: CaseResult | None, candidate: CaseResult | None) -> CaseComparison:
    """One case of a control: its error under each release against the noise its records or repeats measured,
    and, where both scored the same prompts, their paired comparison."""
    repeats = max(_noise_floor(control), _noise_floor(candidate))
    calibrated = max(_calibrated(control), _calibrated(candidate))
    noise = max(repeats, calibrated)
    source = "" if noise == 0 else NoiseSource.CALIBRATION if calibrated >= repeats else NoiseSource.REPEATS
    same = None
    paired = None
    if control is not None and candidate is not None and control.prompts and candidate.prompts:
        same = metrics_equal(control.prompts, candidate.prompts, noise) and decode_equal(control.decode,
                                                                                         candidate.decode, noise)
        paired = compare_paired(control.prompts, candidate.prompts, _clean_error(control) or _clean_error(candidate))
    ref = control or candidate
    return CaseComparison(
        case=name, backend=ref.backend if ref else None,
        control_status=control.status if control else "missing",
        candidate_status=candidate.status if candidate else "missing",
        control_error=control.max_probability_error if control else None,
        candidate_error=candidate.max_probability_error if candidate else None,
        bound=(control.bound if control and control.bound is not None else candidate.bound if candidate else None),
        noise_floor=noise, same_metrics=same, noise_source=source,
        control_failed=_failed_prompts(control), candidate_failed=_failed_prompts(candidate), paired=paired,
    )


def metrics_equal(a: Sequence[PromptScore], b: Sequence[PromptScore], noise: float) -> bool:
    """The same prompts, the same verdict on each, and every metric within ``noise`` (exact at 0)."""
    if [p.id for p in a] != [p.id for p in b]:
        return False
    for x, y in zip(a, b):
        if x.passed != y.passed:
            return False
        if noise == 0 and (x.backend_top != y.backend_top or x.failures != y.failures):
            return False
        for metric in ("max_probability_error", "top_probability_l1_error"):
            u, v = getattr(x, metric), getattr(y, metric)
            if not (_num(u) and _num(v)):
                if _num(u) or _num(v):  # one finite, one not: not the same failure
                    return False
                continue
            if abs(u - v) > noise:
                return False
    return True


def decode_equal(a: Sequence[DecodeScore], b: Sequence[DecodeScore], noise: float) -> bool:
    """The same decode checks: the same prompts, each diverging at the same step between the same tokens and
    judged the same way, the largest step error within ``noise`` (exact at 0)."""
    if [d.id for d in a] != [d.id for d in b]:
        return False
    for x, y in zip(a, b):
        if (x.passed, x.compared, x.diverged_at, x.golden_token, x.backend_token, x.accepted) != (
                y.passed, y.compared, y.diverged_at, y.golden_token, y.backend_token, y.accepted):
            return False
        u, v = x.max_probability_error, y.max_probability_error
        if _num(u) and _num(v):
            if abs(u - v) > noise:
                return False
        elif _num(u) or _num(v):
            return False
    return True


def _failed_prompts(result: CaseResult | None) -> list[str]:
    """The prompts a case failed on: its first token, or its decode check."""
    if result is None:
        return []
    failed = [p.id for p in result.prompts if not p.passed]
    return failed + [d.id for d in result.decode if not d.passed and d.id not in failed]


def _verdict(d: Diagnosis) -> tuple[ControlVerdict, str]:
    cur, cand = f"today's pin `{d.current}`", f"the candidate `{d.candidate}`"
    if d.incomplete:
        return ControlVerdict.INCOMPLETE, f"the gate did not finish: {'; '.join(d.incomplete)}"
    ctl, new = d.control_failures, d.candidate_failures
    if not ctl and not new:
        return ControlVerdict.QUALIFIED, f"{cand} passes all {len(d.rows)} cases, and so does {cur}"
    if not ctl:
        return ControlVerdict.REGRESSION, (f"{cand} fails {_names(new)}, which {cur} passes: "
                                           "a regression in the candidate")
    if not new:
        return ControlVerdict.BLOCKER, (f"{cur} fails {_names(ctl)} while {cand} passes: the control is broken, "
                                        "and the candidate alone cannot establish qualification")
    worse = d.worse_still
    if worse:
        both = (f"both releases fail {_names(ctl)}" if set(ctl) == set(new) else
                f"both releases fail, differently: {cur} fails {_names(ctl)}, {cand} fails {_names(new)}")
        effects = "; ".join(f"on `{r.case}` the {r.paired_text}" for r in worse if r.paired is not None)
        return ControlVerdict.BOTH_BROKEN, (f"{both}, and {cand} is worse still: {effects}; "
                                            "repair the baseline first, then judge the candidate")
    same = set(ctl) == set(new) and all(r.same_metrics for r in d.rows if r.case in ctl)
    if same:
        return ControlVerdict.BLOCKER, (f"{cur} reproduces the candidate's failure of {_names(ctl)} with "
                                        f"{sameness(d)}: the golden or the oracle is broken; "
                                        "repair it before any candidate can qualify")
    return ControlVerdict.BOTH_BROKEN, (f"both releases fail, differently: {cur} fails {_names(ctl)}, "
                                        f"{cand} fails {_names(new)}; "
                                        "repair the baseline first, then judge the candidate")


def sameness(d: Diagnosis) -> str:
    """How the pin's failures matched the candidate's: bit for bit, or within the largest noise floor the
    failing cases' repeats measured (the evidence must not call the latter identical)."""
    rows = [r for r in d.rows if r.case in d.control_failures]
    worst = max(rows, key=lambda r: r.noise_floor, default=None)
    if worst is None or not worst.noise_floor:
        return "identical metrics"
    how = "calibrated" if worst.noise_source == NoiseSource.CALIBRATION else "measured"
    return f"metrics equal within the {how} noise ({worst.noise_floor:.3g})"


def _incomplete_lines(label: str, view: RunView) -> list[str]:
    lines = []
    for name in view.expected:
        r = view.results.get(name)
        if r is None:
            lines.append(f"{label}: case {name} is missing (no result was recorded)")
        elif r.status in (Status.ERROR, Status.TIMEOUT):
            where = f"partial notebook {paths.display(r.notebook)}" if r.notebook else "no notebook was kept"
            what = "timed out" if r.status == Status.TIMEOUT else "errored"
            lines.append(f"{label}: case {name} {what}; {where}")
        elif r.status == Status.NO_BASELINE:  # nothing judged it here, so nothing can be compared
            lines.append(f"{label}: case {name}: {r.error}")
        elif r.status == Status.INCONCLUSIVE:  # within its bounds, but it could not have seen what was asked: no pass
            lines.append(f"{label}: case {name} is inconclusive: {r.error}")
        elif r.status == Status.BORROWED:  # judged by another class of hardware's noise: this host's is not known
            lines.append(f"{label}: case {name}: {r.error}")
    return lines


def _noise_floor(result: CaseResult | None) -> float:
    """The largest probability spread the case's repeats measured; 0 (bit for bit) without repeats."""
    value = result.noise_floor if result is not None else None
    return float(value) if _num(value) else 0.0


def _calibrated(result: CaseResult | None) -> float:
    """The noise the case's calibration record measured (its largest per-prompt range); 0 without one."""
    value = result.calibrated_noise if result is not None else None
    return float(value) if _num(value) else 0.0


def _clean_error(result: CaseResult | None) -> float | None:
    """The clean error the case's calibration record measured (kit.core.noise.power's definition); None without one."""
    source = result.bound_source if result is not None else None
    if not source or not source.get("buckets"):
        return None
    try:
        value = clean_error(source)
    except (KeyError, TypeError, ValueError):  # a record written before buckets carried "largest"
        return None
    return float(value) if _num(value) and value > 0 else None


def _names(cases: Sequence[str]) -> str:
    return ", ".join(f"`{c}`" for c in cases)


def _num(x: object) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not math.isnan(x)

