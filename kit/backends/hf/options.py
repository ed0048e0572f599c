"""Case options of the hf backend."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.backends.hf.attention import AttnImplementation
from kit.backends.hf.kernels import CpuKernels
from kit.backends.hf.runtime import PaddingSide, SdpaBackend
from kit.backends.options import BackendOptions, Choice


class HfOptions(BackendOptions):
    """transformers + torch; the reference that makes the goldens."""

    # float64: computed in float64 and reported rounded to float32, so an exact golden holds on every host
    # (kit/core/host/portable.py); the others are reported as computed.
    dtype: Literal["float32", "bfloat16", "float16", "float64"] = "float32"
    # sdpa_repeat_kv: SDPA without torch's GQA flag, so float32 long prompts keep a memory-efficient kernel.
    attn_implementation: Choice[AttnImplementation] = AttnImplementation.SDPA
    device: str = Field(default="cpu", pattern=r"^(cpu|cuda(:[0-9]+)?)$")
    threads: int = Field(default=1, ge=1)
    # Prompts of one bucket scored together, padded to the longest; 1 scores each prompt alone.
    batch_size: int = Field(default=1, ge=1)
    padding_side: Choice[PaddingSide] = PaddingSide.RIGHT
    # Which torch SDPA kernel to prefer ("auto": torch's own choice); for attn_implementation sdpa and
    # sdpa_repeat_kv.
    sdpa_backend: Choice[SdpaBackend] = SdpaBackend.AUTO
    # torch.compile each decoder layer, so the elementwise work around the matmuls (norms, rotary,
    # SiLU x up) fuses; one graph serves every layer and every prompt length.
    compile: bool = False
    # "avx2": torch's, oneDNN's and MKL's CPU kernels pinned to their AVX2 code, so that an exact golden made
    # on one x86-64 host holds bit for bit on every host with AVX2 (kit/backends/hf/kernels.py).
    cpu_kernels: Choice[CpuKernels] = CpuKernels.NATIVE

    def implementation_variants(self) -> list[tuple[str, dict, str]]:
        """What a healthy transformers or torch release changes under the same model and precision: how
        prompts are batched and padded, and which SDPA kernel runs. Left out, measured on the embedded
        case (docs/calibration.md): eager attention, whose bfloat16 score x value product is another
        precision (its largest error 0.0217 against 0.0093-0.0102), and CPU thread counts, which gave
        bit-identical results."""
        out: list[tuple[str, dict, str]] = [("batched-2-right", {"batch_size": 2, "padding_side": "right"},
                "pairs of a bucket batched, padding masked"),
               ("batched-4-left", {"batch_size": 4, "padding_side": "left"}, "left padding shifts every real position"),
               ("batched-8-right", {"batch_size": 8, "padding_side": "right"},
                "larger batches block the matmuls otherwise"),
               ("batched-8-left", {"batch_size": 8, "padding_side": "left"}, "larger batches, left padded"),
               ("sdpa-math", {"attn_implementation": "sdpa", "sdpa_backend": "math"}, "torch's reference SDPA kernel")]
        if self.device.startswith("cuda"):
            # The math kernel holds every head's [seq, seq] scores and their softmax (at 32K tokens 32 GiB each
            # in bfloat16, 64 in float32: about what the GPU holds; not tried), which no long-prompt engine
            # would run; the flash and memory-efficient kernels are what a release may switch between.
            # The memory-efficient kernel takes no grouped-query heads, so it gets them repeated
            # (sdpa_repeat_kv); under plain sdpa it would fall back to the math kernel.
            out = [v for v in out if v[0] != "sdpa-math"]
            # On CPU torch.compile needs a C++ toolchain and minutes per shape; on a GPU it is the production path.
            out += [("compiled" if not self.compile else "uncompiled", {"compile": not self.compile},
                     "compiled layers fuse the elementwise work around the matmuls"),
                    ("sdpa-flash", {"attn_implementation": "sdpa", "sdpa_backend": "flash"},
                     "FlashAttention-2 instead of torch's default choice"),
                    ("sdpa-efficient", {"attn_implementation": "sdpa_repeat_kv", "sdpa_backend": "efficient"},
                     "the memory-efficient SDPA kernel instead of torch's default choice")]
        return out
