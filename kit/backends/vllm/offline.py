"""vLLM offline: `vllm.LLM` in the case's kernel, prompts as exact token ids, one generated token.

The top logprobs of that one token are the next-token distribution at the last prompt position; a
case's decode check asks for N tokens instead (``decode``), each with its top logprobs.
vLLM reports them from the raw logits (its default `logprobs_mode`), before any sampling
processing, so temperature does not reshape them.

An engine whose constructor fails (its core process or a worker did not come up) raises
kit.core.errors.EngineDidNotStart, the typed fault the gate classes as the job's, as the server mode does.
"""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import sys
import time
from typing import Sequence

from kit.backends.base import helper_log_path
from kit.backends.processes import descendants, stop_procs
from kit.backends.vllm.engine import (EAGER_CPU_ENV, RPC_ENV, EngineSettings, remove_rpc_dir, top_of,
                                      with_own_rpc_dir)
from kit.core.errors import EngineDidNotStart
from kit.core.records.fixture import Prompt
from kit.core.records.records import Continuation, Observation
from kit.core.records.spec import CaseSpec


class VllmOfflineBackend:
    name = "vllm"

    def __init__(self, spec: CaseSpec, settings: EngineSettings):
        self.settings = settings
        env, self._rpc_dir = with_own_rpc_dir(settings.env, spec.name)
        self._compile_env_before = {k: os.environ.get(k) for k in EAGER_CPU_ENV}
        os.environ.update(env)
        _switch_compile(os.environ)
        self.log_path = helper_log_path(spec.name, "engine")
        self._log = open(self.log_path, "a", buffering=1)
        before = {p.pid for p in descendants(os.getpid())}
        t0 = time.perf_counter()
        try:
            with _output_to(self._log):
                from vllm import LLM

                self.import_s = time.perf_counter() - t0
                try:
                    self.llm = LLM(model=settings.model, **settings.engine_args)
                except Exception as exc:
                    raise EngineDidNotStart(f"vLLM's engine did not start (log {self.log_path}): "
                                            f"{type(exc).__name__}: {exc}") from exc
        finally:
            # The engine core and its workers are this process's children: remember them so that
            # close() leaves none behind, whatever vLLM's own shutdown does (or a failed start left).
            self._engine_procs = [p for p in descendants(os.getpid()) if p.pid not in before]
            if not hasattr(self, "llm"):
                stop_procs(self._engine_procs)
                self._drop_rpc_dir()
        self.start_s = time.perf_counter() - t0

    def release(self) -> dict:
        """What identifies this build for the record: vLLM, torch, transformers, Python, dtype and device."""
        import torch
        import transformers
        import vllm

        return {"backend": self.name, "vllm": vllm.__version__, "torch": torch.__version__,
                "transformers": transformers.__version__, "python": platform.python_version(),
                "mode": "offline", "dtype": self.settings.engine_args["dtype"], "device": self.settings.device}

    def details(self) -> dict:
        """How the engine was started (arguments, environment, import and start times, its log and sockets),
        for the case's record."""
        return {"mode": "offline", "engine_args": self.settings.engine_args, "env": self.settings.env,
                "import_s": round(self.import_s, 2), "engine_start_s": round(self.start_s, 2),
                "engine_log": str(self.log_path), "sockets_dir": self._rpc_dir}

    def observe(self, prompts: Sequence[Prompt], top_n: int) -> list[Observation]:
        """Each prompt's top ``top_n`` next-token logprobs from one greedy step of the offline engine, all
        prompts in one call."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=top_n)
        requests = [TokensPrompt(prompt_token_ids=list(c.prompt_token_ids)) for c in prompts]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        observations = []
        for prompt, out in zip(prompts, outputs):
            if list(out.prompt_token_ids) != list(prompt.prompt_token_ids):
                raise RuntimeError(f"{prompt.id}: vLLM scored other token ids than the fixture's")
            step = out.outputs[0].logprobs[0]
            by_rank = dict(sorted(step.items(), key=lambda kv: kv[1].rank or 0))
            observations.append(Observation(prompt.id, top_of({t: lp.logprob for t, lp in by_rank.items()}, top_n),
                                            prompt.n_tokens))
        return observations

    def decode(self, prompts: Sequence[Prompt], steps: int, top_n: int) -> list[Continuation]:
        """Each prompt continued greedily ``steps`` tokens by the engine: its scheduler, paged KV cache and
        decode kernels. ``ignore_eos`` keeps every step (the golden's continuation does not stop either);
        the logprobs are the raw logits', as in ``observe``."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(max_tokens=steps, min_tokens=steps, temperature=0.0, logprobs=top_n,
                                ignore_eos=True)
        requests = [TokensPrompt(prompt_token_ids=list(c.prompt_token_ids)) for c in prompts]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        continuations = []
        for prompt, out in zip(prompts, outputs):
            if list(out.prompt_token_ids) != list(prompt.prompt_token_ids):
                raise RuntimeError(f"{prompt.id}: vLLM continued other token ids than the fixture's")
            completion = out.outputs[0]
            per_step = tuple((int(token), top_of({t: lp.logprob for t, lp in step.items()}, top_n))
                             for token, step in zip(completion.token_ids, completion.logprobs))
            continuations.append(Continuation(prompt.id, per_step))
        return continuations

    def close(self) -> None:
        """Shut the engine down, stop what of its processes vLLM leaves, and remove its sockets, so that the
        next case's engine finds the memory and the names free."""
        llm, self.llm = getattr(self, "llm", None), None
        shut_down = False
        if llm is not None:
            core = getattr(llm.llm_engine, "engine_core", None)
            if core is not None:
                core.shutdown()
                shut_down = True
            del llm
            gc.collect()
        # After vLLM's own shutdown what is left is what it does not stop, such as multiprocessing's resource
        # tracker, which ignores SIGTERM: a grace period would only wait out its 10 s.
        stop_procs(getattr(self, "_engine_procs", []), grace_s=0 if shut_down else 10.0)
        self._drop_rpc_dir()
        self._restore_compile()
        # The log stays open: vLLM's logger holds on to it for the rest of the process.

    def _restore_compile(self) -> None:
        """torch.compile as it was before this engine: a kernel may start a compiled engine after an eager one (a
        calibration's variants), and a server it starts inherits this process's environment."""
        before = getattr(self, "_compile_env_before", None)
        if before is None:
            return
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _switch_compile(os.environ)

    def _drop_rpc_dir(self) -> None:
        """The engine's socket folder removed, and unnamed in this process, where a later engine makes its own."""
        made = getattr(self, "_rpc_dir", None)
        if made and os.environ.get(RPC_ENV) == made:
            del os.environ[RPC_ENV]
        remove_rpc_dir(made)


def _switch_compile(env) -> None:
    """torch.compile on or off in this process as ``env`` says (kit.backends.vllm.engine.EAGER_CPU_ENV). torch reads
    the variable once, when its compiler's configuration is first imported, and checks the setting at every call
    of a compiled function: so the setting itself is changed, for an engine that follows another in this kernel."""
    import torch._dynamo.config as dynamo_config

    dynamo_config.disable = env.get("TORCH_COMPILE_DISABLE") == "1"


@contextlib.contextmanager
def _output_to(log):
    """Send the engine's output to its log rather than into the case notebook: its processes inherit
    file descriptors 1 and 2 when they start, and vLLM binds its logger to sys.stdout when it first
    configures logging, inside the engine's constructor."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
