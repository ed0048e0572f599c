"""Each kind of baseline is one object (kit.core.baselines.baselinekind): its one name round-trips through every record
and its earlier spelling is still read, an unknown name is one clear refusal, what a kind is not made or backtested by
says so, and on every committed descriptor the kinds resolve and check as the descriptor states them."""

from __future__ import annotations

import copy
import json
import pickle
import tomllib

import pytest

from kit.backends import registry
from kit.baselines.make import MAKERS
from kit.core.records import paths
from kit.core.baselines.baselinekind import (CALIBRATION, EXACT_GOLDEN, HAND_SET_BOUND, IN_KERNEL_REFERENCE, KINDS,
                                             POWER, SEMANTIC_GOLDEN, BaselineRow, NotBacktested, NotMakeable, Standing,
                                             UnknownBaselineKind, baseline_kind_named, of_golden)
from kit.core.errors import BadInput
from kit.core.baselines.golden import load_golden
from kit.core.baselines.lineage import KINDS as LINEAGE_KINDS
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from kit.descriptor.standing import plan_rows, table_markdown
from kit.gate.preflight import check_inputs
from support import ROOT

pytestmark = pytest.mark.unit

DESCRIPTORS = sorted((ROOT / "descriptors").glob("*.toml"))


def test_each_kind_has_one_name_that_round_trips_and_its_earlier_spelling_reads():
    names = [k.name for k in KINDS]
    assert names == ["exact-golden", "semantic-golden", "calibration", "bound", "power", "reference"]
    for kind in KINDS:
        assert baseline_kind_named(kind.name) is kind and str(kind) == kind.name
        # A copy or a pickle (a row sent to another process) is the same kind again: kinds compare by identity.
        assert copy.deepcopy(kind) is kind and pickle.loads(pickle.dumps(kind)) is kind
    # What status rows, manifests and baseline.json wrote before the kinds had one spelling.
    assert baseline_kind_named("exact golden") is EXACT_GOLDEN
    assert baseline_kind_named("semantic golden") is SEMANTIC_GOLDEN
    row = BaselineRow("c", EXACT_GOLDEN, Standing.MATCH, "a rule")
    assert row.to_dict()["kind"] == "exact-golden" and baseline_kind_named(row.to_dict()["kind"]) is EXACT_GOLDEN
    # A lineage entry names its kind in the same spelling, and only the kinds a lineage keeps.
    assert LINEAGE_KINDS == ("calibration", "exact-golden", "semantic-golden", "power")
    assert of_golden("exact") is EXACT_GOLDEN and of_golden("semantic") is SEMANTIC_GOLDEN


def test_a_standing_is_written_as_its_word():
    # Status rows, run manifests and `baseline make`'s record keep these words: the enum writes them unchanged.
    assert [s.value for s in Standing] == ["matches", "falls back", "missing", "hand-set", "in-kernel"]
    row = BaselineRow("c", CALIBRATION, Standing.FALLBACK, "a rule")
    assert json.loads(json.dumps(row.to_dict()))["standing"] == "falls back"
    assert '"standing": "falls back"' in json.dumps(row.to_dict())
    assert "| **falls back**: a rule |" in table_markdown([row])
    assert Standing("missing") is Standing.MISSING  # a record's word reads back as the member


@pytest.mark.parametrize("name", ["golden", "exact_golden", "", None, 3])
def test_an_unknown_kind_is_one_clear_refusal(name):
    with pytest.raises(UnknownBaselineKind) as caught:
        baseline_kind_named(name)
    assert isinstance(caught.value, BadInput)  # bad input: exit 3, one line
    assert str(caught.value) == (f"unknown baseline kind {name!r} (known: exact-golden, semantic-golden, calibration, "
                                 "bound, power, reference)")
    with pytest.raises(UnknownBaselineKind, match=r"unknown golden kind 'fuzzy' \(known: exact, semantic\)"):
        of_golden("fuzzy")


def test_what_a_kind_is_not_made_or_backtested_by_says_so():
    assert {k for k in KINDS if k.makeable} == {EXACT_GOLDEN, CALIBRATION, POWER} == set(MAKERS)
    assert {k for k in KINDS if k.backtested} == {CALIBRATION}
    for kind in (SEMANTIC_GOLDEN, HAND_SET_BOUND, IN_KERNEL_REFERENCE):
        with pytest.raises(NotMakeable, match=f"does not make a {kind.name}: "):
            kind.require_makeable()
        assert kind.made_by  # and names what does make it
    for kind in KINDS:
        if not kind.backtested:
            with pytest.raises(NotBacktested, match=f"a {kind.name} is not backtested"):
                kind.require_backtested()
    EXACT_GOLDEN.require_makeable()
    CALIBRATION.require_makeable()
    POWER.require_makeable()
    CALIBRATION.require_backtested()


def stated_kinds(case: dict) -> list[str]:
    """The kinds a case stands on, read from the TOML alone: what it is compared with, then its bounds' source."""
    if case.get("golden") is None:
        return ["reference"]
    if case["golden"].rsplit("-", 1)[-1] == "exact":
        return ["exact-golden"]
    return ["semantic-golden", "calibration" if "calibration" in case else "bound"]


@pytest.mark.parametrize("descriptor", DESCRIPTORS, ids=lambda p: p.name)
def test_every_committed_descriptor_resolves_each_kind_as_it_states(descriptor):
    doc = tomllib.loads(descriptor.read_text())
    desc = load_descriptor(descriptor)
    plan = resolve(desc)
    rows = plan_rows(plan)
    by_case: dict[str, list[BaselineRow]] = {}
    for row in rows:
        by_case.setdefault(row.case, []).append(row)
    assert {c: [r.kind.name for r in rs] for c, rs in by_case.items()} == {
        name: stated_kinds(case) for name, case in doc["cases"].items()}
    for row in rows:
        spec = plan.case(row.case).spec
        if row.kind in (EXACT_GOLDEN, SEMANTIC_GOLDEN):  # the file chosen for this runtime, by its digest
            golden = load_golden(spec.golden_path)
            assert (row.standing, row.file, row.sha256) == (Standing.MATCH, paths.display(golden.path), golden.sha256)
        elif row.kind is CALIBRATION:  # the record chosen for this class of hardware
            assert spec.calibration is not None and row.sha256 == spec.calibration["sha256"]
        elif row.kind is HAND_SET_BOUND:
            assert row.standing == Standing.HAND_SET and row.remedy == f"parity-kit calibrate --case {row.case}"
        else:
            assert row.kind is IN_KERNEL_REFERENCE and row.standing == Standing.IN_KERNEL
    # Every golden entry passes its kind's own check, each runtime's golden, not only this host's.
    for entry in plan.goldens.values():
        of_golden(entry.kind).check_listed(entry, [load_golden(f) for f in entry.files], registry.golden_runtime)


def test_the_preflight_checks_every_kind_of_the_embedded_descriptor(embedded):
    """The embedded descriptor holds every kind a case is judged by (exact and semantic goldens, calibration
    records, an in-kernel reference): its preflight passes, as before."""
    plan = resolve(load_descriptor(embedded.descriptor))
    assert {r.kind for r in plan_rows(plan)} == {EXACT_GOLDEN, SEMANTIC_GOLDEN, CALIBRATION, IN_KERNEL_REFERENCE}
    check_inputs(plan)


def test_an_exact_entry_listing_one_runtime_twice_is_refused_by_its_kind(embedded):
    plan = resolve(load_descriptor(embedded.descriptor))
    entry = plan.goldens["exact"]
    golden = load_golden(entry.files[0])
    with pytest.raises(BadInput, match=r"goldens\.exact: .* were both made on .*; list one golden per runtime"):
        EXACT_GOLDEN.check_listed(entry, [golden, golden], registry.golden_runtime)
    SEMANTIC_GOLDEN.check_listed(plan.goldens["semantic"], [golden, golden], registry.golden_runtime)  # any runtime


def test_a_baseline_record_written_in_the_earlier_spelling_still_reads():
    from kit.views.baselines import before_table, bounds_frame

    doc = {"before": [{"case": "checkpoint", "kind": "exact golden", "standing": "missing", "rule": "r"},
                      {"case": "hf-bf16", "kind": "calibration", "standing": "missing", "rule": "r", "file": None}],
           "made": [{"kind": "exact-golden", "case": "exact", "runtime": "a runtime", "bounds": {}},
                    {"kind": "calibration", "case": "hf-bf16", "runtime": "cpu", "bounds": {"128": 0.01}}]}
    assert list(before_table(doc).index) == [("checkpoint", "exact golden"), ("hf-bf16", "calibration")]
    frame = bounds_frame(doc)
    assert frame.to_dict("records") == [{"case": "hf-bf16", "bucket": 128, "new": 0.01, "before": None}]
