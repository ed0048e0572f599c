"""The embedded default must be green on every CPU class its users meet: each calibrated case of it stands on a
record measured on that class (listed, or the head of its lineage), never on another class's borrowed bounds."""

from __future__ import annotations

from kit.core.records import paths
from kit.core.noise.calibration import measured_on
from kit.descriptor.load import load_descriptor

# The x86-64 levels a laptop or CI runner of the embedded default has: AVX2 only, and AVX-512.
CPU_CLASSES = ("cpu (x86-64-v3)", "cpu (x86-64-v4)")


def test_every_calibrated_case_of_the_embedded_descriptor_has_a_record_for_each_cpu_class():
    desc = load_descriptor(paths.EMBEDDED_DESCRIPTOR)
    lacking = {}
    calibrated = 0
    for name, case in desc.cases.items():
        if case.calibration is None:
            continue
        calibrated += 1
        classes = {measured_on({"fingerprint": r.fingerprint}) for r in desc.baselines.calibration_records(name, case)}
        missing = [c for c in CPU_CLASSES if c not in classes]
        if missing:
            lacking[name] = missing
    assert calibrated >= 5  # hf-bf16, hf-bf16-decode, levanter, vllm-pp1, vllm-pp1-decode, vllm-pp2
    assert lacking == {}, ("cases of the embedded descriptor with no calibration record for a CPU class; measure it "
                           f"there with `parity-kit baseline make --case NAME --reason ...`: {lacking}")
