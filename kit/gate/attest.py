"""`parity-kit gate --sign KEY`: a finished run's root digest signed, as an in-toto Statement in a DSSE envelope
(kit.run.signing), written beside the run as ``attestation.dsse.json``.

The root digest names every file the verdict rests on and the manifest itself (kit.core.records.rundir), so
signing it signs them all; the envelope stays outside the seal, since it signs the seal. What the Statement says
of the run (its predicate) is what a reader of the envelope alone wants: the verdict, the descriptor and its
digest, the git commit of the repository that holds it, the kit's version and the hardware each case computed on.
`parity-kit verify` names the signer and holds the signed root and verdict to those it derives again
(kit.gate.verify.signature).
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

from kit.core.errors import BadInput
from kit.core.records import rundir
from kit.core.records.paths import display
from kit.core.records.results import RunDir
from kit.core.records.results import now_iso
from kit.run import signing

log = logging.getLogger(__name__)

PREDICATE_TYPE = "urn:parity-kit:gate-run:v1"


def sign_run(run_dir: Path, signer) -> Path:
    """Sign the finished gate run in ``run_dir`` with ``signer`` (kit.run.signing.load_signer): its root digest
    worked out again from its files as `verify` works it out, and refused (one line, nothing written) where the
    files are not those its manifest sealed. Writes, and returns, ``attestation.dsse.json``."""
    run = RunDir.local(run_dir)
    manifest = run.manifest()
    sealed = manifest.get("files")
    if not isinstance(sealed, dict):
        raise BadInput(f"{display(run_dir)}: its manifest seals no files (a run that never finished): nothing to sign")
    now = {**rundir.sealed_files(run_dir, list(dict.fromkeys(manifest["cases"]))),
           rundir.MANIFEST: rundir.manifest_digest(manifest)}
    root = rundir.root_digest({str(k): str(v) for k, v in sealed.items()})
    if now != sealed or manifest.get("root_sha256") != root:
        raise BadInput(f"{display(run_dir)}: its files are not those its manifest sealed: not signed")
    recorded = run.recorded()
    predicate = {
        "verdict": recorded.verdict if recorded is not None else None,
        "cases": dict(recorded.statuses) if recorded is not None else {},
        "descriptor": {"path": manifest.get("descriptor"), "sha256": manifest.get("descriptor_sha256")},
        "git_commit": git_commit(Path(str(manifest.get("descriptor") or run_dir))),
        "kit_version": manifest.get("kit_version"),
        "hardware": manifest.get("hardware"),
        "signed_at": now_iso(),
    }
    stated = signing.intoto_statement([(run_dir.resolve().name, root)], PREDICATE_TYPE, predicate)
    target = signing.write_envelope(run_dir / rundir.ATTESTATION, signing.sign(stated, signer))
    log.info(f"signed {display(run_dir)}: root digest {root} (key {signer.public_key.keyid[:16]})")
    return target


def git_commit(path: Path) -> str | None:
    """The commit checked out in the repository that holds ``path`` (None: not in a git checkout, or no git)."""
    folder = path if path.is_dir() else path.parent
    try:
        proc = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and len(commit) in (40, 64) else None
