"""The contract of a backend: the interface its runtime implements, and the record it registers."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence, TypeGuard

from kit.core.records.contract import LOG_PREFIX_ENV
from kit.core.errors import BadInput
from kit.core.records.fixture import Prompt
from kit.core.records.records import Continuation, Observation


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
        cache), with the top-n logprobs at every step, most likely first (kit.core.verdict.decode compares them)."""


def can_decode(backend: object) -> TypeGuard[DecodingBackend]:
    """Whether a backend object implements the optional ``decode``."""
    return callable(getattr(backend, "decode", None))


def helper_log_path(case: str, what: str) -> Path:
    """Where a helper process of this case logs: beside the case result, or a temp dir when run by hand."""
    prefix = os.environ.get(LOG_PREFIX_ENV)
    if prefix:
        return Path(f"{prefix}.{what}.log")
    return Path(tempfile.mkdtemp(prefix=f"parity-kit-{case}-")) / f"{what}.log"


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of an engine's log, or nothing where it cannot be read: what an engine's failure
    quotes, so that a CI log shows the engine's own last words."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def placement(options: dict) -> dict:
    """Where a case with ``options`` runs, in the reference's words (``device``, ``threads``): the default
    ``placement`` of a backend whose options say it so already."""
    return {k: options[k] for k in ("device", "threads") if k in options}


def _call(target: str, *args):
    """Call a "module:function" hook, importing its module only now (reading the registry imports none)."""
    import importlib

    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)(*args)


@dataclass(frozen=True)
class BackendInfo:
    """What the registry knows of a backend, registered under the ``parity_kit.backends`` entry-point
    group (built-ins too). Every field is plain data or a dotted name, so reading the registry imports
    no engine: the runtime is imported only in the case kernel, the options schema only by the
    descriptor, and each hook only by the command that asks it. What a command does differently per
    backend is one of these fields, never a test of the backend's name, so that adding a backend
    (a third party's included) is one package."""

    name: str
    summary: str
    runtime: str                    # module whose ``open_backend(spec)`` returns a Backend
    options: str                    # "module:Class", the pydantic schema of the case options
    # The case notebook: a file name among the packaged notebooks, or a path; the generic one shows the
    # verdict, a per-prompt table and the error plot, which is all a backend without details of its own needs.
    notebook: str = "parity.ipynb"
    # The kernel a case runs in unless the descriptor names another. Other than the main one, the backend's
    # environment is its own: what only it can compute (a golden, its activations) runs there.
    kernel: str = "parity-kit"
    makes_goldens: bool = False     # `golden make --backend NAME` may use it
    requires: tuple[str, ...] = ()  # top-level modules its kernel must be able to import
    install: str = ""               # the command that installs what it requires
    decodes: bool = False           # its runtime implements ``decode``: cases may set ``decode = N``
    # "module:function": ``function(options) -> str``, the key of what decides the bits of this backend's
    # results under a case's options (kit.core.host.runtime). An exact golden holds only where its key is equal.
    exact_runtime: str = "kit.core.host.runtime:host_runtime_of"
    # "module:function": ``function(provenance) -> str | None``, the runtime key of an exact golden of this backend
    # made before goldens recorded one, where its record says enough (None where it does not); "" for none: such
    # a golden holds on no runtime.
    legacy_runtime: str = ""
    # "module:function": ``function(options) -> dict`` of environment variables a case kernel must start with
    # (settings a library reads once, when it loads: the kernels an hf case pins); "" for none.
    kernel_env: str = ""
    # Modules its case kernel imports, beyond every kit notebook's first cell, that a warm process imports once
    # for all the kernels it forks (kit.run.warmkernels): the heavy ones its runtime loads, and only those that
    # read nothing when they load which the runtime itself sets in the kernel's environment before importing them.
    warm_imports: tuple[str, ...] = ()
    # "module:function": ``function(options) -> tuple[str, ...]``, modules beyond ``warm_imports`` a warm process
    # imports for a case with ``options`` (those it may import only on some hosts, or under some options); "" for none.
    warm_imports_of: str = ""
    # "module:function": ``function(request) -> dict``, the case options `golden make` opens the runtime with
    # (its ``open_backend``), from the command line's (kit.goldens.make.request); empty: the runtime's defaults.
    golden_options: str = ""
    # "module:function": ``function(provenance, options) -> list[str]``, the `golden make` flags beyond the
    # common ones that repeat how a golden of this backend was made (for a case's ``options``, where given).
    golden_flags: str = ""
    # `parity-kit localize`: the module that reads the residual stream (kit.case.localize says what it must
    # provide; in a kernel of its own, through a request file); empty: its cases cannot be localized.
    activations: str = ""
    # "module:function": ``function(options) -> dict``, where a case runs in the reference's words (``device``,
    # ``threads``): localize runs the float32 reference there.
    placement: str = "kit.backends.base:placement"
    # A refresh builds this engine from its fork when a release pins several backends and none is named.
    forked: bool = False

    def open(self, spec) -> "Backend":
        """The backend a case runs on, opened by its runtime module's ``open_backend``, imported only now (in
        the case's kernel), so that naming a backend never imports its engine."""
        import importlib

        return importlib.import_module(self.runtime).open_backend(spec)

    def environment(self, options: dict) -> dict[str, str]:
        """What a case kernel of this backend with ``options`` must start with (see ``kernel_env``)."""
        return dict(_call(self.kernel_env, dict(options))) if self.kernel_env else {}

    def imports(self, options: dict) -> tuple[str, ...]:
        """What a warm process imports for a case kernel of this backend with ``options``: ``warm_imports``, then
        what ``warm_imports_of`` adds for them."""
        more = tuple(str(m) for m in _call(self.warm_imports_of, dict(options))) if self.warm_imports_of else ()
        return (*self.warm_imports, *more)

    def runtime_key(self, options: dict) -> str:
        """This host's runtime key for a case of this backend with ``options`` (see ``exact_runtime``)."""
        return str(_call(self.exact_runtime, dict(options)))

    def legacy_runtime_key(self, provenance: dict) -> str | None:
        """The runtime key an exact golden of this backend that records none holds on (see ``legacy_runtime``)."""
        if not self.legacy_runtime:
            return None
        key = _call(self.legacy_runtime, dict(provenance))
        return None if key is None else str(key)

    def golden_case_options(self, request: dict) -> dict:
        """The case options `golden make` opens this backend with; a backend that makes no goldens is refused
        (a golden filed under its name must be its own engine's)."""
        if not self.makes_goldens:
            raise BadInput(f"backend {self.name} makes no goldens")
        return dict(_call(self.golden_options, dict(request))) if self.golden_options else {}

    def remake_flags(self, provenance: dict, options: dict | None = None) -> list[str]:
        """The flags of this backend's own that `golden make` needs to make a golden like ``provenance``'s."""
        return [str(a) for a in _call(self.golden_flags, provenance, options)] if self.golden_flags else []

    def where(self, options: dict) -> dict:
        """Where a case of this backend with ``options`` runs, in the reference's words (see ``placement``)."""
        return dict(_call(self.placement, dict(options)))
