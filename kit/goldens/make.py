"""Make a golden: score every fixture case with the reference backend (hf) and record how."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kit.backends import registry
from kit.backends.base import can_decode
from kit.core.decode import check_continuations_fit
from kit.core.errors import BadInput
from kit.core.fixture import verify_fixture
from kit.core.golden import golden_document, provenance
from kit.core.modelconfig import check_prompts_fit, check_top_k_fits, model_limits
from kit.core.modeldigest import model_digest


def make_golden_document(model: str | Path, fixture_path: str | Path, kind: str, top_k: int,
                         command: Sequence[str], dtype: str = "float32", attn_implementation: str = "sdpa",
                         backend: str = "hf", checkpoint: str = "hf", device: str = "cpu",
                         batch_size: int = 1, decode: int = 0, cpu_kernels: str = "native") -> tuple[dict, object]:
    """The golden document and the fixture it was made for (the fixture is verified first).
    hf makes the semantic goldens; a native backend (levanter) makes its own exact golden. With
    ``decode`` the backend also continues every prompt that many greedy steps through its own decode
    path: a format-2 golden whose continuations decode checks compare with."""
    fixture = verify_fixture(fixture_path, model)
    limits = model_limits(model)  # before any engine starts: a prompt it cannot take, a top_k beyond its vocabulary
    check_prompts_fit(((c.id, c.n_tokens) for c in fixture.prompts), limits, model, f"fixture {fixture_path}: ")
    check_top_k_fits(top_k, limits, model)
    if decode:
        check_continuations_fit(((c.id, c.n_tokens) for c in fixture.prompts), decode, limits, str(model),
                                f"fixture {fixture_path}: ")
    digest = model_digest(model)
    if backend == "levanter":
        from kit.backends.levanter.runtime import LevanterBackend

        engine = LevanterBackend(str(model), checkpoint=checkpoint)
    else:
        from kit.backends.hf.runtime import HfBackend

        engine = HfBackend(str(model), dtype=dtype, attn_implementation=attn_implementation, device=device,
                           batch_size=batch_size, cpu_kernels=cpu_kernels)
    try:
        observations = engine.observe(fixture.prompts, top_k)
        continuations = None
        if decode:
            if not can_decode(engine):
                raise BadInput(f"--decode: backend {backend} has no decode path to continue the prompts with")
            continuations = engine.decode(fixture.prompts, decode, top_k)
        release = engine.release()
        if backend == "levanter":
            dtype, attn_implementation = "float32", engine.details()["attention"]
    finally:
        engine.close()
    # What decided the bits, computed where they were made: an exact golden holds only where this key is equal.
    options = {"device": device, "cpu_kernels": cpu_kernels} if backend == "hf" else {"device": device}
    runtime = registry.get(backend).runtime_key(options) if kind == "exact" else None
    prov = provenance(backend, release, dtype, attn_implementation, list(command), runtime)
    return golden_document(kind, fixture, digest, top_k, observations, prov, continuations, decode), fixture
