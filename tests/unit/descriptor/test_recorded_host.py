"""A descriptor resolved for the hardware a run recorded, not for the machine that resolves it (what `parity-kit
verify` judges a run on): the calibration record of the recorded class of hardware, the exact golden of the
recorded runtime or none, whatever this host would choose; and what a manifest records, read back whole or refused
naming the key."""

from __future__ import annotations

import pytest

from kit.core.noise.calibration import load_record
from kit.core.records.recordcheck import Wrong
from kit.core.host.runtime import accelerator
from kit.descriptor.host import CaseHardware, Host, RecordedHost, hardware_record, recorded_hardware
from kit.descriptor.load import for_host, load_descriptor
from kit.descriptor.plan import resolve
from support.hostclass import recorded_classes

pytestmark = pytest.mark.unit


def _class_of(path) -> str:
    return load_record(path).fingerprint["runtime"]["accelerator"]["name"]


@pytest.mark.parametrize("level", sorted(recorded_classes()[0]))
def test_each_recorded_class_gets_its_own_record_and_runtime_its_own_golden_or_none(embedded, level, host_class):
    # Whichever class the resolving host is (host_class), the run's recorded class decides.
    desc = load_descriptor(embedded.descriptor)
    records = {_class_of(p): load_record(p).sha256 for p in
               ((embedded.descriptor.parent / f).resolve() for f in embedded.doc["cases"]["hf-bf16"]["calibration"])}
    here = resolve(desc, ["checkpoint", "hf-bf16"])
    runtime = here.case("checkpoint").spec.runtime
    cpu = {"name": f"cpu ({level})", "driver": ""}
    recorded = RecordedHost({"checkpoint": CaseHardware(cpu, runtime), "hf-bf16": CaseHardware(cpu, "")})
    plan = resolve(for_host(desc, recorded), ["checkpoint", "hf-bf16"])
    assert plan.case("hf-bf16").spec.calibration["sha256"] == records[cpu["name"]]
    assert plan.case("checkpoint").spec.golden_path == here.case("checkpoint").spec.golden_path
    elsewhere = RecordedHost({"checkpoint": CaseHardware(cpu, "torch-cpu x86_64 aten=avx512 onednn=avx512_core_amx "
                                                              "mkl=GenuineIntel Some Xeon")})
    spec = resolve(for_host(desc, elsewhere), ["checkpoint"]).case("checkpoint").spec
    assert spec.golden_path == "" and spec.no_baseline.text.startswith("no baseline for this runtime")


def test_a_run_records_what_this_host_gives_each_case_and_reads_it_back(embedded):
    specs = resolve(load_descriptor(embedded.descriptor), ["checkpoint", "hf-bf16"]).specs
    recorded = hardware_record(specs, Host())
    assert recorded["hf-bf16"] == {"accelerator": accelerator("cpu"), "runtime": ""}
    assert recorded["checkpoint"]["runtime"] == specs[0].runtime != ""
    back = recorded_hardware(recorded, ["checkpoint", "hf-bf16"])
    assert back.accelerator("hf-bf16", {}) == accelerator("cpu") and back.runtime("checkpoint", "hf", {}) == \
        specs[0].runtime


@pytest.mark.parametrize("doc, key", [
    (None, "hardware: expected an object, got None"),
    ({"a": {"accelerator": {"name": "cpu (x86-64-v3)", "driver": ""}, "runtime": ""}},
     "hardware.b: missing: no record of the hardware the case was resolved for"),
    ({"a": {"accelerator": {"name": "", "driver": ""}, "runtime": ""}, "b": {}},
     "hardware.a.accelerator.name: expected a non-empty string, got ''"),
    ({"a": {"accelerator": {"name": "x", "driver": None}, "runtime": ""}, "b": {}},
     "hardware.a.accelerator.driver: expected a string, got None"),
    ({"a": {"accelerator": {"name": "x", "driver": ""}, "runtime": 3}, "b": {}},
     "hardware.a.runtime: expected a string, got 3"),
])
def test_a_record_of_hardware_that_is_not_whole_is_refused_naming_its_key(doc, key):
    with pytest.raises(Wrong) as wrong:
        recorded_hardware(doc, ["a", "b"])
    assert wrong.value.text == key
