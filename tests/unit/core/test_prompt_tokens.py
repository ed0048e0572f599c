"""A prompt the model cannot be fed, and a golden naming a token the model does not have, are refused by the
commands that check them, in one line and exit 3, with nothing made: a fixture holding a token id outside the
vocabulary (or an empty prompt, or a negative id) passed `fixture verify --model`, then `golden make` died with
IndexError (exit 70); `golden verify --model` passed a golden that the gate then refused."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from kit.core.baselines.golden import golden_top_list_problem
from kit.core.records.fixture import fixture_document, load_fixture
from kit.core.records.jsonio import canonical_bytes, sha256_bytes, write_canonical
from support import parity_kit


def one_line(proc) -> str:
    assert proc.returncode == 3 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr[-800:])
    [line] = proc.stderr.splitlines()
    return line.removeprefix("parity-kit: bad input: ")


def fixture_with(embedded, folder, edit):
    fixture = load_fixture(embedded.fixture)
    prompts = list(fixture.prompts[:3])
    prompts[1] = edit(prompts[1])
    doc = fixture_document(fixture.tokenizer, fixture.tokenizer_digest, prompts)
    folder.mkdir()
    return write_canonical(folder / f"{sha256_bytes(canonical_bytes(doc))}.json", doc), prompts[1].id


@pytest.mark.parametrize("edit, says", [
    (lambda p: replace(p, prompt_token_ids=(*p.prompt_token_ids[:-1], 768)),
     "prompt {id}: token id 768 (position {last}) is outside the vocabulary of model {model} (768 tokens, "
     "vocab_size in {model}/config.json)"),
    (lambda p: replace(p, prompt="", prompt_token_ids=()),
     "case #2: it has no token ids (an empty prompt has no next token to score)"),
    (lambda p: replace(p, prompt_token_ids=(-1, *p.prompt_token_ids[1:])), "case #2: token id -1 is negative"),
])
def test_a_prompt_the_model_cannot_take_is_refused_by_verify_and_by_golden_make(tmp_path, embedded, edit, says):
    path, prompt_id = fixture_with(embedded, tmp_path / "fixtures", edit)
    last = len(load_fixture(embedded.fixture).prompts[1].prompt_token_ids) - 1
    expected = f"fixture {path}: " + says.format(id=prompt_id, last=last, model=embedded.model)
    assert one_line(parity_kit("fixture", "verify", path, "--model", embedded.model)) == expected
    out = tmp_path / "goldens"
    made = parity_kit("golden", "make", "--model", embedded.model, "--fixture", path, "--kind", "semantic",
                      "--out", out)
    assert one_line(made) == expected
    assert not out.exists()  # nothing made


def test_a_golden_naming_a_token_outside_the_vocabulary_is_refused_by_verify(tmp_path, embedded):
    doc = json.loads(embedded.goldens["semantic"].read_text())
    case = doc["cases"][5]
    case["top_logprobs"][-1]["token_id"] = 768
    golden = tmp_path / "oov.json"
    golden.write_bytes(canonical_bytes(doc))
    verify = ["golden", "verify", golden, "--fixture", embedded.fixture]
    assert parity_kit(*verify).returncode == 0  # without the model, nothing says what its vocabulary is
    assert one_line(parity_kit(*verify, "--model", embedded.model)) == (
        f"golden {golden}: case {case['id']}: token id 768 is outside the vocabulary of model {embedded.model} "
        f"(768 tokens, vocab_size in {embedded.model}/config.json)")


def test_a_golden_whose_probabilities_sum_past_one_is_refused_by_verify_naming_the_prompt(tmp_path, embedded):
    doc = json.loads(embedded.goldens["semantic"].read_text())
    case = doc["cases"][3]
    top = case["top_logprobs"]
    for i, entry in enumerate(top):  # three tokens each near certain: no distribution gives that
        entry["logprob"] = -0.05 - 0.01 * i if i < 3 else min(entry["logprob"], -0.08)
    mass = math.fsum(math.exp(e["logprob"]) for e in top)
    golden = tmp_path / "mass.json"
    golden.write_bytes(canonical_bytes(doc))
    assert one_line(parity_kit("golden", "verify", golden, "--fixture", embedded.fixture)) == (
        f"golden {golden}: case {case['id']}: its top-{len(top)} probabilities (exp of the logprobs) sum to "
        f"{mass:.6g}, more than 1: no model's distribution gives that")
    assert mass > 2.8


@pytest.mark.parametrize("over, refused", [(0.0, False), (1e-3, False), (2.0 ** -8 * math.log(20) * 0.9, False),
                                           (0.05, True), (1.85, True)])
def test_a_top_list_may_sum_past_one_by_rounding_only(over, refused):
    k = 20
    probs = [(1 + over) * 0.5 ** (i + 1) / (1 - 0.5 ** k) for i in range(k)]  # geometric, summing to 1 + over
    top = [(i, math.log(p)) for i, p in enumerate(probs)]
    assert (golden_top_list_problem(top, k) is not None) == refused


@pytest.mark.parametrize("edit, says", [
    (lambda p: replace(p, prompt_token_ids=(*p.prompt_token_ids[:2], 3.5, *p.prompt_token_ids[3:])),
     "fixture {path} is malformed: TypeError: token id 3.5 is not an integer"),  # int() made it 3: a golden was made
    (lambda p: replace(p, prompt_token_ids=(True, *p.prompt_token_ids[1:])),
     "fixture {path} is malformed: TypeError: token id True is not an integer"),
    (lambda p: replace(p, prompt_token_ids=("5", *p.prompt_token_ids[1:])),
     "fixture {path} is malformed: TypeError: token id '5' is not an integer"),
    (lambda p: replace(p, bucket="128"), "fixture {path} is malformed: TypeError: bucket '128' is not an integer"),
    (lambda p: replace(p, bucket=8), "fixture {path}: case #2: bucket 8 is smaller than its {n} tokens"),
])
def test_a_fixture_holding_what_is_no_token_id_or_bucket_is_refused_as_it_loads(tmp_path, embedded, edit, says):
    path, _ = fixture_with(embedded, tmp_path / "fixtures", edit)
    n = len(load_fixture(embedded.fixture).prompts[1].prompt_token_ids)
    assert one_line(parity_kit("fixture", "verify", path)) == says.format(path=path, n=n)


def test_json_nested_past_what_its_reader_follows_is_one_line_wherever_it_is_read(tmp_path, embedded):
    """json's reader recurses per level: a file of [[[[... ended each command in a RecursionError (exit 70)."""
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    fixture = tmp_path / f"{sha256_bytes(deep)}.json"  # named by its digest, as a fixture must be
    fixture.write_bytes(deep)
    assert one_line(parity_kit("fixture", "verify", fixture)) == (
        f"fixture {fixture} is malformed: it nests deeper than a JSON reader can follow")
    golden = tmp_path / "golden.json"
    golden.write_bytes(deep)
    assert one_line(parity_kit("golden", "verify", golden, "--fixture", embedded.fixture)) == (
        f"golden {golden} is malformed: it nests deeper than a JSON reader can follow")
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_bytes((embedded.model / "tokenizer.json").read_bytes())
    (model / "config.json").write_bytes(deep)
    assert one_line(parity_kit("fixture", "verify", embedded.fixture, "--model", model)) == (
        f"model config {model / 'config.json'} is not valid JSON: it nests deeper than a JSON reader can follow")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_bytes(b'{"id": "a", "prompt": "b"}\n' + deep + b"\n")
    made = parity_kit("fixture", "make", "--prompts", prompts, "--model", embedded.model, "--out", tmp_path / "out")
    assert one_line(made) == f"{prompts}:2: not JSON: it nests deeper than a JSON reader can follow"
    assert not (tmp_path / "out").exists()
