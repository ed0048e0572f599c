"""Fixture coverage: the vocabulary share, token classes and positions a fixture's prompts exercise.

A small byte-level tokenizer written here gives exact numbers for every count; the embedded fixture
with its model gives the numbers `parity-kit fixture report` prints for the gate that ships.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass

import pytest

from kit.core.errors import BadInput
from kit.core.noise.vocabcoverage import CLASSES, token_class, load_token_vocab, shown, token_vocab, vocab_coverage
from support import parity_kit

# Byte-level BPE spells bytes it cannot print with stand-ins: "Ġ" is a space, "Ċ" a newline, "Ā" byte 0;
# "Ã" is byte 0xC3 (half of "é"), "Ã©" the whole "é".
BYTE_LEVEL = {
    "model": {"type": "BPE", "vocab": {
        "<s>": 0, "</s>": 1, "Ġ": 2, "Ċ": 3, "a": 4, "Ġthe": 5, "12": 6, "Ġ(": 7, "x_1": 8, "Ã": 9, "Ã©": 10,
        "Ā": 11, "ĠĠ": 12}},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "ByteLevel", "add_prefix_space": False}]},
    "decoder": {"type": "ByteLevel"},
    "added_tokens": [{"id": 0, "content": "<s>", "special": True}, {"id": 1, "content": "</s>", "special": True},
                     {"id": 13, "content": "<tool>", "special": False}],
}
VOCAB_SIZE = 16  # the model's: ids 14 and 15 are no token of the tokenizer


@dataclass(frozen=True)
class P:
    bucket: int
    prompt_token_ids: tuple[int, ...]


PROMPTS = [P(8, (0, 5, 2, 4, 6, 6)), P(8, (0, 8, 7, 3)), P(16, (0, 5, 10, 5, 6, 13, 12, 4, 4))]


def test_byte_level_pieces_are_the_bytes_they_stand_for():
    vocab = token_vocab(BYTE_LEVEL)
    assert vocab.pieces == {0: b"<s>", 1: b"</s>", 2: b" ", 3: b"\n", 4: b"a", 5: b" the", 6: b"12", 7: b" (",
                            8: b"x_1", 9: b"\xc3", 10: "é".encode(), 11: b"\x00", 12: b"  ", 13: b"<tool>"}
    assert vocab.special == {0, 1}
    assert vocab.size == 14


def test_coverage_counts_exactly():
    cov = vocab_coverage("f" * 64, PROMPTS, VOCAB_SIZE, token_vocab(BYTE_LEVEL), context=32, vocab_source="config")
    assert (cov.prompts, cov.tokens, cov.distinct, cov.vocab_size) == (3, 19, 11, 16)
    assert (cov.share, cov.unseen, cov.unseen_share) == (11 / 16, 5, 5 / 16)
    assert (cov.max_tokens, cov.context, cov.context_share) == (9, 32, 9 / 32)
    assert [b.to_dict() for b in cov.buckets] == [
        {"bucket": 8, "prompts": 2, "tokens": 10, "distinct": 8, "share": 0.5, "max_tokens": 6},
        {"bucket": 16, "prompts": 1, "tokens": 9, "distinct": 7, "share": 7 / 16, "max_tokens": 9}]
    table = {c.name: (c.vocab, c.seen, c.occurrences, c.unseen_examples) for c in cov.classes}
    assert table == {
        "special": (2, 1, 3, ("'</s>'",)),
        "byte": (2, 0, 0, ("'\\xc3'", "'\\x00'")),
        "whitespace": (3, 3, 3, ()),
        "digits": (1, 1, 3, ()),
        "punctuation": (1, 1, 1, ()),
        "ascii-word": (2, 2, 6, ()),
        "code": (2, 2, 2, ()),
        "non-ascii": (1, 1, 1, ()),
        "unassigned": (2, 0, 0, ("#14", "#15")),
    }
    assert list(table) == list(CLASSES)
    # Ids the tokenizer never produces are not a blind spot of the prompts; bytes no prompt holds are.
    assert [c.name for c in cov.blind_classes] == ["byte"]
    assert cov.headline() == ("the prompts use 11 of 16 vocabulary tokens (68.8%); 5 (31.2%) never appear, and a "
                              "fault on them cannot be seen; no prompt holds a token of class byte (2)")
    assert cov.positions_line() == ("the longest prompt has 9 tokens, 28.1% of the model's context of 32: a fault "
                                    "past position 8 cannot be seen")
    d = cov.to_dict()
    assert d["blind_classes"] == ["byte"] and d["out_of_vocab"] == [] and d["vocab_source"] == "config"
    assert d["classes"][1] == {"name": "byte", "description": CLASSES["byte"], "vocab": 2, "seen": 0, "share": 0.0,
                               "occurrences": 0, "unseen_examples": ["'\\xc3'", "'\\x00'"]}
    assert json.loads(json.dumps(d)) == d


def test_size_from_the_tokenizer_and_ids_outside_the_vocabulary():
    vocab = token_vocab(BYTE_LEVEL)
    cov = vocab_coverage("f" * 64, PROMPTS, vocab=vocab)
    assert (cov.vocab_size, cov.vocab_source, cov.out_of_vocab) == (14, "tokenizer", ())
    assert "unassigned" not in [c.name for c in cov.classes if c.vocab]
    assert vocab_coverage("f" * 64, PROMPTS, 12, vocab).out_of_vocab == (12, 13)


def test_without_vocabulary_only_the_fixture_counts():
    cov = vocab_coverage("f" * 64, PROMPTS)
    assert (cov.distinct, cov.vocab_size, cov.share, cov.unseen, cov.classes) == (11, None, None, None, ())
    assert cov.buckets[0].share is None
    assert cov.headline() == "the prompts use 11 distinct tokens (vocabulary size unknown)"
    assert cov.positions_line() == "the longest prompt has 9 tokens (the model's context is unknown)"


@pytest.mark.parametrize("piece, cls", [
    (b"\t", "whitespace"), (b"\n\n", "whitespace"), ("\u3000".encode(), "whitespace"),
    (b"\x1f", "byte"), (b"\x7f", "byte"), (b"\xe2\x82", "byte"), (b"", "byte"),
    (b" 2024", "digits"), (b"->", "punctuation"), (b"\n    return", "ascii-word"), (b"def(", "code"),
    (b"a b", "code"), (" über".encode(), "non-ascii"), ("東京".encode(), "non-ascii"), ("🙂".encode(), "non-ascii"),
])
def test_classify(piece, cls):
    assert token_class(piece) == cls


def test_classify_special_and_missing():
    assert token_class(b"<|eos|>", special=True) == "special"
    assert token_class(None) == "unassigned"
    assert shown(b"\xc3") == "'\\xc3'" and shown(b" the") == "' the'"


def test_sentencepiece_wordpiece_and_unigram_spellings():
    sp = token_vocab({
        "model": {"type": "BPE", "byte_fallback": True,
                  "vocab": {"<unk>": 0, "<0x0A>": 1, "<0xC3>": 2, "▁the": 3, "▁": 4, "▁1": 5}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace"}, {"type": "ByteFallback"}]},
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True}]})
    assert sp.pieces == {0: b"<unk>", 1: b"\n", 2: b"\xc3", 3: b" the", 4: b" ", 5: b" 1"}
    assert [token_class(sp.pieces[i], i in sp.special) for i in range(6)] == [
        "special", "whitespace", "byte", "ascii-word", "whitespace", "digits"]
    wp = token_vocab({"model": {"type": "WordPiece", "continuing_subword_prefix": "##",
                                "vocab": {"[CLS]": 0, "run": 1, "##ning": 2, "##": 3}}})
    assert wp.pieces == {0: b"[CLS]", 1: b"run", 2: b"ning", 3: b"##"}
    uni = token_vocab({"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["▁hello", -1.0], ["é", -2.0]]}})
    assert uni.pieces == {0: b"<unk>", 1: b" hello", 2: "é".encode()}


def test_load_token_vocab(tmp_path):
    assert load_token_vocab(tmp_path) is None
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}}))
    with pytest.raises(BadInput, match="is not a tokenizer.json the kit reads"):
        load_token_vocab(tmp_path)
    (tmp_path / "tokenizer.json").write_text(json.dumps(BYTE_LEVEL))
    assert load_token_vocab(tmp_path).size == 14


def _rows(text: str) -> list[list[str]]:
    """The body rows of the tables rich printed, as cells (box drawing or ASCII)."""
    rows = []
    for line in text.splitlines():
        if line[:1] in ("│", "┃", "|"):
            rows.append([c.strip() for c in line.split(line[0])[1:-1]])
    return rows


def test_fixture_report_on_the_embedded_fixture(tmp_path, embedded):
    proc = parity_kit("fixture", "report", embedded.fixture, "--model", embedded.model,
                      "--json", tmp_path / "coverage.json")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"fixture {embedded.fixture.name}: 64 prompts, 23746 tokens\n" in out
    assert f"vocabulary: 768 tokens (vocab_size in {embedded.model / 'config.json'})\n" in out
    assert ("the prompts use 310 of 768 vocabulary tokens (40.4%); 458 (59.6%) never appear, and a fault on them "
            "cannot be seen; no prompt holds a token of class byte (156)\n") in out
    assert ("the longest prompt has 993 tokens, 97.0% of the model's context of 1024: a fault past position 992 "
            "cannot be seen\n") in out
    rows = _rows(out)
    assert [r for r in rows if r[0] == "bucket" or r[0].isdigit()] == [
        ["bucket", "prompts", "tokens", "distinct", "of vocab", "longest"],
        ["128", "16", "1290", "211", "27.5%", "115"],
        ["256", "16", "3020", "270", "35.2%", "223"],
        ["512", "16", "6140", "299", "38.9%", "475"],
        ["1024", "16", "13296", "310", "40.4%", "993"]]
    classes = {r[0]: r[1:5] for r in rows if len(r) == 6 and r[0] and not r[0].isdigit() and r[0] != "bucket"}
    assert classes == {
        "class": ["in vocab", "seen", "share", "occurrences"],
        "special": ["3", "1", "33.3%", "64"],
        "byte !": ["156", "0", "0.0%", "0"],
        "whitespace": ["12", "4", "33.3%", "2449"],
        "digits": ["72", "72", "100.0%", "1620"],
        "punctuation": ["52", "25", "48.1%", "7726"],
        "ascii-word": ["473", "208", "44.0%", "11887"],
        "code": ["0", "0", "—", "0"],
        "non-ascii": ["0", "0", "—", "0"],
        "unassigned": ["0", "0", "—", "0"],
    }
    assert ("! byte: no text on its own: control characters, pieces of a multi-byte character; none of its 156 "
            "tokens is in any prompt: a fault on these tokens cannot be seen\n") in out
    written = json.loads((tmp_path / "coverage.json").read_text())
    assert out.endswith(f"written: {tmp_path / 'coverage.json'}\n")
    counts = (written["distinct"], written["vocab_size"], written["unseen"], written["max_tokens"])
    assert counts == (310, 768, 458, 993)
    assert [b["distinct"] for b in written["buckets"]] == [211, 270, 299, 310]
    assert written["blind_classes"] == ["byte"]
    assert sum(c["vocab"] for c in written["classes"]) == 768
    assert sum(c["occurrences"] for c in written["classes"]) == 23746

    as_json = parity_kit("fixture", "report", embedded.fixture, "--model", embedded.model, "--json", "-")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == written


def test_fixture_report_bad_input(tmp_path, embedded):
    small = tmp_path / "small"
    small.mkdir()
    shutil.copy(embedded.model / "tokenizer.json", small)
    config = json.loads((embedded.model / "config.json").read_text())
    (small / "config.json").write_text(json.dumps({**config, "vocab_size": 100}))
    proc = parity_kit("fixture", "report", embedded.fixture, "--model", small)
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.startswith(f"parity-kit: bad input: fixture {embedded.fixture}: prompt ")  # verify_fixture's
    assert proc.stderr.endswith(f"is outside the vocabulary of model {small} (100 tokens, vocab_size in "
                                f"{small / 'config.json'})\n")
    no_tok = parity_kit("fixture", "report", embedded.fixture, "--model", tmp_path)
    assert no_tok.returncode == 3 and f"{tmp_path / 'tokenizer.json'} does not exist" in no_tok.stderr
    to_dir = parity_kit("fixture", "report", embedded.fixture, "--json", tmp_path)
    assert to_dir.returncode == 3 and f"--json {tmp_path} is a directory" in to_dir.stderr
