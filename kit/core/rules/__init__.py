"""The rules of the verdict as functions of numbers, and the failure they make: the lowest layer of kit.core.

- ``failure``: the Failure type, its kinds and its words;
- ``rules``: each rule once (bound per bucket and per decode step, near-tie, plausibility, missing tokens, exact,
  decode, the re-judging of a recorded verdict, repeats, drift), and every figure derived from a bound (headroom,
  severity, margin).

Below the records, because a record holds its failures as these types and its figures (a case's headroom, a
prompt's severity) by calling these rules: a change of a rule reaches every record, report and figure. Judging a
case from what it observed is kit.core.verdict's. Stdlib only: the kernel-safe core.
"""
