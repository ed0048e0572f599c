"""jax: the plain JAX Llama of ``kit.backends.jax.llama``, a second implementation beside hf.

Each prompt is right-padded to its bucket's length, so one compiled program
serves a whole bucket; causal attention keeps the padding invisible to the real
positions, and the logits are read at the last real one.
"""

from __future__ import annotations

import json
import os
import platform as _platform
import time
from pathlib import Path
from typing import Sequence

from kit.backends.jax.choices import Attention, Padding, Platform
from kit.core.errors import BadInput
from kit.core.records.fixture import Prompt
from kit.core.records.records import Observation
from kit.core.records.spec import CaseSpec

LONG_PROMPT = 8192  # from here on, XLA's reference attention needs [heads, seq, seq] scores: too much memory


def float32_gpu_options(dtype: str, platform: str) -> dict:
    """XLA options for a float32 program on a GPU: no Triton GEMM fusions, so every matmul goes to cuBLAS.

    At HIGHEST precision XLA otherwise autotunes Triton kernels for each float32 matmul, compiling many
    candidates: on an H200 the 1.5B model's programs took 20-27 s each to compile (the 256- and 1K-token
    buckets, next to no work, took 24 and 27 s), about half of jax-f32's 214 s over the 64-prompt
    fixture. With cuBLAS a program compiles in 2 s or less, and the float32 result stays float32
    (another kernel, another summation order: float32 rounding). bfloat16 keeps XLA's defaults: its
    calibrated records were measured with them. Measured 2026-12-04, docs/gpu-figures.md."""
    return {"xla_gpu_enable_triton_gemm": False} if dtype == "float32" and platform == Platform.GPU else {}


STEPS_FROM = 8192  # buckets from this length up are padded in quarter steps under "steps" padding
STEPS = 4


def choose_padding(requested: str, dtype: str, platform: str) -> str:
    """The padding a case runs with: as requested, else per decode step where float32 on a GPU needs it, per
    bucket otherwise."""
    if requested != Padding.AUTO:
        return requested
    return Padding.STEPS if float32_gpu_options(dtype, platform) else Padding.BUCKET


def padded_length(n_tokens: int, bucket: int, padding: str) -> int:
    """The length a prompt is scored at: its bucket's, or under "steps" in a long bucket the next quarter of it.

    Right padding behind a causal mask changes no real position's logits, only the work: a 17K-token prompt of
    the 32K bucket costs a 32K-token forward, and in float32 on an H200 the 16K and 32K buckets were 86 % of the
    jax-f32 case's scoring (docs/gpu-figures.md). A quarter step holds at most a quarter of the bucket of padding
    for at most three more programs per bucket, each a multiple of the attention's query block."""
    if padding != Padding.STEPS or bucket < STEPS_FROM or n_tokens >= bucket:
        return max(bucket, n_tokens)
    step = bucket // STEPS
    return -(-n_tokens // step) * step


# How many times its own need a program of unrolled blocks must find free: XLA's allocator holds what earlier
# programs used and needs one block of this size. On an 80 GiB H100 a 32K-token program asking 38.5 GiB failed
# alone, with 54 GiB of jax's 60 nominally free (docs/gpu-figures.md); on an H200 (104 GiB) it ran.
HEADROOM = 2.0


def memory_budget(device) -> int | None:
    """The bytes a new program of this process may still take on ``device``: its allocator's limit less what it
    holds; None where the device does not say (a CPU)."""
    try:
        stats = device.memory_stats()
    except Exception:  # a platform without the call says nothing about its memory, which is what None means
        return None
    if not stats or "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def choose_attention(requested: str, dtype: str, platform: str, seq: int) -> str:
    """The attention a prompt runs with: as requested, else on a GPU cuDNN for bfloat16 and float16 and the exact
    chunked one for float32, on a CPU XLA's own below LONG_PROMPT tokens and the chunked one from there."""
    if requested != Attention.AUTO:
        return requested
    if platform == Platform.GPU:
        # cuDNN's flash attention has bfloat16/float16 kernels only; the chunked attention is
        # exact in float32 (and, at HIGHEST precision, free of TF32).
        return Attention.CUDNN if dtype != "float32" else Attention.CHUNKED
    return Attention.XLA if seq < LONG_PROMPT else Attention.CHUNKED


class JaxBackend:
    name = "jax"

    def __init__(self, model_path: str, dtype: str = "float32", attention: str = Attention.AUTO, platform: str = "cpu",
                 excess_precision: bool = True, tensor_parallel: int = 1, case: str = "jax",
                 padding: str = Padding.AUTO):
        # By default jax takes 75% of a GPU's memory at start; a gate case shares its GPU with others.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        if platform == Platform.CPU and tensor_parallel > 1:
            split_host(tensor_parallel)
        import jax

        from kit.backends.jax.llama import load_params, shape_from_config

        if attention not in tuple(Attention):
            raise ValueError(f"attention must be one of {', '.join(Attention)}, got {attention!r}")
        self._jax = jax
        self.dtype, self.attention, self.platform = dtype, attention, platform
        self.excess_precision = excess_precision
        self.padding = choose_padding(padding, dtype, platform)
        devices = jax.devices(platform)
        self.device = devices[0]
        self.tp = None
        place = None
        if tensor_parallel != 1:
            from kit.backends.jax.sharding import TensorParallel, tensor_parallel_problem

            shape = shape_from_config(json.loads((Path(model_path) / "config.json").read_text()))
            problem = tensor_parallel_problem(tensor_parallel, shape.heads, shape.kv_heads)
            if problem is None and tensor_parallel > len(devices):
                problem = (f"tensor_parallel = {tensor_parallel} needs {tensor_parallel} {platform} devices; this "
                           f"kernel sees {len(devices)} ({', '.join(str(d) for d in devices)})")
            if problem:
                raise BadInput(f"case {case}: {problem}")
            self.tp = TensorParallel.over(devices[:tensor_parallel], shape.vocab)
            place = self.tp.param
        t0 = time.perf_counter()
        self.shape, self.params = load_params(model_path, dtype, self.device, place)
        self.load_s = time.perf_counter() - t0
        self._compiled: dict[tuple[int, str], object] = {}
        self._used: dict[str, str] = {}
        self._fitted: dict[int, str] = {}  # per length: the chunked attention that fits the device's memory
        self._needs: dict[str, int] = {}  # per length: the bytes the unrolled chunked attention's program asked for

    def release(self) -> dict:
        """What identifies this build for the record: jax, jaxlib, Python, dtype, attention and the device it ran on."""
        import jax
        import jaxlib

        out = {"backend": self.name, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
               "python": _platform.python_version(), "dtype": self.dtype, "attention": self.attention,
               "device": self.platform, "device_name": getattr(self.device, "device_kind", str(self.device))}
        if float32_gpu_options(self.dtype, self.platform):  # cuBLAS for every matmul (float32_gpu_options)
            out["xla_triton_gemm"] = False
        if self.padding != Padding.BUCKET:  # other programs' shapes, another summation order: the provenance says so
            out["padding"] = self.padding
        if not self.excess_precision:  # another rounding than XLA's default: the provenance must tell them apart
            out["excess_precision"] = False
        if self.tp is not None:  # another summation order (kit.backends.jax.sharding): the provenance says so
            out["tensor_parallel"] = self.tp.size
            out["devices"] = [str(d) for d in self.tp.mesh.devices.flat]
        return out

    def details(self) -> dict:
        """The attention each prompt length ran with, and where chunked attention was chosen the size of its
        program, for the case's record."""
        return {"attention": dict(self._used), **({"chunked_program_bytes": dict(self._needs)} if self._needs else {})}

    def _program(self, seq: int, attention: str):
        key = (seq, attention)
        if key not in self._compiled:
            from functools import partial

            from kit.backends.jax.llama import last_logits

            # XLA's own default is True; only the other choice is passed, as a per-program option.
            options = {} if self.excess_precision else {"xla_allow_excess_precision": False}
            options.update(float32_gpu_options(self.dtype, self.platform))
            sharded = {} if self.tp is None else {"out_shardings": self.tp.replicated()}
            self._compiled[key] = self._jax.jit(partial(last_logits, shape=self.shape, attention=attention,
                                                        tp=self.tp),
                                                compiler_options=options or None, **sharded)
        return self._compiled[key]

    def observe(self, prompts: Sequence[Prompt], top_n: int) -> list[Observation]:
        """Each prompt's top ``top_n`` next-token logprobs, padded as the case's padding says, its compiled
        program reused across prompts of one length."""
        import numpy as np

        jax = self._jax
        out = []
        for prompt in prompts:
            seq = padded_length(prompt.n_tokens, prompt.bucket, self.padding)
            attention = choose_attention(self.attention, self.dtype, self.platform, seq)
            ids = np.zeros((1, seq), dtype=np.int32)
            ids[0, :prompt.n_tokens] = prompt.prompt_token_ids
            last = np.array([prompt.n_tokens - 1], dtype=np.int32)
            where = self.device if self.tp is None else self.tp.replicated()
            ids, last = jax.device_put(ids, where), jax.device_put(last, where)
            if attention == Attention.CHUNKED:
                attention = self._chunked_that_fits(seq, ids, last)
            self._used[str(prompt.bucket)] = attention
            logits = self._program(seq, attention)(self.params, ids, last)
            logprobs = jax.nn.log_softmax(logits[0])
            values, indices = jax.lax.top_k(logprobs, min(top_n, self.shape.vocab))
            out.append(Observation(prompt.id, tuple(zip(np.asarray(indices).tolist(),
                                                      np.asarray(values).tolist())), prompt.n_tokens))
        return out

    def _chunked_that_fits(self, seq: int, ids, last) -> str:
        """The chunked attention's unrolled blocks where their program fits what the device has left (HEADROOM times
        over), else the same blocks one at a time (kit.backends.jax.llama.looped_causal_attention): XLA keeps every
        unrolled block's scores at once, 38 GiB at 32K tokens in float32 for the 1.5B GPU model, past an 80 GiB GPU.
        The program is compiled ahead to read what it asks for, and kept when it fits; a device that does not say
        what it has left (a CPU) keeps the unrolled blocks."""
        from kit.backends.jax.llama import LOOPED

        if seq in self._fitted:
            return self._fitted[seq]
        budget = memory_budget(self.device)
        choice: str = Attention.CHUNKED
        if budget is not None and self.tp is None:
            compiled = self._program(seq, Attention.CHUNKED).lower(self.params, ids, last).compile()
            need = getattr(compiled.memory_analysis(), "temp_size_in_bytes", None)
            if need is not None:
                self._needs[str(seq)] = int(need)
            if need is not None and need * HEADROOM > budget:
                choice = LOOPED
            else:
                self._compiled[(seq, Attention.CHUNKED)] = compiled
        self._fitted[seq] = choice
        return choice

    def close(self) -> None:
        """Drop the parameters and compiled programs, so that the next case in a warm kernel gets the memory back."""
        self.params = None
        self._compiled.clear()


def split_host(devices: int) -> None:
    """On CPU XLA shows one device; a tensor-parallel case splits the host into ``devices`` of them, which
    runs the same partitioned program and collectives as GPUs would (for agreement, not for speed). It
    must run before JAX creates its CPU backend, as it does in a case's own kernel; a count already set
    in XLA_FLAGS is kept."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()


def open_backend(spec: CaseSpec) -> JaxBackend:
    """The jax backend of a case. The options arrive resolved: every default was applied by the descriptor's
    schema, the one place they are stated."""
    return JaxBackend(spec.model_path, **spec.options, case=spec.name)
