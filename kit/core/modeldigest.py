"""The model digest of DESIGN section 4: one SHA-256 for a whole model folder."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kit.core.errors import BadInput
from kit.core.jsonio import sha256_file


def model_digest(folder: str | Path) -> str:
    """SHA-256 over the sorted lines ``relative/posix/path NUL sha256(file) LF``.

    Only file bytes and relative names count, so a copied or moved folder keeps its digest.
    """
    root = Path(folder)
    if not root.is_dir():
        raise BadInput(f"model folder {root} does not exist")
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        h.update(f"{rel}\0{sha256_file(path)}\n".encode("utf-8"))
    return h.hexdigest()


def check_model_digest(folder: str | Path, expected: str, where: str) -> str:
    """Refuse a model folder whose bytes differ from the pinned digest, naming both."""
    actual = model_digest(folder)
    if actual != expected:
        raise BadInput(
            f"{where}: model folder {folder} has digest {actual[:16]}..., "
            f"but {expected[:16]}... is pinned (full: {actual} != {expected})"
        )
    return actual
