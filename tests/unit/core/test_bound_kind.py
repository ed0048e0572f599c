"""Where a case's bounds came from is a BoundKind: written in the words results have always held, read back as the
member, and an older result (no kind recorded, or one this kit does not know) read by its golden's kind."""

from __future__ import annotations

import json

import pytest

from kit.core.records.records import BoundKind, CaseResult, GoldenMode
from kit.core.records.spec import CaseSpec
from kit.core.verdict.judge import bound_source

pytestmark = pytest.mark.unit

CAL = {"sha256": "a" * 64, "path": "cal.json", "rule": "k=3", "noise": 0.001, "noise_class": "x",
       "fingerprint": {"runtime": {"device": "cpu"}, "release": {}}}


def spec(calibration: dict | None) -> CaseSpec:
    return CaseSpec("c", "hf", "k", "n.ipynb", 60.0, "m", "d", "f", "g", GoldenMode.SEMANTIC, 0.01, 5, "t",
                    calibration=calibration)


def test_the_bound_source_keeps_the_words_results_have_always_held():
    written = [json.loads(json.dumps(bound_source(spec(cal), exact)))["kind"]
               for cal, exact in ((None, True), (None, False), (CAL, False))]
    assert written == ["exact", "hand-set", "calibrated"]
    assert [BoundKind.of({"kind": w}, GoldenMode.SEMANTIC) for w in written] == [BoundKind.EXACT, BoundKind.HAND_SET,
                                                                       BoundKind.CALIBRATED]


@pytest.mark.parametrize("source, golden_kind, kind", [
    ({}, GoldenMode.EXACT, BoundKind.EXACT),  # a result written before bound sources were recorded
    ({}, GoldenMode.SEMANTIC, BoundKind.HAND_SET),
    (None, None, BoundKind.HAND_SET),
    ({"kind": "measured"}, GoldenMode.SEMANTIC, BoundKind.HAND_SET),
                                                       # a word this kit does not know: its golden decides
    ({"kind": "calibrated", "record": "b" * 64}, GoldenMode.SEMANTIC, BoundKind.CALIBRATED),
])
def test_a_result_reads_its_bound_kind_and_an_older_one_its_goldens(source, golden_kind, kind):
    assert BoundKind.of(source, golden_kind) is kind
    result = CaseResult("c", "hf", "passed", golden_kind=golden_kind, bound_source=source or {})
    assert result.bound_kind is kind
