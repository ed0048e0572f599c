"""A signed run end to end (docs/verify.md, "Signed runs"): a real gate signed with a key from the environment, as CI
signs; the run copied to another folder and verified in another process names its signer, as its `--attach` zip
does; `--require-signed` refuses it unsigned or signed by a key the repository does not trust; and a copy edited and
sealed again with the kit's own sealing is refused however it was sealed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tomli_w

from kit.core.records import rundir
from kit.core.records.jsonio import read_json, write_json
from kit.gate.attest import sign_run
from kit.gate.report import attach_zip
from kit.run import signing
from support import parity_kit

pytestmark = pytest.mark.e2e

REPOSITORY = ("fixtures", "goldens", "calibrations")


@pytest.fixture(scope="module")
def signed(tmp_path_factory, embedded) -> tuple[Path, Path, signing.TrustedKey]:
    """A repository (the embedded descriptor's files, a descriptor of its exact case, the trusted key "ci") and a
    gate run of it signed with that key, given as CI gives it: the PEM in $PARITY_KIT_SIGNING_KEY."""
    repo = tmp_path_factory.mktemp("repository")
    for folder in REPOSITORY:
        shutil.copytree(embedded.descriptor.parent.parent / folder, repo / folder)
    doc = {k: v for k, v in embedded.doc.items() if k not in ("baselines", "cases")}
    doc["cases"] = {"checkpoint": embedded.doc["cases"]["checkpoint"]}
    (repo / "descriptors").mkdir()
    (repo / "descriptors" / "signed.toml").write_text(tomli_w.dumps(doc))
    pem, key = signing.generate("ci", tmp_path_factory.mktemp("secrets"))
    (repo / signing.TRUSTED_KEYS).write_text(key.entry())
    run_dir = tmp_path_factory.mktemp("gate") / "run"
    proc = parity_kit("gate", repo / "descriptors" / "signed.toml", "--out", run_dir,
                      env={signing.KEY_ENV: pem.read_text()})
    assert proc.returncode == 0, proc.stderr
    assert (run_dir / rundir.ATTESTATION).is_file()
    return repo, run_dir, key


def copy(run_dir: Path, where: Path) -> Path:
    return Path(shutil.copytree(run_dir, where / "copy"))


def signature_line(stdout: str) -> str:
    """verify's line about the run's signature (after the verdict and the per-case lines)."""
    return next(line for line in stdout.splitlines() if line.startswith("signature: "))


def test_a_signed_run_copied_elsewhere_and_verified_in_another_process_names_its_signer(signed, tmp_path):
    repo, run_dir, key = signed
    elsewhere = copy(run_dir, tmp_path)  # a reviewer's copy, verified from the reviewer's checkout of the repository
    proc = parity_kit("verify", elsewhere, "--require-signed", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("verified: passed (")
    assert signature_line(proc.stdout) == f"signature: signed by ci (key {key.keyid[:16]})"
    # Its zip carries the envelope: the attachment names its signer too.
    proc = parity_kit("verify", attach_zip(elsewhere, tmp_path / "attach"), "--require-signed", cwd=repo)
    assert proc.returncode == 0 and f"signature: signed by ci (key {key.keyid[:16]})" in proc.stdout, proc.stdout


def test_a_signed_run_edited_and_sealed_again_is_refused(signed, tmp_path):
    repo, run_dir, _ = signed
    forged = copy(run_dir, tmp_path)
    signed_root = read_json(forged / rundir.MANIFEST)["root_sha256"]
    manifest = read_json(forged / rundir.MANIFEST)
    manifest["host"] = "a trusted CI runner"  # a sealed field, sealed again with the kit's own sealing
    write_json(forged / rundir.MANIFEST, rundir.sealed(forged, manifest))
    proc = parity_kit("verify", forged, cwd=repo)
    assert proc.returncode == 1, proc.stdout
    assert f"  {rundir.ATTESTATION}: signs the root digest {signed_root}; the run's is " in proc.stdout
    assert "the run was changed after it was signed" in proc.stdout


def test_unsigned_says_so_and_require_signed_refuses_it_or_an_untrusted_key(signed, tmp_path):
    repo, run_dir, key = signed
    unsigned = copy(run_dir, tmp_path)
    (unsigned / rundir.ATTESTATION).unlink()
    proc = parity_kit("verify", unsigned, cwd=repo)
    assert proc.returncode == 0 and signature_line(proc.stdout) == "signature: unsigned", proc.stdout
    proc = parity_kit("verify", unsigned, "--require-signed", cwd=repo)
    assert proc.returncode == 1
    assert f"  {rundir.ATTESTATION}: missing: the run is unsigned, and --require-signed asks for a signature" \
           in proc.stdout
    pem, stranger = signing.generate("stranger", tmp_path / "keys")
    sign_run(unsigned, signing.load_signer(str(pem)))
    proc = parity_kit("verify", unsigned, cwd=repo)
    assert proc.returncode == 0, proc.stdout
    assert signature_line(proc.stdout) == f"signature: signed by an untrusted key (key {stranger.keyid[:16]})"
    proc = parity_kit("verify", unsigned, "--require-signed", cwd=repo)
    assert proc.returncode == 1 and "--require-signed asks for a signature by a trusted key" in proc.stdout
    assert f"signed by ci (key {key.keyid[:16]})" not in proc.stdout
