"""Bad input is refused before anything runs: exit 3, one line naming what and where, nothing written."""

from __future__ import annotations

import json

import pytest

from kit.core.model.tokenizer import make_fixture
from kit.core.records.fixture import load_fixture
from kit.core.records.jsonio import canonical_bytes
from support import copy_model, parity_kit, write_descriptor


def refused(proc, out_dir) -> str:
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert not out_dir.exists(), "a refused gate must not create its run directory"
    return lines[0]


def gate(desc, tmp_path):
    out = tmp_path / "run"
    return parity_kit("gate", desc, "--out", out), out


def test_tampered_fixture(tmp_path, embedded):
    tampered = tmp_path / embedded.fixture.name
    data = embedded.fixture.read_bytes()
    tampered.write_bytes(data.replace(b'"prompt":"', b'"prompt":"X', 1))
    proc, out = gate(write_descriptor(tmp_path, embedded, fixture=tampered), tmp_path)
    line = refused(proc, out)
    assert line.startswith(f"parity-kit: bad input: fixture {tampered} is tampered: its bytes hash to ")
    assert line.endswith(f"but its name says {embedded.fixture.stem}")


def test_golden_for_another_fixture(tmp_path, embedded):
    fixture = load_fixture(embedded.fixture)
    prompts = [{"id": c.id, "prompt": c.prompt} for c in fixture.prompts[:8]]
    other = make_fixture(prompts, embedded.model, tmp_path / "fixtures")
    proc, out = gate(write_descriptor(tmp_path, embedded, fixture=other), tmp_path)
    line = refused(proc, out)
    assert f"golden {embedded.goldens['semantic']} was made for fixture {fixture.sha256[:16]}" in line
    assert other.stem in line


def test_golden_with_other_case_ids(tmp_path, embedded):
    doc = json.loads(embedded.goldens["semantic"].read_text())
    dropped = doc["cases"].pop(3)["id"]
    doc["cases"].append({**doc["cases"][0], "id": "tool-atlas-99"})
    doc["cases"].sort(key=lambda c: c["id"])
    golden = tmp_path / "golden.json"
    golden.write_bytes(canonical_bytes(doc))
    proc, out = gate(write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": golden}), tmp_path)
    line = refused(proc, out)
    assert line == (f"parity-kit: bad input: golden {golden} case ids disagree with fixture "
                    f"{embedded.fixture.name}: missing {dropped}; unknown tool-atlas-99")


def test_model_digest_differs(tmp_path, embedded):
    model = copy_model(embedded, tmp_path / "model")
    cfg = json.loads((model / "config.json").read_text())
    cfg["rope_parameters"]["rope_theta"] *= 2  # a wrong RoPE setting
    (model / "config.json").write_text(json.dumps(cfg))
    desc = write_descriptor(tmp_path, embedded, model=model)
    proc, out = gate(desc, tmp_path)
    line = refused(proc, out)
    assert line.startswith(f"parity-kit: bad input: {desc}:{_line_of(desc, 'digest =')}: ")
    assert f"model folder {model} has digest " in line
    assert embedded.doc["model"]["digest"] in line


def test_kernel_not_installed(tmp_path, embedded):
    cases = {"hf-bf16": {**embedded.doc["cases"]["hf-bf16"], "kernel": "vllm-0.33-candidate"}}
    proc, out = gate(write_descriptor(tmp_path, embedded, cases=cases), tmp_path)
    line = refused(proc, out)
    assert "case hf-bf16 needs kernel 'vllm-0.33-candidate', which is not installed" in line
    assert "python -m ipykernel install --sys-prefix --name vllm-0.33-candidate" in line


def _line_of(path, needle):
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_descriptor_unknown_key_names_file_line_and_expected_keys(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded)
    desc.write_text(desc.read_text().replace('dtype = "bfloat16"', 'dtyp = "bfloat16"'))
    proc, out = gate(desc, tmp_path)
    line = refused(proc, out)
    n = _line_of(desc, "dtyp =")
    assert line.startswith(f"parity-kit: bad input: {desc}:{n}: cases.hf-bf16.dtyp: unknown key (expected one of: ")
    assert "dtype" in line and "attn_implementation" in line


# A semantic case with a hand-set bound (the embedded ones take theirs from calibration records).
HAND_SET = {"backend": "hf", "golden": "semantic", "bound": 0.075, "dtype": "bfloat16"}


def test_descriptor_wrong_type(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": HAND_SET})
    desc.write_text(desc.read_text().replace("bound = 0.075", 'bound = "0.075"'))
    proc, out = gate(desc, tmp_path)
    line = refused(proc, out)
    n = _line_of(desc, 'bound = "0.075"')
    assert line == f"parity-kit: bad input: {desc}:{n}: cases.hf-bf16.bound: expected a valid number, got '0.075'"


def test_descriptor_unknown_backend_and_missing_key(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded)
    desc.write_text(desc.read_text().replace('backend = "hf"', 'backend = "hff"', 1))
    line = refused(gate(desc, tmp_path)[0], tmp_path / "run")
    assert line.endswith(": cases.checkpoint.backend: unknown backend 'hff' (registered: hf, jax, levanter, vllm)")
    desc.write_text(desc.read_text().replace("[fixture]", "[fixtures]"))
    line = refused(gate(desc, tmp_path)[0], tmp_path / "run")
    assert f"{desc}:{_line_of(desc, '[fixtures]')}: fixtures: unknown key" in line


def test_toml_syntax_error(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded)
    desc.write_text(desc.read_text() + "\n[cases.broken\n")
    line = refused(gate(desc, tmp_path)[0], tmp_path / "run")
    assert f"{desc}:" in line and "TOML syntax error" in line


def test_missing_descriptor(tmp_path):
    line = refused(parity_kit("gate", tmp_path / "nope.toml", "--out", tmp_path / "run"), tmp_path / "run")
    assert line.endswith("nope.toml does not exist")


@pytest.mark.parametrize("bucket", ["2048", "abc"])
def test_bucket_bound_for_an_unknown_bucket(tmp_path, embedded, bucket):
    cases = {"hf-bf16": {**HAND_SET, "bucket_bounds": {bucket: 0.1}}}
    line = refused(gate(write_descriptor(tmp_path, embedded, cases=cases), tmp_path)[0], tmp_path / "run")
    assert f"case hf-bf16: bucket {bucket} is not in the fixture" in line
