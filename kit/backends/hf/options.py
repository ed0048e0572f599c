"""Case options of the hf backend."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.backends.options import BackendOptions


class HfOptions(BackendOptions):
    """transformers + torch; the reference that makes the goldens."""

    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    # sdpa_repeat_kv: SDPA without torch's GQA flag, so float32 long prompts keep a memory-efficient kernel.
    attn_implementation: Literal["eager", "sdpa", "sdpa_repeat_kv"] = "sdpa"
    device: str = Field(default="cpu", pattern=r"^(cpu|cuda(:[0-9]+)?)$")
    threads: int = Field(default=1, ge=1)
    # Prompts of one bucket scored together, padded to the longest; 1 scores each prompt alone.
    batch_size: int = Field(default=1, ge=1)
    padding_side: Literal["left", "right"] = "right"
    # Which torch SDPA kernel to prefer ("auto": torch's own choice); only for attn_implementation sdpa.
    sdpa_backend: Literal["auto", "flash", "cudnn", "efficient", "math"] = "auto"
    # torch.compile each decoder layer, so the elementwise work around the matmuls (norms, rotary,
    # SiLU x up) fuses; one graph serves every layer and every prompt length.
    compile: bool = False
