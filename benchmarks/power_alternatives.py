"""What would lower a case's detectable effect, measured on the faulted samples a power record already holds.

The same faulted samples are judged again under another bound: per prompt instead of per bucket (each prompt's
largest clean error plus its own range across the variants, by the record's rule), so a prompt the variants
never moved is held close to where it always is, and a prompt they move a lot keeps its latitude. What it costs
is stated beside it: how many clean samples, each left out in turn, the per-prompt bounds of the others fail
(the false failures the tighter rule would bring). More prompts or more launches need new measurements; this
prints what a rule change alone gives.

    python benchmarks/power_alternatives.py POWER_RECORD CALIBRATION_RECORD
"""

from __future__ import annotations

import sys

from kit.core.calibration import bound_rule, distinct, load_record
from kit.core.power import family_power, load_power


def per_prompt_reference(record, samples=None) -> dict:
    """The record's reference with one bound per prompt: the prompt's largest clean error plus its range, by
    the record's rule (the rule's minimum margins and rounding included)."""
    samples = samples if samples is not None else distinct(record.samples)
    dtype = record.noise_class.get("dtype", "bfloat16")
    bounds = {}
    for pid in record.prompts:
        errors = [s.errors[pid] for s in samples]
        bounds[pid] = bound_rule(max(errors), max(errors) - min(errors), len(samples), dtype, record.rule["name"])
    ref = record.reference()
    return {**ref, "bounds": bounds, "prompt_buckets": {p: p for p in record.prompts}}


def left_out_failures(record) -> tuple[int, int]:
    """How many distinct clean samples fail the per-prompt bounds the others give."""
    unique = distinct(record.samples)
    failed = 0
    for i, s in enumerate(unique):
        others = [o for j, o in enumerate(unique) if j != i]
        if len(others) < 2:
            return 0, 0
        bounds = per_prompt_reference(record, others)["bounds"]
        failed += any(s.errors[p] > bounds[p] for p in record.prompts)
    return failed, len(unique)


def main(power_path: str, record_path: str) -> None:
    record = load_record(record_path)
    power = load_power(power_path, record.reference())
    clean = power.summary["clean_error"]
    alternative = per_prompt_reference(record)
    print(f"{power.case}: detectable effect per family, x the clean error {clean:.3g} "
          f"(per-bucket bounds as recorded -> per-prompt bounds)")
    for family in sorted(power.families):
        trials = [t for t in power.trials if t.family == family]
        before = power.summary["families"][family]["ratio"]
        after = family_power(family, trials, alternative, clean).ratio
        said = lambda r: "not caught" if r is None else f"{r:.2g}x"  # noqa: E731
        print(f"  {family} ({power.families[family]}): {said(before)} -> {said(after)}")
    failed, n = left_out_failures(record)
    print(f"per-prompt bounds, each clean sample left out: {failed} of {n} fail the others' bounds")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
