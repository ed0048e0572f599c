"""Hostile or broken input through the real CLI: one line naming what and where, exit 3, nothing written.
Each is refused before any kernel starts."""

from __future__ import annotations

import json
import os

import pytest

from kit.core.records import paths
from kit.core.errors import BadInput
from kit.core.records.fixture import load_fixture
from kit.core.records.jsonio import canonical_bytes
from kit.core.model.modeldigest import model_digest
from support import copy_model, parity_kit, write_descriptor


def refused(proc, *never_written) -> str:
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for path in never_written:
        assert not path.exists(), f"a refused command wrote {path}"
    return lines[0].removeprefix("parity-kit: bad input: ")


def _line_of(path, needle):
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_a_golden_holding_nan_names_the_case(tmp_path, embedded):
    doc = json.loads(embedded.goldens["semantic"].read_text())
    case = doc["cases"][0]
    case["top_logprobs"][0]["logprob"] = float("nan")
    golden = tmp_path / "nan.json"
    golden.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")  # NaN as Python writes it
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.golden_files, "semantic": golden})
    line = refused(parity_kit("gate", desc, "--out", tmp_path / "run"), tmp_path / "run")
    assert line == (f"golden {golden}: case {case['id']}: token {case['top_logprobs'][0]['token_id']} (rank 1) "
                    "has logprob nan; a logprob is finite and at most 0")


def test_a_golden_token_outside_the_vocabulary_is_refused_not_blamed_on_the_backend(tmp_path, embedded):
    doc = json.loads(embedded.goldens["semantic"].read_text())
    case = doc["cases"][5]
    case["top_logprobs"][-1]["token_id"] = 768  # the tiny model's vocabulary is 0..767
    golden = tmp_path / "oov.json"
    golden.write_bytes(canonical_bytes(doc))
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.golden_files, "semantic": golden},
                            cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    line = refused(parity_kit("gate", desc, "--out", tmp_path / "run"), tmp_path / "run")
    assert line == (f"golden {golden}: case {case['id']}: token id 768 is outside the vocabulary of model "
                    f"{embedded.model} (768 tokens, vocab_size in {embedded.model / 'config.json'})")


def test_a_descriptor_that_is_not_utf8_is_refused_at_its_line(tmp_path):
    desc = tmp_path / "latin1.toml"
    desc.write_bytes('name = "x"\ndescription = "caf\xe9"\n'.encode("latin-1"))
    line = refused(parity_kit("gate", desc, "--out", tmp_path / "run"), tmp_path / "run")
    assert line == f"{desc}:2: not UTF-8 (byte 0xe9); a TOML descriptor is UTF-8"


def test_out_that_is_a_file_or_under_a_file_is_refused_before_the_preflight(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded)
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    assert refused(parity_kit("gate", desc, "--out", afile)) == f"run directory {afile} is a file, not a directory"
    line = refused(parity_kit("gate", desc, "--out", afile / "run"))
    assert line == f"run directory {afile / 'run'}: {afile} is a file, not a directory"
    assert afile.read_text() == "not a folder"


def test_an_unwritable_out_is_refused_without_creating_it(tmp_path, monkeypatch):
    # Root writes through permissions, so a read-only place is stood in for by what access(2) answers there.
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(tmp_path))
    with pytest.raises(BadInput) as exc:
        paths.claim_empty_dir(tmp_path / "a" / "run", "run directory", "gate run")
    assert str(exc.value) == (f"run directory {tmp_path / 'a' / 'run'}: {tmp_path} is not writable "
                              "(its permissions or a read-only filesystem)")
    assert not (tmp_path / "a").exists()


def test_a_corrupt_manifest_on_resume_is_refused(tmp_path, embedded):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text('{"name": "test", ')
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    line = refused(parity_kit("gate", desc, "--resume", run))
    assert line == (f"--resume {run}: its manifest.json is not valid JSON: Expecting property name enclosed in "
                    "double quotes: line 1 column 18 (char 17)")
    assert sorted(p.name for p in run.iterdir()) == ["manifest.json"]


def test_report_attach_under_a_file_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    afile = tmp_path / "afile"
    afile.write_text("")
    line = refused(parity_kit("report", run, "--attach", afile / "zips"))
    assert line == f"--attach {afile / 'zips'}: {afile} is a file, not a directory"


@pytest.fixture
def short_context(tmp_path, embedded):
    """A copy of the embedded model whose config says it takes 100 tokens, and the first fixture prompt
    longer than that."""
    model = copy_model(embedded, tmp_path / "short-model")
    cfg = json.loads((model / "config.json").read_text())
    cfg["max_position_embeddings"] = 100
    (model / "config.json").write_text(json.dumps(cfg))
    long = next(c for c in load_fixture(embedded.fixture).prompts if c.n_tokens > 100)
    why = f"more than the context of model {model} (100, max_position_embeddings in {model / 'config.json'})"
    return model, long, why


def test_fixture_make_refuses_a_prompt_beyond_the_context(tmp_path, short_context):
    model, long, why = short_context
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": long.id, "prompt": long.prompt}) + "\n")
    out = tmp_path / "fixtures"
    line = refused(parity_kit("fixture", "make", "--prompts", prompts, "--model", model, "--out", out), out)
    assert line == f"prompt {long.id} has {long.n_tokens} tokens, {why}"


def test_golden_make_refuses_a_prompt_beyond_the_context(tmp_path, embedded, short_context):
    model, long, why = short_context
    out = tmp_path / "goldens"
    line = refused(parity_kit("golden", "make", "--model", model, "--fixture", embedded.fixture, "--kind",
                              "semantic", "--out", out), out)
    first = next(c for c in load_fixture(embedded.fixture).prompts if c.n_tokens > 100)
    assert line == f"fixture {embedded.fixture}: prompt {first.id} has {first.n_tokens} tokens, {why}"


def test_the_gate_refuses_a_prompt_beyond_the_context(tmp_path, embedded, short_context):
    model, long, why = short_context
    desc = write_descriptor(tmp_path, embedded, model=model, model_digest=model_digest(model),
                            cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    line = refused(parity_kit("gate", desc, "--out", tmp_path / "run"), tmp_path / "run")
    assert line == (f"{desc}:{_line_of(desc, '[cases.hf-bf16]')}: case hf-bf16: prompt {long.id} has "
                    f"{long.n_tokens} tokens, {why}")
