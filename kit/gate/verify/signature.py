"""Who signed a run: its ``attestation.dsse.json`` (kit.gate.attest) judged against the repository's trusted keys.

Verify proves that a run's verdict follows from its observations and that its files are the ones its root digest
names; it cannot say who made the run, since anyone with the kit can seal an edited run again. A signature can:
the envelope's signature must verify with a key the repository lists (``trusted-keys.toml`` at the top of the
repository that holds the run's descriptor, or ``--trusted-keys``), and what it signs must be this run: its
subject the root digest verify worked out again, its verdict the one the cases give. So a signed run edited after
signing is refused, however well it was sealed again. A run with no envelope is "unsigned", and one signed by a key
the repository does not list is said to be; both are refused with ``--require-signed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kit.core.records import rundir
from kit.gate.attest import PREDICATE_TYPE
from kit.run import signing


@dataclass(frozen=True)
class Policy:
    """What `verify` asks of a run's signature: the trusted-keys file (None: the one at the top of the repository
    that holds the run's descriptor) and whether a run must be signed by one of its keys."""

    trusted_keys: Path | None = None
    require_signed: bool = False

    def keys_file(self, descriptor: Path) -> Path:
        """The trusted-keys file to judge a run of ``descriptor`` by."""
        from kit.descriptor.baselines import tree_root

        return self.trusted_keys if self.trusted_keys is not None else tree_root(descriptor) / signing.TRUSTED_KEYS


UNSIGNED_OK = Policy()  # the repository's trusted keys; an unsigned run is said to be, and not refused


@dataclass(frozen=True)
class Signed:
    """The signature of a run in words ("signed by ci (key 2e7cd9aaf9283e36)", "unsigned") and its problems."""

    said: str
    problems: tuple[str, ...] = ()


def judge_signature(run_dir: Path, root: str | None, verdict: str | None, descriptor: Path, policy: Policy) -> Signed:
    """The signature of the run in ``run_dir``, whose root digest and verdict verify worked out again."""
    path = run_dir / rundir.ATTESTATION
    keys_file = policy.keys_file(descriptor)
    if not path.is_file():
        missing = (f"{rundir.ATTESTATION}: missing: the run is unsigned, and --require-signed asks for a signature "
                   f"by a key of {keys_file}")
        return Signed("unsigned", (missing,) if policy.require_signed else ())
    opened = signing.open_envelope(path, signing.read_trusted(keys_file))
    if opened.problem is not None:
        return Signed("signature refused", (opened.problem,))
    problems: list[str] = []
    if opened.signer is None and policy.require_signed:
        problems.append(f"{rundir.ATTESTATION}: {opened.said}, which {keys_file} does not list: --require-signed "
                        "asks for a signature by a trusted key")
    stated = opened.statement or {}
    if stated.get("predicateType") != PREDICATE_TYPE:
        problems.append(f"{rundir.ATTESTATION}: predicateType is {stated.get('predicateType')!r}, not a gate run's "
                        f"({PREDICATE_TYPE})")
    subjects = signing.subject_digests(stated)
    if root is None or set(subjects.values()) != {root}:
        problems.append(f"{rundir.ATTESTATION}: signs the root digest {', '.join(subjects.values()) or 'of nothing'}; "
                        f"the run's is {root}: the run was changed after it was signed")
    signed_verdict = (stated.get("predicate") or {}).get("verdict") if isinstance(stated.get("predicate"),
                                                                                  dict) else None
    if verdict is not None and signed_verdict != verdict:
        problems.append(f"{rundir.ATTESTATION}: signs the verdict {signed_verdict!r}; the cases give {verdict}")
    return Signed(opened.said, tuple(problems))
