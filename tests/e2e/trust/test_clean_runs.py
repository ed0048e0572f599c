"""The gate passes a healthy engine: no false failure on the clean variants a calibration measured, nor over
20 clean runs of every semantic case of the embedded descriptor (the vLLM ones as fresh launches).

The variants each run as a case of their own, with the options the variant changes, against the committed
record: a variant is a release that changed only what a healthy release may change. The 20 runs are
behind the ``slow`` marker (`make test-slow`; docs/calibration.md says how long they take).
"""

from __future__ import annotations

import json

import pytest

from kit.core.calibration import load_record
from kit.descriptor.load import load_descriptor
from support import parity_kit, write_descriptor

pytestmark = pytest.mark.e2e

RUNS = 20


def semantic_cases(embedded) -> dict[str, dict]:
    return {n: c for n, c in embedded.doc["cases"].items() if c.get("golden") == "semantic"}


def record_of(embedded, name: str):
    """The record the case uses on this host (one per class of hardware may be listed)."""
    return load_record(load_descriptor(embedded.descriptor).case_specs([name])[0].calibration["path"])


def variant_cases(embedded, names: list[str]) -> dict[str, dict]:
    """One case per clean variant of each named case's calibration: the case with the variant's options."""
    out = {}
    for name in names:
        case = semantic_cases(embedded)[name]
        for v in record_of(embedded, name).variants:
            label = f"{name}-{v['name']}" + (f"-launch{v['launch']}" if v.get("launch") else "")
            # A None override unsets the option (its default); TOML has no None to write.
            out[label] = {k: x for k, x in {**case, **v["overrides"]}.items() if x is not None}
    return out


def gate_all_pass(tmp_path, embedded, cases: dict, timeout: float) -> dict:
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    proc = parity_kit("gate", desc, "--out", tmp_path / "run", "--no-summary", "--jobs", "2", timeout=timeout)
    results = json.loads((tmp_path / "run" / "result.json").read_text())["cases"]
    failed = {n: r.get("failures", [])[:2] or r.get("error") for n, r in results.items() if r["status"] != "passed"}
    assert proc.returncode == 0 and not failed, (failed, proc.stderr[-2000:])
    return results


@pytest.mark.levanter
@pytest.mark.timeout(1500)  # 12 cases, 5 of them Levanter's (about 20 s each unloaded)
def test_every_clean_variant_a_calibration_measured_passes_its_case(tmp_path, embedded):
    results = gate_all_pass(tmp_path, embedded, variant_cases(embedded, ["hf-bf16", "levanter"]), timeout=1200)
    drift = {n: r["drift"]["passed"] for n, r in results.items() if r.get("drift")}
    assert drift and all(drift.values())
    assert len(results) == len(variant_cases(embedded, ["hf-bf16", "levanter"]))


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.timeout(3600)
def test_every_clean_vllm_variant_passes_its_case(tmp_path, embedded):
    gate_all_pass(tmp_path, embedded, variant_cases(embedded, ["vllm-pp1", "vllm-pp2"]), timeout=3500)


@pytest.mark.slow
@pytest.mark.levanter
@pytest.mark.vllm
@pytest.mark.timeout(4 * 3600)
def test_twenty_clean_runs_of_every_semantic_case_pass(tmp_path, embedded):
    cases = {f"{name}-{n:02d}": case for name, case in semantic_cases(embedded).items() for n in range(1, RUNS + 1)}
    results = gate_all_pass(tmp_path, embedded, cases, timeout=4 * 3600 - 60)
    assert len(results) == RUNS * len(semantic_cases(embedded))
