"""The decode path's measured noise: per decode step, the largest clean error, its spread and its bound.

A decode step's error grows with the step: each step's context holds the tokens the engine chose, each
computed through its own KV cache in the engine's dtype, so a step reads every earlier step's rounding. The
first token's bound is therefore too tight for later steps, and one hand-set bound for all of them is either
loose at step 1 or tight at step 8. A calibration of a case with ``decode = N`` keeps, in every clean sample,
each prompt's error at every step it compared (``Sample.steps``), and derives one bound per step here by the
first token's rule (kit.core.noise.rule.bound_rule), from the samples alone: the record's stated figures are
re-derived on load like its buckets (kit.core.noise.calibration.restated).

A prompt whose clean continuation left the golden's inside a near-tie stops there (kit.core.verdict.decode): its later
steps have no error, and a step's figures are over the prompts that reached it.

The section's shape is checked with the rest of the record's (kit.core.records.recordcheck), which reads no
bound and so needs nothing from here. Stdlib only, as kit.core.noise.calibration: the case kernel reads the
bounds this module derives.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

def step_key(sample) -> tuple:
    """Equal keys: bit-identical continuations. A variant that changes only the prefill (hf's batching
    and padding: its decode runs one prompt at a time) repeats another's steps and counts once here."""
    return tuple(sorted((pid, tuple(errs)) for pid, errs in (sample.steps or {}).items()))


def distinct_steps(samples: Sequence) -> list:
    """The samples whose decode steps differ, first of each kept: a variant that changes only the prefill repeats
    another's steps and counts once."""
    seen, out = set(), []
    for s in samples:
        if s.steps is not None and step_key(s) not in seen:
            seen.add(step_key(s))
            out.append(s)
    return out


def step_section(samples: Sequence, steps: int, bound_of: Callable[[float, float, int], float]) -> dict:
    """The record's ``decode`` section: per step 1..``steps`` the prompts that reached it, their largest error,
    the largest per-prompt range across the distinct continuations, and ``bound_of(largest, spread, n)``."""
    unique = distinct_steps(samples)
    per_step: dict[str, dict] = {}
    for n in range(1, steps + 1):
        ranges = []
        for pid in sorted({p for s in unique for p in s.steps}):
            values = [s.steps[pid][n - 1] for s in unique if len(s.steps.get(pid, ())) >= n]
            if values:
                ranges.append((max(values), max(values) - min(values)))
        if not ranges:  # no prompt's clean continuation reached this step: no bound can be measured for it
            continue
        largest, spread = max(r[0] for r in ranges), max(r[1] for r in ranges)
        per_step[str(n)] = {"prompts": len(ranges), "largest": largest, "spread": spread,
                            "bound": bound_of(largest, spread, len(unique))}
    return {"steps": steps, "distinct_samples": len(unique), "per_step": per_step}


def step_bounds(section: Mapping[str, Any]) -> dict[str, float]:
    """Step number (as text) -> bound, as the case kernel reads it."""
    return {n: s["bound"] for n, s in (section.get("per_step") or {}).items()}


def steps_uncovered(reference: Mapping[str, Any], steps: int) -> str | None:
    """Why a record (its ``reference()``) cannot bound a case's ``steps`` decode steps, or None."""
    if not steps:
        return None
    bounds = reference.get("step_bounds")
    if not bounds:
        return (f"it measured no decode steps, this case continues every prompt {steps} steps (a first token's "
                "bound is not a decode step's: calibrate the case again)")
    missing = [n for n in range(1, steps + 1) if str(n) not in bounds]
    if missing:
        return (f"it has no bound for decode step {missing[0]} (it measured steps "
                f"{', '.join(sorted(bounds, key=int))}), this case continues every prompt {steps} steps")
    return None
