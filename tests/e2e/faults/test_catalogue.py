"""The gate fails a broken engine: every catalogued fault big enough to stand out of bfloat16's noise fails
the embedded descriptor's hf-bf16 case (and, bigger, its vllm-pp1 case), while the clean model passes.

"Big enough" is measured, not assumed: a fault's effect is its largest max_probability_error in hf float32
against the semantic golden (kit.faults.effect), and the noise is the clean hf-bf16 case's largest error,
measured here. The cases are the descriptor's own, pointed at a faulted copy, so their bounds and tests are
the ones judged.
"""

from __future__ import annotations

import pytest

from kit.calibrate.run import on_this_hardware
from kit.case.runner import run_case
from kit.core.modeldigest import model_digest
from kit.faults.cache import faulted_copy
from kit.faults.catalogue import CATALOGUE, Fault
from kit.faults.effect import embedded_cases, failed_by, hf_float32_effect, largest_error, on_model, run_case_fresh

HF_FACTOR = 1.5  # issue 16: at least this many times the clean hf-bf16 error fails hf-bf16
VLLM_FACTOR = 3.0  # ... and this many times fails vllm-pp1


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    return tmp_path_factory.mktemp("faulted")


@pytest.fixture(scope="module")
def cases(copies):
    """The descriptor's cases; a case whose committed calibration was measured on another class of hardware
    (another CPU instruction-set level) is calibrated here first, as a user on this host would."""
    cases = embedded_cases()
    for name, spec in list(cases.cases.items()):
        cases.cases[name] = on_this_hardware(spec, copies / f"{name}.samples.jsonl") if spec.backend == "hf" else spec
    return cases


@pytest.fixture(scope="module")
def noise(cases) -> float:
    """The clean model's hf-bf16 case passes; its largest error is the noise a fault must stand out of."""
    clean = run_case(cases.cases["hf-bf16"])
    assert clean.status == "passed", clean.failures[:5]
    return largest_error(clean)


@pytest.mark.parametrize("fault", CATALOGUE, ids=[f.name for f in CATALOGUE])
def test_every_fault_that_stands_out_of_bfloat16_noise_fails_hf_bf16(fault: Fault, cases, copies, noise):
    # effect >= 1.5 x noise => failed, checked as: passed => effect < 1.5 x noise, so that the float32
    # effect is only run where the case passed.
    missed = []
    for m in fault.magnitudes:
        folder = faulted_copy(fault, m, cases.float32.model_path, copies)
        digest = model_digest(folder)
        result = run_case(on_model(cases.cases["hf-bf16"], folder, digest))
        assert result.status in ("passed", "failed"), f"{fault.name} {m}: {result.status}"
        if result.status == "passed":
            effect = hf_float32_effect(folder, cases, digest)
            if effect >= HF_FACTOR * noise:
                missed.append(f"{m:g} (effect {effect:.4f}, {effect / noise:.1f}x)")
        else:
            assert failed_by(result), result.failures[:3]
    assert not missed, (f"{fault.name} passes hf-bf16 (clean largest error {noise:.4f}) at magnitudes "
                        f"{', '.join(missed)}")


@pytest.mark.vllm
@pytest.mark.parametrize("fault", CATALOGUE, ids=[f.name for f in CATALOGUE])
def test_the_smallest_fault_three_times_the_noise_fails_vllm_pp1(fault: Fault, cases, copies, noise):
    """One vLLM launch per fault (each takes 40-100 s on a 2-core CPU), at the smallest catalogued magnitude
    whose effect is at least 3x the noise: the hardest of the fault's magnitudes the issue requires vllm-pp1
    to fail. The benchmark (benchmarks/fault_catalogue.py --vllm) runs the larger ones."""
    for m in fault.magnitudes:
        folder = faulted_copy(fault, m, cases.float32.model_path, copies)
        digest = model_digest(folder)
        effect = hf_float32_effect(folder, cases, digest)
        if effect >= VLLM_FACTOR * noise:
            break
    else:
        pytest.fail(f"{fault.name}: no catalogued magnitude reaches {VLLM_FACTOR:g}x the noise {noise:.4f}; "
                    "the catalogue should grade every fault up to gross")
    result = run_case_fresh(on_model(cases.cases["vllm-pp1"], folder, digest))
    assert result.status == "failed", (f"{fault.name} {m:g} (effect {effect:.4f}, {effect / noise:.1f}x) passes "
                                       f"vllm-pp1: largest error {largest_error(result):.4f}")
