"""The contract of a backend: the interface its runtime implements, and the record it registers."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from kit.core.contract import LOG_PREFIX_ENV
from kit.core.fixture import Prompt
from kit.core.records import Continuation, Observation


class Backend(Protocol):
    name: str

    def release(self) -> dict:
        """The identity of what computed the observations: engine versions, build, device."""

    def observe(self, prompts: Sequence[Prompt], top_n: int) -> list[Observation]:
        """Next-token top-n logprobs at the last position of each case, most likely first."""

    def details(self) -> dict:
        """How the last ``observe`` computed its results (attention per bucket, ...); may be empty."""

    def close(self) -> None:
        """Free the engine (processes, memory); observing after close is an error."""


class DecodingBackend(Backend, Protocol):
    """A backend with a decode path of its own (registered with ``decodes=True``): the optional part of
    the contract that cases with ``decode = N`` need."""

    def decode(self, prompts: Sequence[Prompt], steps: int, top_n: int) -> list[Continuation]:
        """Each prompt continued greedily ``steps`` tokens through the engine's own decode path (its KV
        cache), with the top-n logprobs at every step, most likely first (kit.core.decode compares them)."""


def can_decode(backend: object) -> bool:
    """Whether a backend object implements the optional ``decode``."""
    return callable(getattr(backend, "decode", None))


def helper_log_path(case: str, what: str) -> Path:
    """Where a helper process of this case logs: beside the case result, or a temp dir when run by hand."""
    prefix = os.environ.get(LOG_PREFIX_ENV)
    if prefix:
        return Path(f"{prefix}.{what}.log")
    return Path(tempfile.mkdtemp(prefix=f"parity-kit-{case}-")) / f"{what}.log"


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class BackendInfo:
    """What the registry knows of a backend, registered under the ``parity_kit.backends`` entry-point
    group (built-ins too). Every field is plain data or a dotted name, so reading the registry imports
    no engine: the runtime is imported only in the case kernel, the options schema only by the
    descriptor."""

    name: str
    summary: str
    runtime: str                    # module whose ``open_backend(spec)`` returns a Backend
    options: str                    # "module:Class", the pydantic schema of the case options
    # The case notebook: a file name among the packaged notebooks, or a path; the generic one shows the
    # verdict, a per-prompt table and the error plot, which is all a backend without details of its own needs.
    notebook: str = "parity.ipynb"
    kernel: str = "parity-kit"      # the kernel a case runs in unless the descriptor names another
    makes_goldens: bool = False     # `golden make --backend NAME` may use it
    requires: tuple[str, ...] = ()  # top-level modules its kernel must be able to import
    install: str = ""               # the command that installs what it requires
    decodes: bool = False           # its runtime implements ``decode``: cases may set ``decode = N``
    # "module:function": ``function(options) -> str``, the key of what decides the bits of this backend's
    # results under a case's options (kit.core.runtime). An exact golden holds only where its key is equal.
    exact_runtime: str = "kit.core.runtime:host_runtime_of"

    def open(self, spec) -> "Backend":
        import importlib

        return importlib.import_module(self.runtime).open_backend(spec)

    def runtime_key(self, options: dict) -> str:
        """This host's runtime key for a case of this backend with ``options`` (see ``exact_runtime``)."""
        import importlib

        module, _, function = self.exact_runtime.partition(":")
        return str(getattr(importlib.import_module(module), function)(dict(options)))
