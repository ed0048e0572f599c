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
    # XLA may keep a fused computation's intermediate values in float32 where the program rounds them to
    # bfloat16 (its default, like torch.compile); False makes it round at every operation, like eager torch.
    excess_precision: bool = True

    def implementation_variants(self) -> list[tuple[str, dict, str]]:
        # The jax path's free choices: the attention implementation, and how much of the bfloat16
        # rounding XLA's fusion skips, which another XLA release may change.
        if self.platform == "gpu":
            # XLA's reference attention holds every head's [seq, seq] float32 scores: it runs out of memory at
            # 32K tokens on an H200. Rounding at every operation changed no bit of the 1B model's results
            # on the H200 (docs/gpu-figures.md), so it would only repeat the case as set.
            float32 = self.dtype == "float32"  # cuDNN has no float32 kernel: "auto" is chunked there
            effective = self.attention if self.attention != "auto" else ("chunked" if float32 else "cudnn")
            others = [a for a in ("cudnn", "chunked") if a != effective and not (a == "cudnn" and float32)]
            return [(f"attention-{a}", {"attention": a}, "another attention implementation") for a in others]
        out = [(f"attention-{a}", {"attention": a}, "another attention implementation")
               for a in ("xla", "chunked") if a != self.attention]
        out.append(("rounded" if self.excess_precision else "excess-precision",
                    {"excess_precision": not self.excess_precision},
                    "XLA's fusion keeps or skips bfloat16 roundings between fused operations"))
        return out
