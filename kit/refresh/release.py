"""Release identity and the release manifest: what was built, from what, with which bytes.

A release lives in a release store as ``<store>/<tag>/manifest.json`` beside
``<store>/<tag>/wheels/``. A tag whose manifest exists is never written again:
the store directory is claimed with an exclusive ``mkdir`` and the manifest
with an exclusive create.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import shutil
from pathlib import Path
from typing import Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import canonical_bytes, read_json
from kit.core.records.paths import display

MANIFEST = "manifest.json"
WHEELS = "wheels"


def fork_slug(name: str) -> str:
    """A fork name as both a git tag part and a PEP 440 local version part can carry it."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise BadInput(f"fork name {name!r} has no letters or digits to name a release with")
    return slug


def release_tag(fork: str, day: _dt.date, sha: str) -> str:
    """The tag of a release built from ``sha`` on ``day``: fork, date and short hash, so it sorts by date and
    names its commit."""
    return f"{fork_slug(fork)}-{day:%Y%m%d}-{sha[:12]}"


def release_version(fork: str, day: _dt.date, sha: str) -> str:
    """The release's PEP 440 version: a dev release of that date with the fork and commit as its local part."""
    # PEP 440 local versions take dots where the tag has dashes.
    return f"0.0.0.dev{day:%Y%m%d}+{fork_slug(fork).replace('-', '.')}.{sha[:12]}"


def release_dir(store: Path, tag: str) -> Path:
    """The release's folder in the store."""
    return store / tag


def existing_release(store: Path, tag: str) -> Path | None:
    """The manifest of a release already in the store under ``tag``, else None: a refresh reuses a release rather
    than build it twice."""
    path = release_dir(store, tag) / MANIFEST
    return path if path.is_file() else None


def write_release(store: Path, tag: str, doc: dict, wheels: Sequence[Path]) -> Path:
    """Copy the wheels into the store beside their manifest; refuse a tag that was written before."""
    target = release_dir(store, tag)
    store.mkdir(parents=True, exist_ok=True)
    try:
        target.mkdir()
    except FileExistsError:
        raise BadInput(f"release {tag} exists at {display(target)}; a release is never overwritten") from None
    (target / WHEELS).mkdir()
    for wheel in wheels:
        shutil.copy2(wheel, target / WHEELS / wheel.name)
    path = target / MANIFEST
    with open(path, "xb") as f:  # exclusive: a manifest, once written, is the release's record
        f.write(canonical_bytes(doc))
        f.flush()
        os.fsync(f.fileno())
    return path


def load_release(path: str | Path) -> dict:
    """A release manifest (its file or its folder), checked for the keys qualification needs."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST
    if not path.is_file():
        raise BadInput(f"release manifest {display(path)} does not exist")
    try:
        doc = read_json(path)
    except ValueError as exc:
        raise BadInput(f"release manifest {display(path)} is not JSON: {exc}") from None
    missing = [k for k in ("tag", "version", "source_commit", "base_commit", "wheels") if k not in doc]
    if missing:
        raise BadInput(f"release manifest {display(path)}: missing key {missing[0]!r}")
    if not doc["wheels"]:
        raise BadInput(f"release manifest {display(path)} lists no wheels")
    doc["_path"] = str(path.resolve())
    return doc


def wheel_dir(manifest: dict) -> Path:
    """The folder of a release's wheels, beside its manifest."""
    return Path(manifest["_path"]).parent / WHEELS
