"""Faulted checkpoints, written once per (fault, magnitude) and reused.

A catalogue run measures each fault at every magnitude with several backends; writing the copy once
and handing every backend the same folder keeps them on the same bytes. The cache lives outside the
repository (the system's temp folder unless given), and its key holds the source model's digest and
the catalogue's own code, so an edited fault or another model never reads a stale copy.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import tempfile
from pathlib import Path

from kit.core.model.modeldigest import model_digest
from kit.faults import catalogue, checkpoint
from kit.faults.catalogue import Fault, write_fault

CACHE_ENV = "PARITY_KIT_FAULT_CACHE"


def default_cache_dir() -> Path:
    """Where faulted copies are kept between runs: $PARITY_KIT_FAULT_CACHE, else a folder in the system's
    temporary directory."""
    return Path(os.environ.get(CACHE_ENV) or Path(tempfile.gettempdir()) / "parity-kit-faults")


def code_digest() -> str:
    """The catalogue's code: what a faulted copy depends on besides the source model."""
    h = hashlib.sha256()
    for module in (catalogue, checkpoint):
        h.update(Path(inspect.getfile(module)).read_bytes())
    return h.hexdigest()


def faulted_copy(fault: Fault, magnitude: float, source: str | Path, cache_dir: str | Path | None = None,
                 source_digest: str | None = None) -> Path:
    """The folder holding ``source`` with ``fault`` at ``magnitude``, written on first use.

    Written to a temporary folder beside its place and renamed into it, so that an interrupted write
    leaves nothing a later run would take for a finished copy."""
    fault.check(magnitude)
    source = Path(source)
    digest = source_digest or model_digest(source)
    key = hashlib.sha256(f"{digest}\n{code_digest()}".encode()).hexdigest()[:12]
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = root / f"{source.name}-{key}" / f"{fault.name}-{magnitude!r}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write_fault(fault, magnitude, source, staging / "model")
        try:
            os.rename(staging / "model", target)
        except OSError:
            if not target.is_dir():  # another process finished the same copy first: theirs is as good
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def copies_digest(source: str | Path, cache_dir: str | Path | None = None, source_digest: str | None = None) -> str:
    """One digest of every catalogued fault's copy of ``source`` at every magnitude: the bytes a fault's
    measured effect depends on.

    A table of measured effects keyed by this, not by the catalogue's source text, holds across edits that
    write the same copies (a refactor, a type annotation) and is refused after any edit that changes one
    byte of one copy, or another source model."""
    digest = source_digest or model_digest(source)
    h = hashlib.sha256()
    for fault in catalogue.CATALOGUE:
        for magnitude in fault.magnitudes:
            copy = faulted_copy(fault, magnitude, source, cache_dir, source_digest=digest)
            h.update(f"{fault.name}\t{magnitude!r}\t{model_digest(copy)}\n".encode())
    return h.hexdigest()
