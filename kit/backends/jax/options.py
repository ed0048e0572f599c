"""Case options of the jax backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import Field, model_validator

from kit.backends.jax.sharding import tensor_parallel_problem
from kit.backends.jax.choices import Attention, Padding, Platform
from kit.backends.options import BackendOptions, Choice


class JaxOptions(BackendOptions):
    """A plain Llama forward in JAX over the same safetensors: an independent second implementation."""

    dtype: Literal["float32", "bfloat16"] = "float32"
    # "auto": cuDNN flash attention on a GPU in bfloat16, exact query-chunked attention in float32
    # on long prompts (cuDNN has no float32 kernel), XLA's reference attention otherwise.
    attention: Choice[Attention] = Attention.AUTO
    platform: Choice[Platform] = Platform.CPU
    # XLA may keep a fused computation's intermediate values in float32 where the program rounds them to
    # bfloat16 (its default, like torch.compile); False makes it round at every operation, like eager torch.
    excess_precision: bool = True
    # How far a prompt is padded (one compiled program per length): "bucket", to its bucket's length; "steps", in
    # long buckets to the next quarter of the bucket (kit.backends.jax.runtime.padded_length); "auto": steps for
    # float32 on a GPU, where compiling is cheap and a forward of padding is not, the bucket otherwise (bfloat16's
    # records were measured with it).
    padding: Choice[Padding] = Padding.AUTO
    # Split the model over this many devices by heads (kit.backends.jax.sharding says what and why); on
    # CPU the case's kernel splits the host into that many XLA devices. 1: one device, no mesh.
    tensor_parallel: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _devices_asked_for(self):
        # In a descriptor's case the schema is this one plus the common keys: a GPU case that asks the
        # executor for fewer GPUs than it splits the model over would find too few in its kernel.
        resources = getattr(self, "resources", None)
        gpus = getattr(resources, "num_gpus", 0)
        if self.platform == Platform.GPU and gpus and self.tensor_parallel > gpus:
            raise ValueError(f"tensor_parallel = {self.tensor_parallel} splits the model over more GPUs than "
                             f"resources.num_gpus = {gpus:g} gives the case (ask for {self.tensor_parallel})")
        return self

    @classmethod
    def model_problem(cls, options: Mapping[str, Any], model_dir: str | Path) -> str | None:
        """Why a tensor-parallel case cannot split the model's heads over its devices (a head count the
        degree does not divide), read from config.json before anything runs."""
        tp = options.get("tensor_parallel", 1)
        config_path = Path(model_dir) / "config.json"
        if tp == 1 or not config_path.is_file():  # no config: the kernel's own load says what is missing
            return None
        config = json.loads(config_path.read_text())
        heads = config.get("num_attention_heads")
        if not isinstance(heads, int):
            return None
        return tensor_parallel_problem(tp, heads, config.get("num_key_value_heads", heads))

    def implementation_variants(self) -> list[tuple[str, dict, str]]:
        """The jax path's free choices: the attention implementation, and how much of the bfloat16
        rounding XLA's fusion skips, which another XLA release may change (on a GPU, the attention kernels
        it can run)."""
        if self.platform == Platform.GPU:
            # XLA's reference attention holds every head's [seq, seq] float32 scores: it runs out of memory at
            # 32K tokens on an H200. Rounding at every operation changed no bit of the 1B model's results
            # on the H200 (docs/gpu-figures.md), so it would only repeat the case as set.
            float32 = self.dtype == "float32"  # cuDNN has no float32 kernel: "auto" is chunked there
            effective = self.attention if self.attention != Attention.AUTO else (Attention.CHUNKED if float32
                                                                                else Attention.CUDNN)
            others = [a.value for a in (Attention.CUDNN, Attention.CHUNKED)
                      if a != effective and not (a == Attention.CUDNN and float32)]
            return [(f"attention-{a}", {"attention": a}, "another attention implementation") for a in others]
        out: list[tuple[str, dict, str]] = [(f"attention-{a}", {"attention": a}, "another attention implementation")
                                            for a in (Attention.XLA.value, Attention.CHUNKED.value)
                                            if a != self.attention]
        out.append(("rounded" if self.excess_precision else "excess-precision",
                    {"excess_precision": not self.excess_precision},
                    "XLA's fusion keeps or skips bfloat16 roundings between fused operations"))
        return out
