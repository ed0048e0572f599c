"""The gate's false-failure rate: stated for the whole gate, split over its drift tests, and measured.

A gate fails when any of its cases fails, so what a release owner meets is the gate's rate, not a case's: with a
0.1 % drift test in each of k cases, a clean release fails the gate up to k x 0.1 % of the time. The rate that
is controlled is therefore the family-wise one, the chance that a clean run fails the gate anywhere.

The rule is Bonferroni: the gate's rate ``q`` is split evenly over the descriptor's k cases that carry a drift
test, each testing at q / k. It holds under any dependence between the tests, and these are dependent: every
case scores the same model on the same prompts, and two cases of one backend share its kernels. Holm's step-down
rule would give the same bound only to a gate that orders its p-values at the end (a case's verdict would then
depend on the other cases of the run, and a ``--case`` subset would judge a case otherwise than the full run);
Benjamini-Hochberg controls the expected share of false failures among the failures, which is the wrong error
for a gate: a clean release failed once is a false alarm whatever else failed, and a gate that cries wolf is
not believed. k counts the descriptor's cases, not a run's selection, so a case is judged with one alpha
whichever cases run beside it.

What a case's per-prompt bounds do is not a probability statement: the bound rule (kit.core.noise.calibration) adds a
margin from the measured spread, not a quantile. Their false-failure rate is measured instead: each clean
variant of a record left out in turn, against the bounds the others give (``bounds_left_out``), and the clean
runs of the slow trust tests (``gate_level``), whose upper bound is Clopper-Pearson's exact binomial one.

Stdlib only, like the rest of kit.core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from kit.core.noise import special
from kit.core.rules import rules
from kit.core.noise.calibration import (DRIFT_ALPHA, MIN_SAMPLES, CalibrationRecord, bucket_bounds, distinct,
                                        prompt_ranges)

# Without a stated rate, each drift test keeps the 0.1 % its record was reviewed with (DRIFT_ALPHA), until the
# gate's sum would pass 1 %: a descriptor of more than ten drift cases splits the 1 % instead.
DEFAULT_CAP = 0.01
# The largest rate a descriptor may state: a gate that fails a clean release as often as not says nothing.
MAX_RATE = 0.5
RULE = "Bonferroni"


def default_rate(drift_cases: int) -> float:
    """The gate's rate where the descriptor states none (see DEFAULT_CAP)."""
    return min(drift_cases * DRIFT_ALPHA, DEFAULT_CAP)


@dataclass(frozen=True)
class Budget:
    """The gate's false-failure rate and its split over the descriptor's drift tests."""

    rate: float  # the gate's family-wise rate over its drift tests
    cases: tuple[str, ...]  # the descriptor's cases that carry a drift test
    stated: bool  # set by ``[defaults] false_failure_rate``, not the default

    @property
    def per_case(self) -> float:
        """Each drift test's alpha: the gate's rate split evenly (Bonferroni)."""
        return self.rate / len(self.cases) if self.cases else 0.0

    def to_dict(self) -> dict:
        """The budget as result.json and the manifest state it, with the rule that split it."""
        return {"rate": self.rate, "per_case": self.per_case, "cases": list(self.cases), "rule": RULE,
                "stated": self.stated}


def budget(rate: float | None, drift_cases: Sequence[str]) -> Budget:
    """The budget of a descriptor stating ``rate`` (None: the default) over its ``drift_cases``."""
    cases = tuple(drift_cases)
    if rate is None:
        return Budget(default_rate(len(cases)) if cases else 0.0, cases, False)
    return Budget(float(rate), cases, True)


def left_out(record: CalibrationRecord) -> list[list[tuple[str, int, float, float]]]:
    """Each distinct clean sample of ``record``, left out in turn: its prompts' (id, bucket, error, bound), each
    bound the one the others give its bucket by the record's rule. A sample whose others are too few for the rule
    is not tried."""
    unique = distinct(record.samples)
    buckets = {p: v["bucket"] for p, v in record.prompts.items()}
    dtype = record.noise_class.get("dtype", "bfloat16")
    out = []
    for i, s in enumerate(unique):
        others = unique[:i] + unique[i + 1:]
        if len(others) < MIN_SAMPLES:
            continue
        bounds = bucket_bounds(prompt_ranges(others, buckets), len(others), dtype, record.rule["name"])
        out.append([(p, b, s.errors[p], bounds[str(b)]["bound"]) for p, b in buckets.items()])
    return out


def bounds_left_out(records: Sequence[CalibrationRecord]) -> tuple[int, int]:
    """``(failed, tried)``: how many of the records' clean variants, each left out in turn, some prompt's bound
    of the others would fail, of how many tried: the per-prompt bounds' measured false failures. Each prompt is
    judged as the gate judges a recorded error (``rules.judged_error``: past its bound by ``rules.past``, or
    unscorable), so a change to the bound rule moves this figure with the verdict."""
    tried = [sample for record in records for sample in left_out(record)]
    failed = sum(any(rules.judged_error(p, b, err, bound) is not None for p, b, err, bound in sample)
                 for sample in tried)
    return failed, len(tried)


def percent(p: float) -> str:
    """A rate as a reader takes it in: 0.004 -> "0.4 %", 0.00025 -> "0.025 %"."""
    return f"{p * 100:.2g} %"


def statement(b: Budget, left_out: tuple[int, int] | None = None) -> str:
    """The one line a run states its false-failure rate in (result.json, evidence.md, the summary)."""
    if b.cases:
        drift = (f"at most {percent(b.rate)} for the gate (drift tests: {percent(b.per_case)} for each of "
                 f"{len(b.cases)} case{'s' if len(b.cases) != 1 else ''}, {RULE}"
                 f"{'' if b.stated else '; the default'})")
    else:
        drift = "no drift test in this descriptor, so no rate is stated"
    text = f"false-failure rate: {drift}"
    if left_out is not None:
        failed, tried = left_out
        text += (f"; per-prompt bounds: measured, {failed} failure{'s' if failed != 1 else ''} in {tried} "
                 "leave-one-out variants" if tried else "; per-prompt bounds: not measured (too few variants)")
    return text


def upper_bound(failures: int, trials: int, confidence: float = 0.95) -> float:
    """The one-sided Clopper-Pearson upper bound of a rate seen ``failures`` times in ``trials``: the p at which
    seeing so few has probability 1 - confidence (0 of 20 at 95 %: 1 - 0.05 ** (1/20) = 13.9 %). Exact, not an
    approximation: at 0 failures the normal one says 0. It is the ``confidence`` quantile of the beta
    distribution with parameters failures + 1 and trials - failures, computed at any count."""
    if not 0 <= failures <= trials or trials < 1:
        raise ValueError(f"expected 0 <= failures <= trials and trials >= 1, got {failures} of {trials}")
    if failures == trials:
        return 1.0
    return special.beta_quantile(confidence, failures + 1, trials - failures)


@dataclass(frozen=True)
class GateLevel:
    """Clean gates run and how many failed: the gate-level false-failure rate, measured."""

    failing: tuple[int, ...]  # the indices of the gates with a case that did not pass
    gates: int
    confidence: float = 0.95

    @property
    def upper(self) -> float:
        """The one-sided Clopper-Pearson upper bound on the gate's false-failure rate from these clean gates:
        what the measurement can promise, not what it saw."""
        return upper_bound(len(self.failing), self.gates, self.confidence)

    def line(self) -> str:
        """The measurement in one line: failing clean gates, their share and the upper bound, as
        docs/calibration.md quotes it."""
        return (f"gate-level false failures: {len(self.failing)} of {self.gates} clean gates failed "
                f"({percent(len(self.failing) / self.gates)}); one-sided {self.confidence:.0%} upper bound "
                f"{percent(self.upper)} (Clopper-Pearson)")


def gate_level(statuses: Mapping[str, str], gates: Sequence[Sequence[str]], confidence: float = 0.95) -> GateLevel:
    """Case results (name -> status) grouped into gates, each a list of case names: a gate fails when any of its
    cases did not pass, a missing one included."""
    failing = tuple(i for i, names in enumerate(gates) if any(statuses.get(n) != "passed" for n in names))
    return GateLevel(failing, len(gates), confidence)
