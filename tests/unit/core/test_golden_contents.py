"""A golden's contents are checked when it loads: a top list that no model could have produced is refused
with one line naming the file, the case and what is wrong (scoring would otherwise judge against it)."""

from __future__ import annotations

import hashlib
import json

import pytest

from kit.core.errors import BadInput
from kit.core.records.fixture import load_fixture
from kit.core.baselines.golden import load_golden
from kit.core.records.jsonio import canonical_bytes


def _edited(embedded, tmp_path, edit):
    """The semantic golden with the third case's top list edited, written canonically (so it loads as far
    as its contents)."""
    doc = json.loads(embedded.goldens["semantic"].read_text())
    case = doc["cases"][2]
    edit(case["top_logprobs"])
    path = tmp_path / "golden.json"
    path.write_bytes(canonical_bytes(doc))
    return path, case["id"], case["top_logprobs"]


def _set(rank, key, value):
    return lambda top: top[rank].__setitem__(key, value)


EDITS = {
    "cut to one token": (lambda top: top.__delitem__(slice(1, None)),
                         "its top_logprobs list holds 1 token, but the golden's top_k is 25"),
    "empty": (lambda top: top.clear(), "its top_logprobs list is empty"),
    "negative id": (_set(1, "token_id", -1), "token id -1 (rank 2) is negative"),
    "positive logprob": (_set(0, "logprob", 0.5), "token {t0} (rank 1) has logprob 0.5; a logprob is finite and at "
                                                  "most 0"),
}


@pytest.mark.parametrize("what", list(EDITS))
def test_a_golden_whose_top_list_no_model_produced_is_refused(tmp_path, embedded, what):
    edit, expected = EDITS[what]
    path, cid, top = _edited(embedded, tmp_path, edit)
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    t0 = top[0]["token_id"] if top else None
    assert str(exc.value) == f"golden {path}: case {cid}: " + expected.format(t0=t0)


def test_a_token_listed_twice_is_refused(tmp_path, embedded):
    path, cid, top = _edited(embedded, tmp_path, lambda top: top[1].__setitem__("token_id", top[0]["token_id"]))
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    assert str(exc.value) == f"golden {path}: case {cid}: token id {top[0]['token_id']} is listed twice"


def test_logprobs_out_of_order_are_refused(tmp_path, embedded):
    path, cid, top = _edited(embedded, tmp_path, lambda top: top[0].__setitem__("logprob", top[1]["logprob"] - 1.0))
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    assert str(exc.value) == (f"golden {path}: case {cid}: logprobs are not in descending order: token "
                              f"{top[1]['token_id']} (rank 2) has {top[1]['logprob']!r}, above rank 1's "
                              f"{top[0]['logprob']!r}")


@pytest.mark.parametrize("constant", ["NaN", "-Infinity", "-1e999"])
def test_a_non_finite_logprob_in_the_file_names_its_case(tmp_path, embedded, constant):
    path, cid, top = _edited(embedded, tmp_path, lambda top: top[0].__setitem__("logprob", -1.0))
    data = path.read_bytes().replace(b'"logprob":-1.0', f'"logprob":{constant}'.encode(), 1)
    path.write_bytes(data)
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    value = "nan" if constant == "NaN" else "-inf"
    assert str(exc.value) == (f"golden {path}: case {cid}: token {top[0]['token_id']} (rank 1) has logprob "
                              f"{value}; a logprob is finite and at most 0")


def test_nan_outside_the_top_lists_is_refused(tmp_path, embedded):
    doc = json.loads(embedded.goldens["semantic"].read_text())
    doc["provenance"]["python"] = float("nan")
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    assert str(exc.value) == f"golden {path} holds NaN or Infinity, which JSON does not allow"


@pytest.mark.parametrize("constant", ["NaN", "-Infinity"])
def test_a_fixture_holding_nan_or_infinity_is_refused(tmp_path, embedded, constant):
    doc = json.loads(embedded.fixture.read_text())
    doc["tokenizer_digest"] = "@"
    data = canonical_bytes(doc).replace(b'"@"', constant.encode())
    path = tmp_path / f"{hashlib.sha256(data).hexdigest()}.json"  # content-addressed: named by its own digest
    path.write_bytes(data)
    with pytest.raises(BadInput) as exc:
        load_fixture(path)
    assert str(exc.value) == f"fixture {path} holds NaN or Infinity, which JSON does not allow"


def test_an_infinite_token_id_in_a_fixture_is_malformed_not_a_crash(tmp_path, embedded):
    data = embedded.fixture.read_bytes().replace(b'"prompt_token_ids":[0,', b'"prompt_token_ids":[1e999,', 1)
    path = tmp_path / f"{hashlib.sha256(data).hexdigest()}.json"
    path.write_bytes(data)
    with pytest.raises(BadInput) as exc:
        load_fixture(path)
    assert str(exc.value) == f"fixture {path} is malformed: TypeError: token id inf is not an integer"
