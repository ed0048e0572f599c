"""Make a golden: score every fixture case with the reference backend (hf) and record how."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kit.fixture import verify_fixture
from kit.golden import golden_document, provenance
from kit.modeldigest import model_digest


def make_golden_document(model: str | Path, fixture_path: str | Path, kind: str, top_k: int,
                         command: Sequence[str], dtype: str = "float32",
                         attn_implementation: str = "sdpa") -> tuple[dict, object]:
    """The golden document and the fixture it was made for (the fixture is verified first)."""
    from kit.backends.hf import HfBackend

    fixture = verify_fixture(fixture_path, model)
    digest = model_digest(model)
    backend = HfBackend(str(model), dtype=dtype, attn_implementation=attn_implementation)
    try:
        observations = backend.observe(fixture.cases, top_k)
        release = backend.release()
    finally:
        backend.close()
    prov = provenance("hf", release, dtype, attn_implementation, list(command))
    return golden_document(kind, fixture, digest, top_k, observations, prov), fixture
