"""Case options of the jax backend."""

from __future__ import annotations

from typing import Literal

from kit.backends.options import BackendOptions


class JaxOptions(BackendOptions):
    """A plain Llama forward in JAX over the same safetensors: an independent second implementation."""

    dtype: Literal["float32", "bfloat16"] = "float32"
    # "auto": cuDNN flash attention on a GPU in bfloat16, exact query-chunked attention in float32
    # on long prompts (cuDNN has no float32 kernel), XLA's reference attention otherwise.
    attention: Literal["auto", "xla", "cudnn", "chunked"] = "auto"
    platform: Literal["cpu", "gpu"] = "cpu"

    def implementation_variants(self) -> list[tuple[str, dict, str]]:
        # The attention implementation is the jax path's main free choice; the rest is XLA's.
        return [(f"attention-{a}", {"attention": a}, "another attention implementation")
                for a in ("xla", "chunked") if a != self.attention]
