"""Per-layer curves of a failing candidate, its clean run and the float32 reference (`parity-kit localize`).

Three forward passes per prompt, each read at every point of the residual stream
(kit.backends.<name>.activations): the reference, as the goldens were made (hf in float32 on the case's
own model, whichever backend the case runs on); the clean run, the case's own settings on the case's own
model, whose difference from the reference is the noise; and the candidate, the case's settings on the
candidate's weights. When the candidate is the case's own model the clean run is the candidate itself, and
no point can leave the noise: the localizer says so rather than name a layer.
"""

from __future__ import annotations

import dataclasses
import os
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
ACTIVATIONS = {"hf": "kit.backends.hf.activations", "jax": "kit.backends.jax.activations",
               "levanter": "kit.backends.levanter.activations"}
IN_OWN_KERNEL = {"levanter"}  # backends whose environment is not the main one: read in their kernel's interpreter
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


def backends_text() -> str:
    """The backends that can be localized, as a sentence says them: "hf, jax or levanter"."""
    names = list(ACTIVATIONS)
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


def require_activations(backend: str, case: str) -> None:
    if backend not in ACTIVATIONS:
        raise BadInput(f"case {case} runs on {backend}, which exposes no per-layer activations to localize: "
                       f"localize on {backends_text()}")


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
            case: str = "", kernel: str | None = None) -> list[list[tuple]]:
    """Every prompt's residual stream through ``backend`` with ``options`` on ``model_path``."""
    import importlib

    if backend in IN_OWN_KERNEL:
        return capture_in_kernel(backend, model_path, options, prompts, case, kernel)
    runtime = open_for_activations(backend, model_path, options, case)
    module = importlib.import_module(ACTIVATIONS[backend])
    try:
        return [module.residual_stream(runtime, p.prompt_token_ids) for p in prompts]
    finally:
        runtime.close()


def kernel_python(kernel: str | None, case: str) -> tuple[str, dict]:
    """The interpreter of a kernel and the environment it runs with: a backend whose environment is its own
    (Levanter's) is run there, outside a notebook, for what only that environment can compute."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        kspec = KernelSpecManager().get_kernel_spec(kernel or "")
    except NoSuchKernel:
        raise BadInput(f"case {case}: its kernel {kernel!r} is not installed (`parity-kit kernels` says how to "
                       "install it)") from None
    return kspec.argv[0], {**os.environ, **(kspec.env or {})}


def capture_in_kernel(backend: str, model_path: str, options: dict, prompts: Sequence[Prompt], case: str,
                      kernel: str | None) -> list[list[tuple]]:
    """The streams read by the backend's activations module run in the interpreter of the case's kernel, which
    holds the backend's own environment, through a request file and an .npz of the points."""
    import subprocess
    import tempfile
    from importlib import import_module

    python, env = kernel_python(kernel, case)
    module = ACTIVATIONS[backend]
    helper = import_module(module)  # its request and reading helpers need only JSON and numpy here
    with tempfile.TemporaryDirectory(prefix="localize-") as tmp:
        request, out = Path(tmp) / "request.json", Path(tmp) / "streams.npz"
        helper.write_request(request, model_path, options, prompts, out)
        proc = subprocess.run([python, "-m", module, str(request)], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"case {case}: reading {backend}'s activations in kernel {kernel} failed "
                               f"(exit {proc.returncode}): {tail}")
        return helper.read_streams(out, len(prompts))


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
    clean = capture(spec.backend, spec.model_path, dict(spec.options), prompts, spec.name, spec.kernel)
    seconds["clean"] = time.perf_counter() - t0
    if same:
        candidate = clean
    else:
        t0 = time.perf_counter()
        candidate = capture(spec.backend, str(candidate_model), dict(spec.options), prompts, spec.name,
                            spec.kernel)
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
