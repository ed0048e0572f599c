"""Power records reach the gate through the lineage as calibration records do: a head of kind "power" (a chain per
class of hardware, the class of the record it was measured against) joins the ones a case lists, supersedes the
listed one of its class, and is held to the same rules (measured against a record the case lists or listed through
its lineage, or refused); `baseline log` and `baseline verify` read its entries; a case held to a detectable limit
with no power record here stands as no baseline, with the command that makes one."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from kit.baselines.adopt import first_entry
from kit.core.baselines.baselinekind import POWER
from kit.core.noise.calibration import load_record
from kit.core.errors import BadInput
from kit.core.baselines.lineage import LineageEntry, load_folder, write_entry
from kit.core.records.paths import display
from kit.core.noise.power import read_power
from kit.core.host.runtime import accelerator
from kit.descriptor.load import load_descriptor
from kit.descriptor.standing import Standing, plan_rows
from kit.descriptor.plan import resolve
from support import parity_kit, power_against, write_descriptor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from unit.baselines.test_status import ELSEWHERE_CPU, entry_for, hf_case, record_elsewhere  # noqa: E402

pytestmark = pytest.mark.unit


def embedded_power(embedded) -> Path:
    return (embedded.descriptor.parent / embedded.doc["cases"]["hf-bf16"]["power"][0]).resolve()


def power_entry(power: Path, lineage: Path, supersedes: str | None = None, **more) -> LineageEntry:
    """The entry `baseline make` writes for a power record it blessed: its runtime the class of hardware of the
    calibration record it was measured against."""
    doc = read_power(power)
    fields = dict(descriptor="test", kind=POWER, case="hf-bf16", baseline=power.stem,
                  file=os.path.relpath(power, lineage), runtime=doc["measured_on"], supersedes=supersedes,
                  reason="a new class", command=("parity-kit", "baseline", "make"), created_at=doc["created_at"],
                  backtest={"evidence_gate": "passed"})
    return LineageEntry(**{**fields, **more})


def with_power_lineage(tmp_path: Path, embedded, listed_power: list[Path] | None = None, limit: float | None = None):
    """hf-bf16 listing this host's record (copied into the tree) and ``listed_power``; a lineage folder."""
    here = accelerator("cpu")["name"]
    record = record_elsewhere(embedded, tmp_path / "calibrations", here)
    more = {"power": [str(p) for p in listed_power]} if listed_power else {}
    if limit is not None:
        more["detectable_limit"] = limit
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": hf_case(embedded, [str(record)], **more)},
                            baselines={"lineage": str(tmp_path / "lineage")})
    return desc, record


def test_a_power_record_reaches_the_case_through_its_lineage_and_supersedes_the_listed_one_of_its_class(
        tmp_path, embedded, host_class):
    lineage = tmp_path / "lineage"
    record = record_elsewhere(embedded, tmp_path / "calibrations", accelerator("cpu")["name"])
    first = power_against(embedded_power(embedded), record, tmp_path / "power")
    desc, _ = with_power_lineage(tmp_path, embedded, limit=50)
    # No power listed, none in the lineage: the limit cannot be judged here, which is no baseline, not bad input.
    spec = load_descriptor(desc).case_specs(["hf-bf16"])[0]
    assert spec.power is None and spec.no_baseline is not None and spec.no_baseline.kind == "power"
    assert spec.no_baseline.command == f"parity-kit baseline make {display(desc)} --case hf-bf16 --reason \"...\""
    row = next(r for r in plan_rows(resolve(load_descriptor(desc))) if r.kind is POWER)
    assert row.standing == Standing.MISSING and "no power record measured against calibration record" in row.rule

    write_entry(lineage, power_entry(first, lineage))  # placed by a make: its file and its entry, no edit
    spec = load_descriptor(desc).case_specs(["hf-bf16"])[0]
    assert spec.no_baseline is None and spec.power["path"] == str(first) and spec.power["same_class"]
    row = next(r for r in plan_rows(resolve(load_descriptor(desc))) if r.kind is POWER)
    assert (row.standing, row.sha256, row.lineage) == (Standing.MATCH, first.stem, "first of its chain")

    # Made again (other bytes): its entry supersedes the first, which the case then no longer uses, even listed.
    again = power_against(embedded_power(embedded), record, tmp_path / "power", created_at="2026-12-06T00:00:00+00:00")
    write_entry(lineage, power_entry(again, lineage, supersedes=power_entry(first, lineage).sha256))
    listed, _ = with_power_lineage(tmp_path, embedded, listed_power=[first], limit=50)
    spec = load_descriptor(listed).case_specs(["hf-bf16"])[0]
    assert spec.power["path"] == str(again)  # no "both measured against one record": the first is superseded
    assert [e.kind for e in load_folder(lineage)] == [POWER, POWER]


def test_a_power_head_measured_against_a_record_never_listed_is_refused_and_a_superseded_ones_left_out(
        tmp_path, embedded, host_class):
    lineage = tmp_path / "lineage"
    desc, record = with_power_lineage(tmp_path, embedded)
    elsewhere = record_elsewhere(embedded, tmp_path / "calibrations", ELSEWHERE_CPU)
    stranger = power_against(embedded_power(embedded), elsewhere, tmp_path / "power")
    write_entry(lineage, power_entry(stranger, lineage))
    with pytest.raises(BadInput, match=re.escape(f"cases.hf-bf16.power: {display(stranger)} was measured against "
                                                 f"calibration record {load_record(elsewhere).sha256[:12]}, which the "
                                                 "case does not list, nor did it through its lineage")):
        load_descriptor(desc).case_specs(["hf-bf16"])
    # Once that record is a chain's superseded baseline, its power record says nothing of the bounds in use.
    old = entry_for(elsewhere, lineage, runtime=accelerator("cpu")["name"])
    write_entry(lineage, old)
    write_entry(lineage, entry_for(record, lineage, supersedes=old.sha256))
    assert load_descriptor(desc).case_specs(["hf-bf16"])[0].power is None


def test_log_and_verify_read_power_entries_and_verify_refuses_one_whose_claims_do_not_hold(tmp_path, embedded):
    lineage = tmp_path / "lineage"
    desc, record = with_power_lineage(tmp_path, embedded)
    power = power_against(embedded_power(embedded), record, tmp_path / "power")
    write_entry(lineage, power_entry(power, lineage))
    here = accelerator("cpu")["name"]
    log = parity_kit("baseline", "log", str(desc), "--case", "hf-bf16")
    assert log.returncode == 0, log.stderr
    assert f"hf-bf16: power on {here} (1 baseline)" in log.stdout and "evidence gate passed" in log.stdout
    verify = parity_kit("baseline", "verify", str(desc))
    assert verify.returncode == 0 and verify.stdout.startswith("verified: 1 lineage entries"), verify.stdout

    # An entry that puts the record on another class than the one it was measured against.
    for f in lineage.glob("*.json"):
        f.unlink()
    liar = write_entry(lineage, power_entry(power, lineage, runtime=ELSEWHERE_CPU))
    verify = parity_kit("baseline", "verify", str(desc))
    assert verify.returncode == 3, verify.stdout + verify.stderr
    assert verify.stdout.strip() == (f"refused: lineage entry {display(liar)} says its power record holds on "
                                     f"{ELSEWHERE_CPU}; it was measured against a record of {here}")
    # A record whose figures are not its samples' is refused whoever lists it.
    doc = json.loads(power.read_text())
    doc["summary"]["detects_from"] = 0.01
    from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes

    data = canonical_bytes(doc)
    forged = atomic_write_bytes(tmp_path / "power" / f"{sha256_bytes(data)}.json", data)
    liar.unlink()
    entry = write_entry(lineage, power_entry(forged, lineage))
    verify = parity_kit("baseline", "verify", str(desc))
    assert verify.returncode == 3 and verify.stdout.startswith(f"refused: lineage entry {display(entry)}: ")
    assert "summary: its detectable effects are not what its faulted samples give" in verify.stdout


def test_a_listed_power_record_gets_a_first_entry_of_its_class(tmp_path, embedded):
    power = embedded_power(embedded)
    entry = first_entry("tiny-cpu", tmp_path, POWER, "hf-bf16", power)
    doc = read_power(power)
    assert (entry.kind, entry.runtime, entry.baseline, entry.supersedes) == (POWER, doc["measured_on"],
                                                                           power.stem, None)
    assert entry.reason == "made before baselines kept a lineage" and entry.bounds == {}
