"""A prompt the model cannot be fed, and a golden naming a token the model does not have, are refused by the
commands that check them, in one line and exit 3, with nothing made: a fixture holding a token id outside the
vocabulary (or an empty prompt, or a negative id) passed `fixture verify --model`, then `golden make` died with
IndexError (exit 70); `golden verify --model` passed a golden that the gate then refused."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kit.core.fixture import fixture_document, load_fixture
from kit.core.jsonio import canonical_bytes, sha256_bytes, write_canonical
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
