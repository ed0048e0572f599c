"""A lineage entry is judged by its bytes and its chain: renamed, edited, looping, orphaned or doubled chains are
refused in one line naming the file; how a chain's bounds moved is counted per step."""

from __future__ import annotations

import json
import re

import pytest

from kit.core.baselines.baselinekind import CALIBRATION, EXACT_GOLDEN, POWER, SEMANTIC_GOLDEN
from kit.core.errors import BadInput
from kit.core.baselines.lineage import (LineageEntry, bound_moves, chain, check_chains, entry_of, heads, load_entry,
                                        load_folder, write_entry)

pytestmark = pytest.mark.unit


def entry(baseline: str, supersedes: str | None = None, bounds: dict | None = None, runtime: str = "cpu (x86-64-v3)",
          case: str = "hf-bf16", reason: str = "new CPU class") -> LineageEntry:
    return LineageEntry("tiny-cpu", CALIBRATION, case, baseline * 64, f"../calibrations/{baseline * 64}.json",
                        runtime, supersedes, reason, ("parity-kit", "baseline", "make"), "2026-12-02T10:00:00+00:00",
                        bounds or {"128": 0.016})


def test_an_entry_is_written_once_under_its_digest_and_read_back_equal(tmp_path):
    e = entry("a")
    path = write_entry(tmp_path, e)
    assert path.name == f"{e.sha256}.json"
    assert write_entry(tmp_path, e) == path  # the same entry again: the same file, kept as it is
    assert load_entry(path) == e
    assert load_folder(tmp_path) == [e]


def test_an_edited_or_renamed_entry_is_refused_naming_the_file(tmp_path):
    path = write_entry(tmp_path, entry("a"))
    doc = json.loads(path.read_text())
    doc["bounds"]["128"] = 0.5  # a wider bound, claimed
    path.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
    with pytest.raises(BadInput, match=re.escape(f"{path}: name is not the entry's SHA-256")):
        load_entry(path)
    path.write_text(json.dumps(doc, indent=1))
    with pytest.raises(BadInput, match=re.escape(f"{path}: not canonical JSON")):
        load_entry(path)


def test_an_entry_with_an_empty_reason_or_a_bad_bound_is_refused_by_its_key(tmp_path):
    for field, value, said in (("reason", " ", "reason: expected the reason the baseline was made"),
                               ("bounds", {"128": -1}, "bounds.128: expected a positive number"),
                               ("kind", "bound", "kind: expected one of")):
        doc = {**entry("a").to_dict(), field: value}
        data = (json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        import hashlib

        path = tmp_path / f"{hashlib.sha256(data).hexdigest()}.json"
        path.write_bytes(data)
        with pytest.raises(BadInput, match=re.escape(f"{path}: malformed lineage entry: {said}")):
            load_entry(path)
        path.unlink()


def _written(tmp_path, doc: dict):
    """An entry's file as any kit writes it: canonical JSON named by its digest."""
    import hashlib

    data = (json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    path = tmp_path / f"{hashlib.sha256(data).hexdigest()}.json"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name, kind", [("calibration", CALIBRATION), ("exact-golden", EXACT_GOLDEN),
                                        ("semantic-golden", SEMANTIC_GOLDEN), ("power", POWER)])
def test_an_entry_written_with_its_kinds_name_reads_as_that_kind_and_keeps_its_digest(tmp_path, name, kind):
    # The file a kit that kept kinds as strings wrote: its kind is the one object, written back byte for byte.
    doc = {"format": "parity-kit-lineage/1", "descriptor": "tiny-cpu", "kind": name, "case": "hf-bf16",
           "baseline": "a" * 64, "file": "../x.json", "runtime": "cpu (x86-64-v3)", "supersedes": None,
           "reason": "new CPU class", "command": ["parity-kit"], "created_at": "2026-12-02T10:00:00+00:00",
           "bounds": {}, "backtest": None}
    path = _written(tmp_path, doc)
    read = load_entry(path)
    assert read.kind is kind and read.to_dict() == doc and path.name == f"{read.sha256}.json"


def test_an_entry_of_another_spelling_or_a_kind_by_name_is_refused(tmp_path):
    # "exact golden" is a status row's old spelling: an entry in it would hash to another name, so none is read.
    path = _written(tmp_path, {**entry("a").to_dict(), "kind": "exact golden"})
    with pytest.raises(BadInput, match=re.escape(f"{path}: malformed lineage entry: kind: expected one of "
                                                 "calibration, exact-golden, semantic-golden, power")):
        load_entry(path)
    with pytest.raises(TypeError, match="a lineage entry's kind is one of .* as a BaselineKind, not 'calibration'"):
        LineageEntry(**{**entry("a").__dict__, "kind": "calibration"})


def test_a_chain_with_a_missing_parent_a_loop_or_two_heads_is_refused():
    first = entry("a")
    with pytest.raises(BadInput, match="supersedes " + "f" * 64 + ", which is not in here: the lineage names a "
                                       "missing parent"):
        check_chains([entry("b", supersedes="f" * 64)], "here")
    with pytest.raises(BadInput, match="has 2 current baselines"):
        check_chains([first, entry("b"), ], "here")  # two firsts of one case, kind and runtime
    other = entry("b", supersedes=first.sha256, runtime="cpu (x86-64-v4)")
    with pytest.raises(BadInput, match="supersedes an entry of another chain"):
        check_chains([first, other], "here")
    # A loop needs two entries naming each other; their digests depend on each other, so a hand-made pair
    # is the only way one can arise: modelled by entries whose digests are fixed in advance.
    a, b = entry("c"), entry("d")
    looped = [_with_sha(a, "1" * 64, supersedes="2" * 64), _with_sha(b, "2" * 64, supersedes="1" * 64)]
    with pytest.raises(BadInput, match="its lineage forms a cycle"):
        check_chains(looped, "here")


class _Fixed(LineageEntry):
    """An entry whose digest is given, to build the loop content addressing otherwise makes impossible."""

    fixed: str = ""

    @property
    def sha256(self) -> str:  # type: ignore[override]
        return self.fixed


def _with_sha(e: LineageEntry, sha: str, supersedes: str) -> LineageEntry:
    out = _Fixed(**{**e.__dict__, "supersedes": supersedes})
    object.__setattr__(out, "fixed", sha)
    return out


def test_a_case_of_another_descriptor_in_the_same_folder_is_another_chain(tmp_path):
    from kit.core.baselines.lineage import of_descriptor

    here, there = entry("a"), LineageEntry(**{**entry("b").__dict__, "descriptor": "gpu-h200-64"})
    check_chains([here, there], "here")  # two firsts, but of two descriptors: no two heads
    assert of_descriptor([here, there], "gpu-h200-64") == [there]
    assert heads(of_descriptor([here, there], "tiny-cpu"), CALIBRATION, "hf-bf16") == {"cpu (x86-64-v3)": here}


def test_heads_chains_and_how_the_bounds_moved():
    first = entry("a", bounds={"128": 0.016, "256": 0.015})
    wider = entry("b", supersedes=first.sha256, bounds={"128": 0.02, "256": 0.015})
    mixed = entry("c", supersedes=wider.sha256, bounds={"128": 0.018, "256": 0.019})
    elsewhere = entry("d", runtime="cpu (x86-64-v4)")
    entries = [mixed, first, elsewhere, wider]
    check_chains(entries, "here")
    assert heads(entries, CALIBRATION, "hf-bf16") == {"cpu (x86-64-v3)": mixed, "cpu (x86-64-v4)": elsewhere}
    assert chain(entries, mixed) == [first, wider, mixed]
    moves = bound_moves(chain(entries, mixed))
    assert (moves.moves, moves.wider, moves.tighter) == (2, 2, 1)
    assert moves.text == "moved 2 times (2 wider, 1 tighter; latest: bucket 128 0.90x, bucket 256 1.27x)"
    assert bound_moves([first]).text == "never moved"
    assert entry_of(entries, "b" * 64) == wider and entry_of(entries, "e" * 64) is None
