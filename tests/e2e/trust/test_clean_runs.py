"""The gate passes a healthy engine: no false failure on the clean variants a calibration measured, nor over
20 clean runs of every semantic case of the embedded descriptor (the vLLM ones as fresh launches).

The variants each run as a case of their own, with the options the variant changes, against the committed
record: a variant is a release that changed only what a healthy release may change. The 20 runs are
behind the ``slow`` marker (`make test-slow`; docs/calibration.md says how long they take), and so are the
variants ``slow_variant`` names: `make test` runs every other one.

What a release owner meets is the gate's rate, not a case's: the 20 runs are counted as 20 gates (each one run of
every semantic case) and the gate-level rate is reported with its exact upper bound (kit.core.noise.falsefailure). Each
descriptor written here holds many copies of a case, so it states the gate's rate that gives every copy the alpha
the embedded descriptor gives its case (a Bonferroni split over 80 copies would otherwise test each more loosely).
"""

from __future__ import annotations

import json
import logging

import pytest

from kit.core.records import paths
from kit.core.noise.calibration import load_record
from kit.core.noise.falsefailure import gate_level
from kit.descriptor.load import load_descriptor
from support import parity_kit, write_descriptor

pytestmark = pytest.mark.e2e

RUNS = 20
log = logging.getLogger(__name__)


def semantic_cases(embedded) -> dict[str, dict]:
    return {n: c for n, c in embedded.doc["cases"].items() if c.get("golden") == "semantic"}


def record_of(embedded, name: str):
    """The record the case uses on this host (one per class of hardware may be listed)."""
    return load_record(load_descriptor(embedded.descriptor).case_specs([name])[0].calibration["path"])


# The clean variants left to `make test-slow`, each with its property kept in `make test`. A variant's further
# launches (launch 2 and on) repeat options the variant's first launch already runs in the same gate: launch-to-launch
# noise is a statistical check, as the 20 runs are, and the first launch stays. levanter-unpadded compiles one XLA
# program per prompt length (53 s alone on 2 cores, a third of this module's time); that leaving the padding out
# changes no result, to rounding, stays in `make test` through
# tests/e2e/backends/test_levanter.py::test_padding_and_flash_attention_change_no_result.
def slow_variant(case: str, variant: dict) -> bool:
    return bool(variant.get("launch")) or (case, variant["name"]) == ("levanter", "unpadded")


def variant_cases(embedded, names: list[str], slow: bool | None = None) -> dict[str, dict]:
    """One case per clean variant of each named case's calibration: the case with the variant's options. ``slow``
    True or False keeps only the variants ``slow_variant`` names, or only the others; None keeps every one."""
    out = {}
    for name in names:
        case = semantic_cases(embedded)[name]
        for v in record_of(embedded, name).variants:
            if slow is not None and slow_variant(name, v) != slow:
                continue
            label = f"{name}-{v['name']}" + (f"-launch{v['launch']}" if v.get("launch") else "")
            # A None override unsets the option (its default); TOML has no None to write.
            out[label] = {k: x for k, x in {**case, **v["overrides"]}.items() if x is not None}
    return out


def embedded_alpha_defaults(embedded, cases: dict) -> dict:
    """The descriptor's [defaults] with the gate's rate that splits, over ``cases``' drift tests, into the alpha
    the embedded descriptor gives each of its own."""
    per_case = load_descriptor(paths.EMBEDDED_DESCRIPTOR).false_failure_budget().per_case
    drifting = sum(1 for c in cases.values() if c.get("calibration") and c.get("drift", True))
    return {**embedded.doc.get("defaults", {}), "false_failure_rate": per_case * drifting}


def gate_results(tmp_path, embedded, cases: dict, timeout: float):
    desc = write_descriptor(tmp_path, embedded, cases=cases, defaults=embedded_alpha_defaults(embedded, cases))
    proc = parity_kit("gate", desc, "--out", tmp_path / "run", "--no-summary", "--jobs", "2", timeout=timeout)
    results = json.loads((tmp_path / "run" / "result.json").read_text())["cases"]
    return proc, results


def gate_all_pass(tmp_path, embedded, cases: dict, timeout: float) -> dict:
    proc, results = gate_results(tmp_path, embedded, cases, timeout)
    failed = {n: r.get("failures", [])[:2] or r.get("error") for n, r in results.items() if r["status"] != "passed"}
    assert proc.returncode == 0 and not failed, (failed, proc.stderr[-2000:])
    return results


def assert_variants_pass(tmp_path, embedded, slow: bool) -> None:
    cases = variant_cases(embedded, ["hf-bf16", "levanter"], slow=slow)
    assert cases, "the calibration records list no such variant"
    results = gate_all_pass(tmp_path, embedded, cases, timeout=2400)
    drift = {n: r["drift"]["passed"] for n, r in results.items() if r.get("drift")}
    assert drift and all(drift.values())
    assert len(results) == len(cases)


@pytest.mark.levanter
# 9 cases, 3 of them Levanter's. The limit is wide so that a case stuck on a loaded machine meets its own timeout
# (300 s, and one retry) and the test fails naming it, not as a gate that never returned.
@pytest.mark.timeout(2700)
def test_every_clean_variant_a_calibration_measured_passes_its_case(tmp_path, embedded):
    assert_variants_pass(tmp_path, embedded, slow=False)


@pytest.mark.slow  # slow_variant says why each is here and what keeps its property in `make test`
@pytest.mark.levanter
@pytest.mark.timeout(2700)
def test_every_further_launch_and_the_unpadded_levanter_variant_pass_their_case(tmp_path, embedded):
    assert_variants_pass(tmp_path, embedded, slow=True)


def test_the_variants_split_between_the_two_tiers_is_whole(embedded):
    """Every clean variant runs in one of the two tests above, none in both, and `make test` keeps every variant's
    first launch but levanter-unpadded's."""
    names = ["hf-bf16", "levanter"]
    fast, slow = variant_cases(embedded, names, slow=False), variant_cases(embedded, names, slow=True)
    assert not fast.keys() & slow.keys() and {**fast, **slow}.keys() == variant_cases(embedded, names).keys()
    assert {n for n in slow if "-launch" not in n} <= {"levanter-unpadded"}
    assert {n.split("-launch")[0] for n in slow if "-launch" in n} <= fast.keys()


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
    names = list(semantic_cases(embedded))
    cases = {f"{name}-{n:02d}": semantic_cases(embedded)[name] for name in names for n in range(1, RUNS + 1)}
    proc, results = gate_results(tmp_path, embedded, cases, timeout=4 * 3600 - 60)
    # Run n of every semantic case is one clean gate: it fails when any of its cases did not pass.
    level = gate_level({n: r["status"] for n, r in results.items()},
                       [[f"{name}-{n:02d}" for name in names] for n in range(1, RUNS + 1)])
    log.warning(level.line())  # shown in the pytest report whatever the outcome
    failed = {n: r.get("failures", [])[:2] or r.get("error") for n, r in results.items() if r["status"] != "passed"}
    assert not level.failing and proc.returncode == 0, (level.line(), failed, proc.stderr[-2000:])
    assert len(results) == RUNS * len(names)
