"""Per-layer curves of a failing candidate, its clean run and the float32 reference (`parity-kit localize`).

Three forward passes per prompt, each read at every point of the residual stream by the module its backend
registers as ``activations``: the reference, as the goldens were made (hf in float32 on the case's own
model, whichever backend the case runs on: kit.backends.registry.REFERENCE); the clean run, the case's own
settings on the case's own model, whose difference from the reference is the noise; and the candidate, the
case's settings on the candidate's weights. When the candidate is the case's own model the clean run is the
candidate itself, and no point can leave the noise: the localizer says so rather than name a layer.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kit.backends import registry
from kit.case import interpreter
from kit.core.records import paths
from kit.core.errors import BadInput
from kit.core.records.fixture import Prompt
from kit.core.noise.localize import FLOOR, K, Localization, point_metrics, localize
from kit.core.records.spec import CaseSpec


@dataclass
class Curves:
    localizations: list[Localization]
    same_model: bool  # the candidate is the case's own model: its curve is the clean one
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each forward-pass set


def reference_options(spec: CaseSpec) -> dict:
    """The golden's settings (the reference's, kit.backends.registry): float32 with SDPA, where the case runs (its
    device and threads, as its backend says them in the reference's words)."""
    return {**registry.REFERENCE_OPTIONS, **registry.get(spec.backend).where(spec.options)}


def reference_spec(spec: CaseSpec) -> CaseSpec:
    """The case as the reference runs it: the golden's settings on the case's own model, in this process."""
    info = registry.get(registry.REFERENCE)
    return dataclasses.replace(spec, backend=info.name, kernel=info.kernel, notebook=info.notebook,
                               options=reference_options(spec))


def localizable_here() -> list[str]:
    """The backends whose activations can be read, in the registry's order."""
    return registry.localizable()


def backends_text() -> str:
    """The backends that can be localized, as a sentence says them: "hf, jax or levanter"."""
    names = localizable_here()
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


def require_activations(backend: str, case: str) -> None:
    """Refuse, in one line naming the backends that can, a case whose backend exposes no per-layer activations to
    localize."""
    if not registry.get(backend).activations:
        raise BadInput(f"case {case} runs on {backend}, which exposes no per-layer activations to localize: "
                       f"localize on {backends_text()}")


def refusal(spec: CaseSpec) -> str | None:
    """Why this case cannot be localized although its backend has activations (a checkpoint the reference cannot
    load, say), as its activations module's ``unlocalizable(options)`` says it; None where it can."""
    from importlib import import_module

    check = getattr(import_module(registry.get(spec.backend).activations), "unlocalizable", None)
    return check(dict(spec.options)) if check is not None else None


def in_own_kernel(backend: str) -> bool:
    """Whether the backend's environment is not this one's: its engine runs in its kernel's interpreter."""
    return registry.get(backend).kernel != paths.MAIN_KERNEL


def capture(spec: CaseSpec, prompts: Sequence[Prompt]) -> list[list[tuple]]:
    """Every prompt's residual stream through the case's backend, opened as the case would open it (its
    runtime's ``open_backend``) and read by its activations module's ``residual_stream(runtime, token_ids)``."""
    import importlib

    require_activations(spec.backend, spec.name)
    info = registry.get(spec.backend)
    if in_own_kernel(spec.backend):
        return capture_in_kernel(spec, prompts)
    runtime = info.open(spec)
    module = importlib.import_module(info.activations)
    try:
        return [module.residual_stream(runtime, p.prompt_token_ids) for p in prompts]
    finally:
        runtime.close()


def capture_in_kernel(spec: CaseSpec, prompts: Sequence[Prompt]) -> list[list[tuple]]:
    """The streams read by the backend's activations module run in the interpreter of the case's kernel, which
    holds the backend's own environment: the module writes the request (``write_request``), runs as
    ``python -m MODULE REQUEST`` there, writing an .npz of the points, and reads that back (``read_streams``)."""
    import tempfile
    from importlib import import_module

    python, env = interpreter.kernel_python(spec.kernel, spec.name)
    module = registry.get(spec.backend).activations
    helper = import_module(module)  # its request and reading helpers need only JSON and numpy here
    with tempfile.TemporaryDirectory(prefix="localize-") as tmp:
        request, out = Path(tmp) / "request.json", Path(tmp) / "streams.npz"
        helper.write_request(request, spec.model_path, dict(spec.options), prompts, out)
        proc = interpreter.run_python(python, ["-m", module, str(request)], env=env)
        if proc.returncode != 0:
            tail = interpreter.last_line(proc.stderr, "no output")
            raise RuntimeError(f"case {spec.name}: reading {spec.backend}'s activations in kernel {spec.kernel} "
                               f"failed (exit {proc.returncode}): {tail}")
        return helper.read_streams(out, len(prompts))


def curves(spec: CaseSpec, candidate_model: str | Path, prompts: Sequence[Prompt], k: float = K,
           floor: float = FLOOR) -> Curves:
    """The localization of each prompt: ``spec`` is the case on its own model (the clean run's), and
    ``candidate_model`` the weights under suspicion (the case's own folder: the clean run is the candidate)."""
    same = Path(candidate_model).resolve() == Path(spec.model_path).resolve()
    seconds = {}
    t0 = time.perf_counter()
    require_activations(spec.backend, spec.name)
    reference = capture(reference_spec(spec), prompts)
    seconds["reference"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    clean = capture(spec, prompts)
    seconds["clean"] = time.perf_counter() - t0
    if same:
        candidate = clean
    else:
        t0 = time.perf_counter()
        candidate = capture(dataclasses.replace(spec, model_path=str(candidate_model)), prompts)
        seconds["candidate"] = time.perf_counter() - t0
    out = []
    for prompt, ref, cln, cand in zip(prompts, reference, clean, candidate):
        pts = [p for p, _ in ref]
        loc = localize(prompt.id, pts, [point_metrics(c, r) for (_, c), (_, r) in zip(cand, ref)],
                       [point_metrics(c, r) for (_, c), (_, r) in zip(cln, ref)], k=k, floor=floor)
        if same:
            loc = dataclasses.replace(loc, notes=["the candidate is the case's own model, so its curve is the "
                                                  "clean run's: no point can leave the noise (give --model)"])
        out.append(loc)
    return Curves(out, same, {k_: round(v, 3) for k_, v in seconds.items()})
