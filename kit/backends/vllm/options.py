"""Case options of the vllm backend."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kit.backends.options import BackendOptions, Choice
from kit.backends.vllm.engine import Mode


class VllmOptions(BackendOptions):
    """vLLM, as the offline engine (`vllm.LLM`) or as its OpenAI-compatible server (`vllm serve`)."""

    mode: Choice[Mode] = Mode.OFFLINE
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    max_model_len: int | None = Field(default=None, ge=1)
    max_logprobs: int | None = Field(default=None, ge=1)  # default: the case's top_n
    attention_backend: str | None = None
    batch_invariant: bool = False
    pipeline_parallel_size: int = Field(default=1, ge=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = None
    enforce_eager: bool | None = None  # default: eager at pp1, compiled beyond (see kit.backends.vllm.engine)
    cpu_kvcache_space_gib: int | None = Field(default=None, ge=1)
    cpu_threads_bind: str | None = None
    # Where the offline engine's core runs: in the case's kernel (no engine-core or worker process to start and
    # import vLLM again: on 2 CPU cores its start falls from about 50 s to 20 s and its close from 16 s to 2 s), or in
    # processes of its own as vLLM's default. Unset: in the kernel on CPU with one worker, its own processes otherwise.
    # Scoring is bit for bit the same either way (kit.backends.vllm.engine).
    engine_in_kernel: bool | None = None
    server_start_timeout_s: float = Field(default=600.0, gt=0)
    # Any other engine argument, by its Python name, for both modes (server: --name-with-dashes).
    engine_args: dict[str, str | int | float | bool] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    # The server listens on loopback only; engine_args host/port that would open it further need this.
    allow_network: bool = False

    @model_validator(mode="after")
    def _kit_owned_args(self) -> "VllmOptions":
        for key in self.engine_args:
            if key in KIT_SETS:
                raise ValueError(f"engine_args.{key}: the kit sets it ({KIT_SETS[key]}); remove it")
            if key in NETWORK_ARGS and self.mode != Mode.SERVER:
                raise ValueError(f"engine_args.{key}: only the server (mode = \"server\") listens")
            if key in NETWORK_ARGS and not self.allow_network:
                raise ValueError(f"engine_args.{key}: {NETWORK_ARGS[key]}; the kit serves on 127.0.0.1 only "
                                 "unless the case sets allow_network = true")
        return self

    def code_settings(self) -> list[tuple[str, str]]:
        """The options that make vLLM load code beyond the kit's (environment variables, engine arguments, an
        open network): the descriptor warns about each."""
        found = [(f"env.{name}", why) for name in self.env if (why := env_loads_code(name))]
        found += [(f"engine_args.{name}", CODE_ARGS[name]) for name, value in self.engine_args.items()
                  if name in CODE_ARGS and value is not False]
        if self.allow_network:
            found.append(("allow_network", "engine_args host and port may open the server beyond loopback"))
        return found


    def implementation_variants(self) -> list[tuple[str, dict, str]]:
        """What changes vLLM's rounding under the same model and precision: graph capture, and how the model
        is split over workers (the CPU build's pipeline stages each bind their own thread and compile
        their own graph: pp2 moves a prompt's error by up to 0.017 against pp1). A healthy release may
        change either. On the CPU build these gave bit-identical results and are left out
        (docs/calibration.md): chunked prefill, one sequence per step, a KV block size of 64, no prefix
        cache, attention without split-KV, one or two threads."""
        if self.pipeline_parallel_size * self.tensor_parallel_size == 1:
            eager = self.enforce_eager is not False  # unset means eager at pp1
            return [("compiled" if eager else "eager", {"enforce_eager": not eager},
                     "compiled graphs against eager execution"),
                    ("two-stages", {"mode": "server", "pipeline_parallel_size": 2, "enforce_eager": False,
                                    "distributed_executor_backend": "mp", "cpu_threads_bind": "0|1"},
                     "the model split over two pipeline stages (the server: the offline engine runs one)")]
        return [("one-stage-compiled", {"pipeline_parallel_size": 1, "enforce_eager": False,
                                        "distributed_executor_backend": None, "cpu_threads_bind": None},
                 "the model on one worker, compiled"),
                ("one-stage-eager", {"pipeline_parallel_size": 1, "enforce_eager": True,
                                     "distributed_executor_backend": None, "cpu_threads_bind": None},
                 "the model on one worker, eager")]


# What the kit sets itself (kit.backends.vllm.server, kit.backends.vllm.engine): an override would
# score another model than the pinned one or ask the server for a name it does not serve.
KIT_SETS = {"model": "the case's pinned model folder", "served_model_name": "the name its requests use"}
# Engine arguments that decide who can reach the server.
NETWORK_ARGS = {"host": "the address the server listens on", "port": "the port the server listens on"}
# Engine arguments known to make vLLM import or run code named by the descriptor.
CODE_ARGS = {
    "trust_remote_code": "the engine runs the model folder's own Python code",
    "worker_cls": "the engine imports the worker class it names",
    "worker_extension_cls": "the engine imports the worker extension it names",
    "logits_processors": "the engine imports the logits processors it names",
    "middleware": "the server imports the middleware it names",
    "tool_parser_plugin": "the server runs the Python file it names",
    "reasoning_parser_plugin": "the server runs the Python file it names",
    "kv_transfer_config": "the engine may import the KV connector module it names",
}
# Environment variables known to make a process load code: the dynamic loader's, Python's, vLLM's plugins.
CODE_ENV = {"PATH": "it chooses the programs the engine starts",
            "VLLM_PLUGINS": "it chooses the vLLM plugins the engine loads",
            "VLLM_USE_MODELSCOPE": "the engine fetches models and their code from ModelScope"}
CODE_ENV_PREFIXES = {"LD_": "the dynamic loader loads what it names into the engine",
                     "DYLD_": "the dynamic loader loads what it names into the engine",
                     "PYTHON": "Python imports or runs what it names in the engine"}


def env_loads_code(name: str) -> str | None:
    """What an environment variable makes the engine's processes load, or None when it is not known to."""
    if name in CODE_ENV:
        return CODE_ENV[name]
    return next((why for prefix, why in CODE_ENV_PREFIXES.items() if name.startswith(prefix)), None)
