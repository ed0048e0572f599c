"""`parity-kit localize --model DIR` refuses a candidate folder that cannot stand for the case's own model with
other weights, in one line naming it (exit 3), before the case runs and before anything is written: no weights,
another architecture or shape, zero layers, a GPT-2 config, a broken config.json, the native Levanter folder, a
context shorter than the case's prompts. Each folder is the embedded model's copy with one thing changed; no
engine is started, so the unit tier's guard would fail a test whose refusal came after the case ran."""

from __future__ import annotations

import json
import shutil

import pytest

from kit.cli import main
from kit.core.records.fixture import load_fixture
from kit.descriptor.load import load_descriptor
from kit.localize.candidate import check_candidate

CASE = "hf-bf16"
LLAMA = "{c} has {found}, where case hf-bf16's model has {own}: a candidate is the case's own network with other " \
        "weights"


def candidate(tmp_path, embedded, change=None, weights=True):
    """A copy of the case's own model folder with its config changed by ``change``, with or without weights."""
    folder = tmp_path / "cand"
    shutil.copytree(embedded.model, folder, ignore=None if weights else shutil.ignore_patterns("*.safetensors"))
    if change is not None:
        config = json.loads((folder / "config.json").read_text())
        change(config)
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def refused(capsys, embedded, tmp_path, model) -> str:
    out = tmp_path / "loc"
    assert main(["localize", str(embedded.descriptor), CASE, "--model", str(model), "--out", str(out)]) == 3
    stdout, err = capsys.readouterr()
    assert stdout == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert not out.exists()
    return err.removeprefix("parity-kit: bad input: ").rstrip("\n")


GPT2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 2, "n_embd": 128, "n_head": 4,
        "n_positions": 1024, "vocab_size": 768}


@pytest.mark.parametrize("change, found, own", [
    (lambda c: c.update(hidden_size=256, intermediate_size=768), "hidden_size 256", "128"),
    (lambda c: c.update(num_hidden_layers=0), "num_hidden_layers 0", "2"),
    (lambda c: c.pop("num_attention_heads"), "no num_attention_heads", "4"),
    (lambda c: (c.clear(), c.update(GPT2)), "model_type 'gpt2'", "'llama'"),
    (lambda c: c.update(architectures=["MistralForCausalLM"]), "architectures ['MistralForCausalLM']",
     "['LlamaForCausalLM']"),
])
def test_another_network_is_refused_naming_the_key(tmp_path, embedded, capsys, monkeypatch, change, found, own):
    monkeypatch.chdir(tmp_path)
    folder = candidate(tmp_path, embedded, change)
    assert refused(capsys, embedded, tmp_path, folder) == LLAMA.format(c="--model cand: its config.json",
                                                                       found=found, own=own)


def test_a_folder_without_weights_is_refused(tmp_path, embedded, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = candidate(tmp_path, embedded, weights=False)
    assert refused(capsys, embedded, tmp_path, folder) == (
        "--model cand holds no weights (no *.safetensors file, as the case's model has)")


@pytest.mark.parametrize("text, why", [
    ('{"model_type": "llama", "hidden', "is not valid JSON: Unterminated string starting at: line 1 column 25 "
                                        "(char 24)"),
    ("[]", "is not a JSON object"),
])
def test_a_broken_config_is_refused_naming_it(tmp_path, embedded, capsys, monkeypatch, text, why):
    monkeypatch.chdir(tmp_path)
    folder = candidate(tmp_path, embedded)
    (folder / "config.json").write_text(text)
    assert refused(capsys, embedded, tmp_path, folder) == f"model config {folder / 'config.json'} {why}"


def test_the_native_levanter_folder_is_refused(tmp_path, embedded, capsys, monkeypatch):
    native = embedded.models["tiny-llama-levanter"]["path"]
    shutil.copytree(native, tmp_path / "native")
    monkeypatch.chdir(tmp_path)
    assert refused(capsys, embedded, tmp_path, tmp_path / "native") == (
        "--model native is a native Levanter checkpoint (levanter_config.json, no config.json), which the float32 "
        "reference cannot load: give the candidate in the HF format")


def test_a_folder_that_is_not_a_model_is_refused(tmp_path, embedded, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    assert refused(capsys, embedded, tmp_path, tmp_path / "empty") == (
        "--model empty has no config.json: not a Hugging Face model folder")
    assert refused(capsys, embedded, tmp_path, tmp_path / "nowhere") == "--model nowhere: no such model folder"


def test_a_context_shorter_than_the_cases_prompts_is_refused(tmp_path, embedded, capsys, monkeypatch):
    """A 128-token context holds none of the prompts of the longer buckets: refused, not localized anyway."""
    monkeypatch.chdir(tmp_path)
    folder = candidate(tmp_path, embedded, lambda c: c.update(max_position_embeddings=128))
    assert refused(capsys, embedded, tmp_path, folder) == (
        "--model cand: prompt chat-sharegpt-03 has 180 tokens, more than the context of model cand (128, "
        f"max_position_embeddings in {folder / 'config.json'})")


def test_the_cases_own_network_with_other_weights_is_accepted(tmp_path, embedded):
    spec = load_descriptor(embedded.descriptor).case_specs([CASE])[0]
    prompts = load_fixture(spec.fixture_path).select(spec.prompt_ids, spec.buckets)
    check_candidate(spec, candidate(tmp_path, embedded, lambda c: c.update(rope_theta=20000.0)), prompts)
