"""Fixtures and goldens: content addressing, verification, provenance. That `golden make` never writes over a
golden runs the model first (tests/e2e/core/test_fixture_golden.py)."""

from __future__ import annotations

import json

import pytest

from kit.core.errors import BadInput
from kit.core.model.tokenizer import make_fixture, verify_fixture
from kit.core.records.fixture import bucket_for, load_fixture, read_prompts
from kit.core.baselines.golden import check_golden_matches_fixture, diff_goldens, load_golden
from kit.core.records.jsonio import canonical_bytes, sha256_file
from kit.core.model.modeldigest import model_digest
from kit.descriptor.schema import golden_kind
from support import parity_kit


def test_embedded_fixture_shape(embedded):
    fixture = load_fixture(embedded.fixture)
    assert len(fixture.prompts) == 64
    assert len(fixture.buckets) >= 4
    assert sha256_file(embedded.fixture) == embedded.fixture.stem
    for case in fixture.prompts:
        assert case.n_tokens <= case.bucket
        assert case.id.count("-") >= 2 and case.id.split("-")[-1].isdigit()


def test_fixture_make_is_deterministic_and_content_addressed(tmp_path, embedded):
    fixture = load_fixture(embedded.fixture)
    prompts = [{"id": c.id, "prompt": c.prompt} for c in fixture.prompts]
    again = make_fixture(prompts, embedded.model, tmp_path)
    assert again.name == embedded.fixture.name
    assert again.read_bytes() == embedded.fixture.read_bytes()


def test_fixture_cli_verify_and_tokenizer_mismatch(tmp_path, embedded):
    proc = parity_kit("fixture", "verify", embedded.fixture, "--model", embedded.model)
    assert proc.returncode == 0, proc.stderr
    assert f"sha256 {embedded.fixture.stem}, 64 prompts" in proc.stdout
    other_tok = tmp_path / "model"
    other_tok.mkdir()
    tok = json.loads((embedded.model / "tokenizer.json").read_text())
    tok["added_tokens"][0]["content"] = "<|other|>"
    (other_tok / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(BadInput, match="was tokenized with tokenizer"):
        verify_fixture(embedded.fixture, other_tok)


def test_fixture_make_cli(tmp_path, embedded):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "tool-atlas-01", "prompt": "{\\"tool\\": \\"atlas."}\n'
                       '{"id": "math-gsm-01", "prompt": "12 + 30 ="}\n')
    proc = parity_kit("fixture", "make", "--prompts", prompts, "--model", embedded.model, "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    made = load_fixture(proc.stdout.splitlines()[0])
    assert made.ids == ["math-gsm-01", "tool-atlas-01"]
    assert all(c.bucket == 128 and c.prompt_token_ids[0] == 0 for c in made.prompts)


def test_bucket_for():
    assert bucket_for(1, (128, 256)) == 128
    assert bucket_for(128, (128, 256)) == 128
    assert bucket_for(129, (128, 256)) == 256
    with pytest.raises(BadInput, match="exceeds the largest bucket 256"):
        bucket_for(257, (128, 256))


def test_goldens_carry_full_provenance_and_match_the_fixture(embedded):
    fixture = load_fixture(embedded.fixture)
    pinned = {embedded.doc["model"]["digest"]: embedded.model,
              **{m["digest"]: m["path"] for m in embedded.models.values()}}
    every = [(name, path) for name, files in embedded.golden_files.items()
             for path in (files if isinstance(files, list) else [files])]  # each runtime's exact golden too
    assert len(every) == 5  # semantic, its decode golden, and the exact entry's portable and two float32 goldens
    for name, path in every:
        golden = load_golden(path)
        assert golden.kind == golden_kind(name)
        check_golden_matches_fixture(golden, fixture)
        assert model_digest(pinned[golden.model_digest]) == golden.model_digest
        assert golden.top_k == 25
        assert set(golden.provenance) >= {"backend", "release", "dtype", "attention", "hardware", "command",
                                          "created_at", "kit_version"}
        # float32, as the goldens are made; the portable exact golden in float64, reported rounded to float32
        assert golden.provenance["dtype"] == ("float64" if "portable" in golden.provenance.get("runtime", "")
                                              else "float32")


def test_golden_cli_verify_and_diff(tmp_path, embedded):
    sem = embedded.goldens["semantic"]
    # The exact golden made on the semantic one's host: the same float32 path there, bit for bit.
    made_on = load_golden(sem).provenance["hardware"]
    exact = next(p for p in sem.parent.glob("44a3d799c03b-tiny-llama-1163a351b5ae-exact*.json")
                 if (load_golden(p).provenance["hardware"], load_golden(p).provenance["dtype"]) == (made_on, "float32"))
    proc = parity_kit("golden", "verify", sem, "--fixture", embedded.fixture, "--model", embedded.model)
    assert proc.returncode == 0 and proc.stdout.startswith(f"ok: {sem}: semantic, top-25, 64 prompts"), proc.stderr
    proc = parity_kit("golden", "diff", sem, exact)
    assert proc.returncode == 0
    assert proc.stdout.strip().splitlines()[-1] == "0 of 64 cases moved; largest move 0; 0 winners changed"


def test_golden_diff_reports_moves_and_winner_changes(tmp_path, embedded):
    doc = json.loads(embedded.goldens["semantic"].read_text())
    case = doc["cases"][0]
    top = case["top_logprobs"]
    top[0]["token_id"], top[1]["token_id"] = top[1]["token_id"], top[0]["token_id"]
    moved = tmp_path / "moved.json"
    moved.write_bytes(canonical_bytes(doc))
    rows = {r.id: r for r in diff_goldens(load_golden(embedded.goldens["semantic"]), load_golden(moved))}
    assert rows[case["id"]].winner_changed
    assert rows[case["id"]].max_probability_delta > 0
    assert sum(r.winner_changed for r in rows.values()) == 1


def test_hand_edited_golden_is_refused(tmp_path, embedded):
    edited = tmp_path / "g.json"
    edited.write_text(json.dumps(json.loads(embedded.goldens["semantic"].read_text()), indent=1))
    with pytest.raises(BadInput, match="is not canonical JSON"):
        load_golden(edited)


def test_a_golden_whose_prompt_id_holds_a_lone_surrogate_names_the_file_and_line(tmp_path, embedded):
    """The canonical check would fail on it and blame NaN; it is named where its escape stands instead."""
    text = embedded.goldens["semantic"].read_text()
    first = json.loads(text)["cases"][0]["id"]
    path = tmp_path / "golden.json"
    path.write_text(text.replace(f'"id":"{first}"', '"id":"bad\\ud800id"', 1))
    column = path.read_text().index("\\ud800") + 1
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    assert str(exc.value) == (f"golden {path}:1:{column}: case #1: its id 'bad\\ud800id' holds a lone surrogate "
                              "(\\ud800), which UTF-8 cannot encode")


def test_prompts_for_fixture_make_are_refused_at_their_line(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "a", "prompt": "fine"}\n\n{"id": "b", "prompt": "x\\udc00"}\n')
    with pytest.raises(BadInput) as exc:
        read_prompts(prompts)
    assert str(exc.value) == f"{prompts}:3:25: its prompt holds a lone surrogate (\\udc00), which UTF-8 cannot encode"
    prompts.write_bytes(b'{"id": "a", "prompt": "\xff"}\n')
    with pytest.raises(BadInput, match=r"is not UTF-8 \(byte 23\)$"):
        read_prompts(prompts)
    with pytest.raises(BadInput, match="cannot be read: No such file or directory$"):
        read_prompts(tmp_path / "nowhere.jsonl")
    prompts.write_text('{"id": "a", "prompt": "fine"}\n')
    assert read_prompts(prompts) == [{"id": "a", "prompt": "fine"}]
