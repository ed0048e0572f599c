"""Case options of the vllm backend."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kit.backends.options import BackendOptions


class VllmOptions(BackendOptions):
    """vLLM, as the offline engine (`vllm.LLM`) or as its OpenAI-compatible server (`vllm serve`)."""

    mode: Literal["offline", "server"] = "offline"
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    max_model_len: int | None = Field(default=None, ge=1)
    max_logprobs: int | None = Field(default=None, ge=1)  # default: the case's top_n
    attention_backend: str | None = None
    batch_invariant: bool = False
    pipeline_parallel_size: int = Field(default=1, ge=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = None
    enforce_eager: bool | None = None  # default: eager at pp1, compiled beyond (see kit.backends.vllm.runtime)
    cpu_kvcache_space_gib: int | None = Field(default=None, ge=1)
    cpu_threads_bind: str | None = None
    server_start_timeout_s: float = Field(default=600.0, gt=0)
    # Any other engine argument, by its Python name, for both modes (server: --name-with-dashes).
    engine_args: dict[str, str | int | float | bool] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
