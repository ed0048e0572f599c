"""A fault's size and the gate's verdict on it, measured with the embedded descriptor's own cases.

A fault's *effect* is what it does to the model, free of any engine's noise: the largest
max_probability_error over the fixture's prompts of the faulted checkpoint run by hf at the goldens' precision
(the ``checkpoint`` case's settings; on a CPU in float64 rounded to float32, so that it is one number on every
host) against the semantic golden. Comparing it with the clean bfloat16 case's
largest error says whether a gate could be expected to see the fault at all.

Cases are the descriptor's, resolved as ``parity-kit spec`` resolves them, and only pointed at the faulted
folder, so whatever bounds and tests the descriptor's cases carry are the ones judged.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from kit.backends.registry import REFERENCE
from kit.case.runner import run_case
from kit.core.records import paths
from kit.core.errors import BadInput
from kit.core.host.portable import PORTABLE_DTYPE
from kit.core.records.records import CaseResult
from kit.core.model.faultcopy import on_model
from kit.core.records.spec import CaseSpec
from kit.core.verdict import Kind, failures_of
from kit.descriptor.load import LoadedDescriptor, load_descriptor
from kit.descriptor.plan import resolve
from kit.core.records.records import GoldenMode

FLOAT32_CASE = "checkpoint"  # hf in float32: the settings the goldens were made with
EFFECT_CASE = "hf-float32-effect"


class FailedTest(StrEnum):
    """Which of the gate's tests failed a case, by its failures' kinds (kit.core.verdict): ``failed_by``'s words."""
    BOUND = "bound"
    WINNER = "winner"
    MISSING = "missing"
    DRIFT = "drift"
    OTHER = "other"


_TESTS = {Kind.OVER_BOUND: FailedTest.BOUND, Kind.WINNER_CHANGE: FailedTest.WINNER,
          Kind.GREEDY_OUTSIDE_TOP: FailedTest.WINNER, Kind.DECODE_DIVERGENCE: FailedTest.WINNER,
          Kind.DECODE_OUTSIDE_TOP: FailedTest.WINNER, Kind.NEAR_TIE_DIVERGENCE: FailedTest.WINNER,
          Kind.MISSING_TOKEN: FailedTest.MISSING, Kind.DRIFT: FailedTest.DRIFT}


@dataclass(frozen=True)
class EmbeddedCases:
    float32: CaseSpec  # the checkpoint case, scored against the semantic golden with no bound
    cases: dict[str, CaseSpec]  # the descriptor's cases by name, as it resolves them


def embedded_cases(descriptor: str | Path = paths.EMBEDDED_DESCRIPTOR,
                   names: tuple[str, ...] = ("hf-bf16", "vllm-pp1"), float32_case: str = FLOAT32_CASE,
                   loaded: LoadedDescriptor | None = None) -> EmbeddedCases:
    """The descriptor's ``names`` as it resolves them, and ``float32_case`` (an hf case in float32: the embedded
    descriptor's ``checkpoint``, a GPU descriptor's ``hf-f32``) set up to measure a fault's effect. A command that
    has loaded ``descriptor`` already passes it (``loaded``): it is read once per command."""
    plan = resolve(loaded or load_descriptor(descriptor), [float32_case, *[n for n in names if n != float32_case]])
    specs = {name: case.spec for name, case in plan.cases.items()}
    semantic = plan.goldens[GoldenMode.SEMANTIC].files[0]  # a semantic entry names one file
    checkpoint = specs.pop(float32_case)
    precise = checkpoint.options.get("dtype", "float32") in ("float32", PORTABLE_DTYPE)
    if checkpoint.backend != REFERENCE or not precise:  # the reference backend: the one the goldens are made by
        raise BadInput(f"case {float32_case} of {descriptor} is no {REFERENCE} float32 or float64 case: a fault's "
                       f"effect is what {REFERENCE} computes at the goldens' precision")
    # The golden maker's path at its precision, on a CPU computed in float64 and rounded to float32 (an effect is
    # then one number on every host, kit.core.host.portable); on a GPU in float32, where float64 attention over
    # long prompts would hold every [seq, seq] score. The kernels a case pins are no part of a fault's effect.
    options = {k: v for k, v in checkpoint.options.items() if k != "cpu_kernels"}
    on_gpu = str(options.get("device", "cpu")).startswith("cuda")
    options["dtype"] = "float32" if on_gpu else PORTABLE_DTYPE
    float32 = dataclasses.replace(checkpoint, name=EFFECT_CASE, golden_path=str(semantic),
                                  golden_kind=GoldenMode.SEMANTIC,
                                  bound=None, bucket_bounds={}, options=options, runtime="", no_baseline=None)
    return EmbeddedCases(float32, specs)


def largest_error(result: CaseResult) -> float:
    """The case's largest max_probability_error; a prompt that could not be scored counts as infinite."""
    error = result.max_probability_error
    return math.inf if error is None or math.isnan(error) else error


def healthy_noise(clean_error: float, spec: CaseSpec) -> float:
    """The largest error a healthy release shows on this host: the clean case's own largest, or the largest
    over every clean variant its calibration measured, whichever is larger. A fault must stand out of this to
    be seen at all: on an AVX-512 host the hf bfloat16 case batched 8 to a batch with left padding reaches 1.15
    x the case as set, moving a single prompt by as much as a 1.7 x fault confined to three prompts does."""
    calibrated = [b["largest"] for b in ((spec.calibration or {}).get("buckets") or {}).values()]
    return max([clean_error, *calibrated])


def effect_runtime(cases: EmbeddedCases | None = None) -> str:
    """The runtime an effect is measured on, as a table of effects is keyed: the key of what decides the bits
    of the hf case that measures it (kit.core.host.runtime): on a CPU the portable key, the same on every host,
    since the effect is computed in float64 and rounded; on a GPU its model and driver. On one runtime an effect is one
    number; on another it moves (by about 1e-6 on the tiny model), so a table holds one entry per runtime."""
    from kit.backends import registry

    cases = cases or embedded_cases()
    return registry.get(cases.float32.backend).runtime_key(cases.float32.options)


def hf_float32_effect(folder: str | Path, cases: EmbeddedCases | None = None, digest: str | None = None) -> float:
    """A faulted model's largest error in float32 on the embedded case's prompts: the fault's own effect, free of
    any engine's noise."""
    cases = cases or embedded_cases()
    return largest_error(run_case(on_model(cases.float32, folder, digest)))


def failed_by(result: CaseResult) -> tuple[FailedTest, ...]:
    """Which tests failed the case: a prompt over its bound, a winner change, a golden token missing from
    the backend's top tokens, the drift test, other (a non-finite logprob, an exact mismatch); each once, in the
    order the case's failures first name it. A decode divergence is a winner change at a step."""
    return tuple(dict.fromkeys(_TESTS.get(f.kind, FailedTest.OTHER) for f in failures_of(result)))
