"""Per-layer curves of a failing candidate, its clean run and the float32 reference (`parity-kit localize`).

Three forward passes per prompt, each read at every point of the residual stream
(kit.backends.<name>.activations): the reference, as the goldens were made (hf in float32 on the case's
own model, whichever backend the case runs on); the clean run, the case's own settings on the case's own
model, whose difference from the reference is the noise; and the candidate, the case's settings on the candidate's weights. When the
candidate is the case's own model the clean run is the candidate itself, and no point can leave the noise:
the localizer says so rather than name a layer.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kit.core.errors import BadInput
from kit.core.fixture import Prompt
from kit.core.localize import FLOOR, K, Localization, differences, localize
from kit.core.spec import CaseSpec

# Backends that can hand out their residual stream, and where; the others are refused with the one to use
# instead.
ACTIVATIONS = {"hf": "kit.backends.hf.activations", "jax": "kit.backends.jax.activations"}
REFERENCE = "hf"  # the golden maker (kit.goldens.make): every backend's curve is read against it


@dataclass
class Curves:
    localizations: list[Localization]
    same_model: bool  # the candidate is the case's own model: its curve is the clean one
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each forward-pass set


def reference_options(spec: CaseSpec) -> dict:
    """The golden's settings (kit.goldens.make): hf in float32 with SDPA, on the case's device and threads
    (a jax case's platform, said as hf's device)."""
    keep = {k: spec.options[k] for k in ("device", "threads") if k in spec.options}
    if spec.backend == "jax":
        keep = {"device": "cuda" if spec.options.get("platform") == "gpu" else "cpu"}
    return {"dtype": "float32", "attn_implementation": "sdpa", **keep}


def require_activations(backend: str, case: str) -> None:
    if backend not in ACTIVATIONS:
        raise BadInput(f"case {case} runs on {backend}, which exposes no per-layer activations to localize: "
                       f"localize on {' or '.join(ACTIVATIONS)}")


def open_for_activations(backend: str, model_path: str, options: dict, case: str):
    """An open runtime of ``backend`` on ``model_path`` with ``options``, as its case would hold it."""
    require_activations(backend, case)
    if backend == "hf":
        from kit.backends.hf.runtime import HfBackend

        return HfBackend(model_path, **options)
    if backend == "jax":
        from kit.backends.jax.runtime import JaxBackend

        return JaxBackend(model_path, **options, case=case)


def capture(backend: str, model_path: str, options: dict, prompts: Sequence[Prompt],
            case: str = "") -> list[list[tuple]]:
    """Every prompt's residual stream through ``backend`` with ``options`` on ``model_path``."""
    import importlib

    runtime = open_for_activations(backend, model_path, options, case)
    module = importlib.import_module(ACTIVATIONS[backend])
    try:
        return [module.residual_stream(runtime, p.prompt_token_ids) for p in prompts]
    finally:
        runtime.close()


def curves(spec: CaseSpec, candidate_model: str | Path, prompts: Sequence[Prompt], k: float = K,
           floor: float = FLOOR) -> Curves:
    """The localization of each prompt: ``spec`` is the case on its own model (the clean run's), and
    ``candidate_model`` the weights under suspicion (the case's own folder: the clean run is the candidate)."""
    same = Path(candidate_model).resolve() == Path(spec.model_path).resolve()
    seconds = {}
    t0 = time.perf_counter()
    require_activations(spec.backend, spec.name)
    reference = capture(REFERENCE, spec.model_path, reference_options(spec), prompts, spec.name)
    seconds["reference"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    clean = capture(spec.backend, spec.model_path, dict(spec.options), prompts, spec.name)
    seconds["clean"] = time.perf_counter() - t0
    if same:
        candidate = clean
    else:
        t0 = time.perf_counter()
        candidate = capture(spec.backend, str(candidate_model), dict(spec.options), prompts, spec.name)
        seconds["candidate"] = time.perf_counter() - t0
    out = []
    for prompt, ref, cln, cand in zip(prompts, reference, clean, candidate):
        pts = [p for p, _ in ref]
        loc = localize(prompt.id, pts, [differences(c, r) for (_, c), (_, r) in zip(cand, ref)],
                       [differences(c, r) for (_, c), (_, r) in zip(cln, ref)], k=k, floor=floor)
        if same:
            loc = dataclasses.replace(loc, notes=["the candidate is the case's own model, so its curve is the "
                                                  "clean run's: no point can leave the noise (give --model)"])
        out.append(loc)
    return Curves(out, same, {k_: round(v, 3) for k_, v in seconds.items()})
