"""The verdict: every judgment of a prompt, a decode step or a case, each by the rules written once (kit.core.rules).

A rule returns typed failures (``Failure``: kind, prompt, bucket, step, value, bound, ...), and a failure's words
are made from those fields in one place (``Failure.text``). Readers (triage, the backtest's archive, a fault's
effect, the reports) ask a failure its kind; none parses its words. Records written before failures had kinds are
read through ``failures_of`` (kit.core.verdict.legacy), whose fallback is the one place old wording is read.

The Failure type and the rules themselves (bound per bucket, near-tie, plausibility, missing tokens, exact, decode
step and divergence, the re-judging of a recorded verdict, repeats, drift) are kit.core.rules', below the records
that hold them; here, every judgment built on them:

- ``legacy``: ``failures_of`` (what a reader calls), and the reading of records written before kinds existed
  (failure lines and error texts);
- ``scoring``, ``decode``: a prompt's first token and its greedy continuation against the golden;
- ``judge``, ``caseevidence``: a case judged from what it observed, in its kernel and again by ``parity-kit verify``
  from the evidence it kept;
- ``coverage``, ``borrowed``: what a result must cover before its verdict counts, and a failure under bounds
  borrowed from other hardware;
- ``triage``, ``paired``, ``diagnosis``, ``nextsteps``: whose kind of fault a case's end is, the candidate
  against the pin case by case, whose fault a failing gate is, and the command that moves each case on.

The top of kit.core: it reads every package below it. Stdlib only: the kernel-safe core.
"""

from kit.core.rules.failure import WINNER_GAP_FACTOR, Failure, Kind
from kit.core.verdict.legacy import failures_of

__all__ = ["WINNER_GAP_FACTOR", "Failure", "Kind", "failures_of"]
