"""Signatures over what the kit writes: an in-toto Statement (v1) in a DSSE envelope, signed with an ed25519 key,
and the repository's list of the keys it trusts.

A run's seal (kit.core.records.rundir) proves that its files are the ones its root digest names, but anyone with
the kit can seal an edited run again. A signature says who stood behind a root digest: the holder of a key that the
repository lists in its trusted keys (``trusted-keys.toml``, reviewed like code). A gate run signs its root digest
(kit.gate.attest), `baseline make` each lineage entry it writes; `parity-kit verify` names the signer
(kit.gate.verify.signature).

No cryptography is written here: securesystemslib makes the envelope (DSSE's pre-authentication encoding) and signs
and verifies it, with ed25519 through ``cryptography``; this module only says what is signed and whose keys count.
The envelope is plain JSON as the DSSE spec writes it (payload in base64, each signature with its keyid).
"""

from __future__ import annotations

import binascii
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import atomic_write_bytes, parse_json_input, read_input_bytes
from kit.core.records.paths import display

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"  # DSSE's payloadType for an in-toto Statement
KEY_ENV = "PARITY_KIT_SIGNING_KEY"  # a private key file's path, or the PEM itself (a CI secret)
TRUSTED_KEYS = "trusted-keys.toml"  # at the top of the repository whose descriptor judges what is signed
_PEM = "-----BEGIN"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class TrustedKey:
    """One key the repository trusts: the name a signature is reported by, its keyid (securesystemslib's: the
    SHA-256 of the key's canonical form) and its ed25519 public key in hex."""

    name: str
    keyid: str
    public: str

    def entry(self) -> str:
        """The key as ``trusted-keys.toml`` lists it."""
        return f'[[keys]]\nname = "{self.name}"\nkeyid = "{self.keyid}"\npublic = "{self.public}"\n'

    def short(self) -> str:
        """The key as a line names it: its name and the start of its keyid."""
        return f"{self.name} (key {self.keyid[:16]})"


def _public_key(public_hex: str):
    """securesystemslib's key object of an ed25519 public key given in hex (ValueError: not one)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from securesystemslib.signer import SSlibKey

    return SSlibKey.from_crypto(Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex)))


def read_trusted(path: Path) -> list[TrustedKey]:
    """The keys a trusted-keys file lists (none when there is no such file), each checked: a name, a keyid that
    is its public key's own. One line naming the file and the entry otherwise."""
    if not path.is_file():
        return []
    shown = display(path)
    try:
        doc = tomllib.loads(read_input_bytes(path, f"trusted keys {shown}").decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{shown}: not TOML: {exc}") from None
    rows = doc.get("keys", [])
    if not isinstance(rows, list):
        raise BadInput(f"{shown}: keys: expected [[keys]] tables (name, keyid, public)")
    keys: list[TrustedKey] = []
    for i, row in enumerate(rows):
        where = f"{shown}: keys[{i}]"
        if not isinstance(row, dict) or set(row) != {"name", "keyid", "public"} or not all(
                isinstance(v, str) for v in row.values()):
            raise BadInput(f"{where}: expected exactly name, keyid and public, each a string")
        if not _NAME.match(row["name"]):
            raise BadInput(f"{where}.name: {row['name']!r} is not a key's name (letters, digits, . _ -)")
        try:
            key = _public_key(row["public"])
        except ValueError:
            raise BadInput(f"{where}.public: not an ed25519 public key in hex (64 hex digits)") from None
        if key.keyid != row["keyid"]:
            raise BadInput(f"{where}.keyid: {row['keyid']} is not the keyid of its public key ({key.keyid})")
        if any(k.name == row["name"] or k.keyid == key.keyid for k in keys):
            raise BadInput(f"{where}: {row['name']} is listed twice (by its name or its key)")
        keys.append(TrustedKey(row["name"], key.keyid, row["public"]))
    return keys


def load_signer(given: str | None, flag: str = "--sign"):
    """The signer of a private ed25519 key: the file ``given`` names, else ``$PARITY_KIT_SIGNING_KEY`` (a file's
    path, or the PEM itself); None when neither is given. A key that cannot be read, or is not ed25519, is bad
    input before anything is run."""
    source, shown = given, flag
    if source is None:
        source, shown = os.environ.get(KEY_ENV) or None, f"${KEY_ENV}"
    if source is None:
        return None
    if source.lstrip().startswith(_PEM):
        data = source.encode("utf-8")
    else:
        shown = f"{shown} {source}"
        data = read_input_bytes(Path(source), f"{shown}: signing key")
    return _signer(data, shown)


def _signer(pem: bytes, shown: str):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.signer import CryptoSigner

    try:
        private = load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise BadInput(f"{shown}: not an unencrypted PEM private key ({exc})") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise BadInput(f"{shown}: a {type(private).__name__.removesuffix('PrivateKey') or 'other'} key; signatures "
                       "are ed25519 (`parity-kit key generate` makes one)")
    return CryptoSigner(private)


def public_hex(signer) -> str:
    """The ed25519 public key of ``signer``, in hex, as a trusted-keys entry lists it."""
    return str(signer.public_key.keyval["public"])


def generate(name: str, out: Path) -> tuple[Path, TrustedKey]:
    """A new ed25519 keypair: the private key written to ``out/NAME.pem`` (readable by its owner only; never over a
    file), and the entry that lists its public key as trusted."""
    from securesystemslib.signer import CryptoSigner

    if not _NAME.match(name):
        raise BadInput(f"key name {name!r}: letters, digits, . _ - (at most 64)")
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}.pem"
    signer = CryptoSigner.generate_ed25519()
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise BadInput(f"--out: {display(target)} exists; a key is never written over") from None
    with os.fdopen(fd, "wb") as f:
        f.write(signer.private_bytes)
    return target, TrustedKey(name, signer.public_key.keyid, public_hex(signer))


def intoto_statement(subjects: Sequence[tuple[str, str]], predicate_type: str, predicate: Mapping[str, Any]) -> dict:
    """An in-toto Statement v1: each subject by name and SHA-256, and what is said of them."""
    return {"_type": STATEMENT_TYPE,
            "subject": [{"name": name, "digest": {"sha256": digest}} for name, digest in subjects],
            "predicateType": predicate_type, "predicate": dict(predicate)}


def sign(stated: Mapping[str, Any], signer) -> dict:
    """``stated`` (a Statement) in a DSSE envelope signed by ``signer``, as the envelope's JSON."""
    from securesystemslib.dsse import Envelope

    payload = json.dumps(stated, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    envelope = Envelope(payload, PAYLOAD_TYPE, {})
    envelope.sign(signer)
    return envelope.to_dict()


def write_envelope(path: Path, envelope: Mapping[str, Any]) -> Path:
    """Write an envelope as indented JSON, atomically."""
    return atomic_write_bytes(path, (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode("utf-8"))


@dataclass(frozen=True)
class Opened:
    """What an envelope holds, judged against the trusted keys: its Statement, the trusted key whose signature
    verifies (None: none does), the keyids it was signed with, and what is wrong with it (None: nothing)."""

    statement: dict | None
    signer: TrustedKey | None
    keyids: tuple[str, ...]
    problem: str | None = None

    @property
    def said(self) -> str:
        """Who signed it, in words: the trusted signer, or the keys no trusted key is."""
        if self.signer is not None:
            return f"signed by {self.signer.short()}"
        keys = ", ".join(k[:16] for k in self.keyids) or "none"
        return f"signed by an untrusted key (key {keys})"


def open_envelope(path: Path, trusted: Sequence[TrustedKey]) -> Opened:
    """The envelope at ``path`` opened: its signatures verified by securesystemslib against ``trusted``, its
    payload read as a Statement. A signature of a trusted key that does not verify is a problem (the envelope was
    changed after it was signed); a key no one trusts is not, and is said by ``Opened.said``."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    shown = display(path)
    doc = parse_json_input(read_input_bytes(path, f"attestation {shown}"), f"attestation {shown}")
    try:
        envelope = Envelope.from_dict(doc)
        keyids = tuple(envelope.signatures)
    except (KeyError, TypeError, AttributeError, ValueError, binascii.Error):
        return Opened(None, None, (), f"{shown}: not a DSSE envelope (payload, payloadType, signatures)")
    if envelope.payload_type != PAYLOAD_TYPE:
        return Opened(None, None, keyids, f"{shown}: payloadType is {envelope.payload_type!r}, not an in-toto "
                                          f"Statement's ({PAYLOAD_TYPE})")
    known = [k for k in trusted if k.keyid in keyids]
    signer = None
    if known:
        try:
            accepted = envelope.verify([_public_key(k.public) for k in known], 1)
        except VerificationError:
            names = ", ".join(k.name for k in known)
            return Opened(None, None, keyids, f"{shown}: the signature of {names} does not verify: the attestation "
                                              "was changed after it was signed")
        signer = next(k for k in known if k.keyid in accepted)
    try:
        stated = json.loads(envelope.payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return Opened(None, signer, keyids, f"{shown}: its payload is not JSON")
    if not isinstance(stated, dict) or stated.get("_type") != STATEMENT_TYPE:
        return Opened(None, signer, keyids, f"{shown}: its payload is not an in-toto Statement ({STATEMENT_TYPE})")
    return Opened(stated, signer, keyids)


def subject_digests(stated: Mapping[str, Any]) -> dict[str, str]:
    """A Statement's subjects, name -> SHA-256 (those it gives one of)."""
    out = {}
    for s in stated.get("subject") or []:
        if isinstance(s, dict) and isinstance(s.get("digest"), dict) and isinstance(s["digest"].get("sha256"), str):
            out[str(s.get("name"))] = s["digest"]["sha256"]
    return out
