"""The embedded default as a host of every class of CPU sees it (support.hostclass): the kit takes the forced class
for its own, each calibrated case stands on the record of that class, or where the repository holds none, on another
class's bounds by the case's stated rule, and `baseline status` and the lineage's re-derivation answer on every
class, never with bad input or a crash."""

from __future__ import annotations

import json

import pytest

from kit.cli import main
from kit.core.baselines.baselinekind import CALIBRATION
from kit.core.host.runtime import accelerator, hardware, torch_cpu_runtime
from kit.core.errors import BadInput
from kit.core.noise.calibration import measured_on
from kit.descriptor.load import load_descriptor
from kit.descriptor.standing import Standing
from support.hostclass import NO_RECORD_MACHINE, host_classes, recorded_classes

pytestmark = pytest.mark.unit


def test_the_classes_run_are_every_level_the_records_name_as_each_vendor_and_one_they_name_none_of():
    levels, vendors = recorded_classes()
    assert levels >= {"x86-64-v3", "x86-64-v4"} and vendors == {"amd", "intel"}
    classes = host_classes()
    assert {(c.level, c.value.split(":")[1]) for c in classes if c.recorded} == {(lv, v) for lv in levels
                                                                                for v in vendors}
    assert "x86-64-v4:intel:amx" in {c.value for c in classes}  # AVX-512 with AMX, which oneDNN tells apart
    (unrecorded,) = [c for c in classes if not c.recorded]
    assert unrecorded.level == NO_RECORD_MACHINE and unrecorded.level not in levels


def test_the_kit_takes_the_forced_class_for_this_hosts(host_class):
    assert accelerator("cpu")["name"] == host_class.accelerator
    assert hardware().endswith(f", {host_class.level})")
    key = torch_cpu_runtime({})
    vendor = {"amd": "AuthenticAMD", "intel": "GenuineIntel"}.get(host_class.value.partition(":")[2].split(":")[0])
    assert (f"mkl={vendor} " in key) if vendor else key.startswith(f"torch-cpu {NO_RECORD_MACHINE} aten=default ")
    assert ("onednn=avx512_core_amx " in key) == host_class.value.endswith(":amx")


def test_a_class_the_variable_cannot_name_is_one_line_naming_it(monkeypatch):
    monkeypatch.setenv("PARITY_KIT_HOST_CLASS", "x86-64-v3")
    with pytest.raises(BadInput, match=r"^\$PARITY_KIT_HOST_CLASS='x86-64-v3': name the vendor after the level"):
        accelerator("cpu")


def test_every_calibrated_case_stands_on_its_class_record_or_borrows_by_its_rule(embedded, host_class):
    desc = load_descriptor(embedded.descriptor)
    for name, case in desc.cases.items():
        if case.calibration is None:
            continue
        spec = desc.case_specs([name])[0]
        used = next(r for r in desc.baselines.calibration_records(name, case)
                    if r.sha256 == spec.calibration["sha256"])
        if host_class.recorded:
            assert measured_on({"fingerprint": used.fingerprint}) == host_class.accelerator, name
            assert spec.calibration["fallback"]["rule"] == "hardware" and spec.no_baseline is None, name
        else:  # the embedded cases accept a hardware change: bounds borrowed, said so, never refused
            assert spec.calibration["fallback"]["rule"] == "device" and spec.no_baseline is None, name


def test_baseline_status_and_the_lineage_answer_on_every_class(embedded, host_class, capsys):
    assert main(["baseline", "status", str(embedded.descriptor), "--json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["kind"] == CALIBRATION.name]
    assert rows and {r["standing"] for r in rows} == ({Standing.MATCH} if host_class.recorded else {Standing.FALLBACK})
    assert Standing.MISSING not in {r["standing"] for r in rows}
    assert load_descriptor(embedded.descriptor).baselines.verify_lineage() == []
