"""A signed run (docs/verify.md, "Signed runs"): `gate --sign` writes an in-toto Statement of the run's root digest
in a DSSE envelope; the signature is judged against the repository's trusted keys: named when it verifies with one,
said to be untrusted when no listed key made it, refused when the run (or the envelope) changed after signing."""

from __future__ import annotations

import base64
import json
import zipfile
from pathlib import Path

import pytest

from kit.cli import main
from kit.core.errors import BadInput
from kit.core.records import rundir
from kit.core.records.jsonio import read_json, write_json
from kit.gate.attest import PREDICATE_TYPE, sign_run
from kit.gate.report import attach_zip
from kit.gate.verify.signature import Policy, judge_signature
from kit.run import signing
from support.rundirs import gate_run

pytestmark = pytest.mark.unit


def sealed_run(run_dir: Path) -> Path:
    """A finished run of two cases, sealed as the gate seals it."""
    gate_run(run_dir)
    manifest = read_json(run_dir / rundir.MANIFEST)
    write_json(run_dir / rundir.MANIFEST, rundir.sealed(run_dir, manifest))
    return run_dir


def keypair(tmp_path: Path, name: str) -> tuple[Path, signing.TrustedKey]:
    return signing.generate(name, tmp_path / "keys")


def trusted(tmp_path: Path, *keys: signing.TrustedKey) -> Path:
    path = tmp_path / "trusted-keys.toml"
    path.write_text("# reviewed like code\n" + "\n".join(k.entry() for k in keys))
    return path


def root_of(run_dir: Path) -> str:
    return read_json(run_dir / rundir.MANIFEST)["root_sha256"]


def judged(run_dir: Path, keys: Path, require: bool = False):
    return judge_signature(run_dir, rundir.root_digest(read_json(run_dir / rundir.MANIFEST)["files"]), "passed",
                           run_dir / "tiny.toml", Policy(keys, require))


def test_the_envelope_is_an_in_toto_statement_of_the_root_digest_in_dsse(tmp_path):
    run_dir = sealed_run(tmp_path / "run")
    pem, key = keypair(tmp_path, "ci")
    written = sign_run(run_dir, signing.load_signer(str(pem)))
    assert written == run_dir / rundir.ATTESTATION
    envelope = json.loads(written.read_text())
    assert set(envelope) == {"payload", "payloadType", "signatures"}
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert [s["keyid"] for s in envelope["signatures"]] == [key.keyid]
    stated = json.loads(base64.b64decode(envelope["payload"]))
    assert stated["_type"] == "https://in-toto.io/Statement/v1"
    assert stated["subject"] == [{"name": "run", "digest": {"sha256": root_of(run_dir)}}]
    assert stated["predicateType"] == PREDICATE_TYPE
    predicate = stated["predicate"]
    assert predicate["verdict"] == "passed" and predicate["kit_version"] == "0.3.0"
    assert set(predicate) >= {"descriptor", "git_commit", "hardware", "cases"}
    # Outside the seal: the run's root digest is what it was.
    assert rundir.root_digest(read_json(run_dir / rundir.MANIFEST)["files"]) == root_of(run_dir)


def test_a_trusted_signature_names_its_signer_and_an_unsigned_run_says_so(tmp_path):
    run_dir = sealed_run(tmp_path / "run")
    keys = trusted(tmp_path, keypair(tmp_path, "other")[1])
    unsigned = judged(run_dir, keys)
    assert (unsigned.said, unsigned.problems) == ("unsigned", ())
    (problem,) = judged(run_dir, keys, require=True).problems
    assert problem.startswith(f"{rundir.ATTESTATION}: missing: the run is unsigned, and --require-signed")
    pem, key = keypair(tmp_path, "ci")
    sign_run(run_dir, signing.load_signer(str(pem)))
    keys = trusted(tmp_path, key)
    signed = judged(run_dir, keys, require=True)
    assert signed.said == f"signed by ci (key {key.keyid[:16]})" and signed.problems == ()


def test_an_untrusted_key_is_said_and_refused_only_when_a_signature_is_required(tmp_path):
    run_dir = sealed_run(tmp_path / "run")
    pem, key = keypair(tmp_path, "stranger")
    sign_run(run_dir, signing.load_signer(str(pem)))
    keys = trusted(tmp_path, keypair(tmp_path, "ci")[1])
    found = judged(run_dir, keys)
    assert found.said == f"signed by an untrusted key (key {key.keyid[:16]})" and found.problems == ()
    (problem,) = judged(run_dir, keys, require=True).problems
    assert problem == (f"{rundir.ATTESTATION}: signed by an untrusted key (key {key.keyid[:16]}), which {keys} does "
                       "not list: --require-signed asks for a signature by a trusted key")


def test_a_run_changed_and_sealed_again_after_signing_is_refused(tmp_path):
    run_dir = sealed_run(tmp_path / "run")
    pem, key = keypair(tmp_path, "ci")
    sign_run(run_dir, signing.load_signer(str(pem)))
    signed_root = root_of(run_dir)
    manifest = read_json(run_dir / rundir.MANIFEST)
    manifest["kit_version"] = "0.3.1"  # any sealed change: the forger seals it again with the kit's own sealing
    write_json(run_dir / rundir.MANIFEST, rundir.sealed(run_dir, manifest))
    (problem,) = judged(run_dir, trusted(tmp_path, key)).problems
    assert problem == (f"{rundir.ATTESTATION}: signs the root digest {signed_root}; the run's is {root_of(run_dir)}: "
                       "the run was changed after it was signed")


def test_an_envelope_changed_after_signing_is_refused(tmp_path):
    run_dir = sealed_run(tmp_path / "run")
    pem, key = keypair(tmp_path, "ci")
    sign_run(run_dir, signing.load_signer(str(pem)))
    path = run_dir / rundir.ATTESTATION
    envelope = json.loads(path.read_text())
    stated = json.loads(base64.b64decode(envelope["payload"]))
    stated["predicate"]["verdict"] = "failed"
    envelope["payload"] = base64.b64encode(json.dumps(stated).encode()).decode()
    path.write_text(json.dumps(envelope))
    found = judged(run_dir, trusted(tmp_path, key))
    assert found.problems == (f"{path}: the signature of ci does not verify: the attestation was changed after it "
                              "was signed",)


def test_a_signed_verdict_other_than_the_cases_is_refused(tmp_path):
    run_dir = sealed_run(tmp_path / "run")
    pem, key = keypair(tmp_path, "ci")
    sign_run(run_dir, signing.load_signer(str(pem)))
    found = judge_signature(run_dir, root_of(run_dir), "failed", run_dir / "tiny.toml", Policy(trusted(tmp_path, key)))
    assert found.problems == (f"{rundir.ATTESTATION}: signs the verdict 'passed'; the cases give failed",)


def test_the_key_comes_from_the_environment_as_a_file_or_a_pem(tmp_path, monkeypatch):
    pem, key = keypair(tmp_path, "ci")
    monkeypatch.delenv(signing.KEY_ENV, raising=False)
    assert signing.load_signer(None) is None
    monkeypatch.setenv(signing.KEY_ENV, str(pem))
    assert signing.load_signer(None).public_key.keyid == key.keyid
    monkeypatch.setenv(signing.KEY_ENV, pem.read_text())
    assert signing.load_signer(None).public_key.keyid == key.keyid
    monkeypatch.setenv(signing.KEY_ENV, "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    with pytest.raises(BadInput) as refused:
        signing.load_signer(None)
    assert str(refused.value).startswith(f"${signing.KEY_ENV}: not an unencrypted PEM private key")
    with pytest.raises(BadInput) as refused:
        signing.load_signer(str(tmp_path / "absent.pem"))
    assert str(refused.value).startswith(f"--sign {tmp_path / 'absent.pem'}: signing key")


def test_a_trusted_keys_entry_whose_keyid_is_not_its_keys_is_refused(tmp_path):
    key = keypair(tmp_path, "ci")[1]
    other = keypair(tmp_path, "other")[1]
    path = trusted(tmp_path, signing.TrustedKey("ci", other.keyid, key.public))
    with pytest.raises(BadInput) as refused:
        signing.read_trusted(path)
    assert str(refused.value) == (f"{path}: keys[0].keyid: {other.keyid} is not the keyid of its public key "
                                  f"({key.keyid})")
    assert signing.read_trusted(tmp_path / "none.toml") == []


def test_key_generate_prints_the_entry_that_trusts_it(tmp_path, capsys):
    assert main(["key", "generate", "ci", "--out", str(tmp_path / "keys")]) == 0
    entry = capsys.readouterr().out
    (tmp_path / "trusted-keys.toml").write_text(entry)
    (key,) = signing.read_trusted(tmp_path / "trusted-keys.toml")
    assert key.name == "ci" and (tmp_path / "keys" / "ci.pem").stat().st_mode & 0o077 == 0
    assert signing.load_signer(str(tmp_path / "keys" / "ci.pem")).public_key.keyid == key.keyid
    assert main(["key", "generate", "ci", "--out", str(tmp_path / "keys")]) == 3  # never over a key


def test_the_attach_zip_carries_the_envelope(tmp_path):
    run_dir = sealed_run(tmp_path / "run")
    pem, _ = keypair(tmp_path, "ci")
    sign_run(run_dir, signing.load_signer(str(pem)))
    with zipfile.ZipFile(attach_zip(run_dir, tmp_path / "out")) as z:
        assert f"run/{rundir.ATTESTATION}" in z.namelist()
