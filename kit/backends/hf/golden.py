"""How `parity-kit golden make` runs hf, the reference, and how a golden it made is made again.

hf takes every scoring option of the command line; the remake line repeats those the golden was made
with where they differ from the command's defaults, so a golden made the default way is remade by the
shortest line.
"""

from __future__ import annotations

# The command line's option, its case option, and its default: what a remake may leave out.
DEFAULTS = (("--dtype", "dtype", "float32"), ("--attn-implementation", "attn_implementation", "sdpa"),
            ("--device", "device", "cpu"), ("--cpu-kernels", "cpu_kernels", "native"))


def golden_options(request: dict) -> dict:
    """The case options of `golden make`'s run: its dtype, attention, device, batching and CPU kernels."""
    return {k: request[k] for k in ("dtype", "attn_implementation", "device", "batch_size", "cpu_kernels")}


def golden_flags(provenance: dict, options: dict | None = None) -> list[str]:
    """The flags that repeat how the golden was made; ``options``, a case's, decide the dtype and the CPU kernels
    where given (the runtime the new golden must hold on is the case's)."""
    release = provenance.get("release") or {}
    made = {"dtype": (options or {}).get("dtype") or provenance.get("dtype"),
            "attn_implementation": provenance.get("attention"),
            "device": release.get("device"), "cpu_kernels": (options or release).get("cpu_kernels")}
    flags: list[str] = []
    for flag, key, default in DEFAULTS:
        if made[key] is not None and made[key] != default:
            flags += [flag, str(made[key])]
    return flags
