"""The one list of backends: everything registered under the ``parity_kit.backends`` entry points.

The built-in backends register themselves in pyproject.toml exactly as a third-party package
would, so adding a backend is one subpackage, one entry point and (at most) one notebook. Each
entry point names a :class:`~kit.backends.base.BackendInfo`; loading one imports only its small
``__init__``, never its engine.
"""

from __future__ import annotations

import functools
import re
from importlib import metadata
from typing import TYPE_CHECKING, Iterable, Sequence

from kit.backends.base import Backend, BackendInfo
from kit.core.errors import BadInput
from kit.core.records.spec import CaseSpec

if TYPE_CHECKING:
    from kit.core.baselines.golden import Golden

GROUP = "parity_kit.backends"
# The reference: the backend whose float32 results the semantic goldens are (`golden make`'s default), and
# its settings when localize reads every case's residual stream against it.
REFERENCE = "hf"
REFERENCE_OPTIONS = {"dtype": "float32", "attn_implementation": "sdpa"}


@functools.cache
def registry() -> dict[str, BackendInfo]:
    """Every backend registered under the ``parity_kit.backends`` entry points, by name, loaded once; a plugin
    that fails to import or registers a name twice is refused in one line."""
    found: dict[str, BackendInfo] = {}
    for ep in _unique_names(metadata.entry_points(group=GROUP)):
        try:
            info = ep.load()
        except Exception as exc:  # a plugin's import error is its own; name it, with the error
            raise BadInput(f"backend plugin {ep.name!r} ({ep.value}) failed to import: "
                           f"{type(exc).__name__}: {exc}") from None
        if not isinstance(info, BackendInfo) or info.name != ep.name:
            raise BadInput(f"backend plugin {ep.name!r} ({ep.value}) is not a BackendInfo named {ep.name!r}")
        found[ep.name] = info
    if not found:
        raise BadInput(f"no backends are registered (entry-point group {GROUP}): parity-kit is not installed "
                       "as a distribution; install it with pip (`pip install -e .` in a checkout)")
    return found


def _unique_names(eps: Iterable[metadata.EntryPoint]) -> list[metadata.EntryPoint]:
    """One entry point per backend name, sorted by name. The same distribution seen twice on the path (an
    editable install beside a wheel) counts once; two distributions registering one name are refused,
    naming both: whichever the path lists first would otherwise silently take the name (a plugin
    replacing the built-in `hf`), and the gate would judge another engine under the name it reports."""
    first: dict[str, metadata.EntryPoint] = {}
    for ep in sorted(eps, key=lambda e: e.name):
        seen = first.setdefault(ep.name, ep)
        if seen is not ep and _distribution(seen) != _distribution(ep):
            both = sorted((seen, ep), key=_distribution)
            raise BadInput(f"backend {ep.name!r} is registered by two distributions: {_described(both[0])} and "
                           f"{_described(both[1])}; uninstall one (a plugin takes a name of its own)")
    return list(first.values())


def _distribution(ep: metadata.EntryPoint) -> str:
    """The normalized name of the distribution that registers ``ep`` (PEP 503), or its target where unknown."""
    name = ep.dist.name if ep.dist is not None else ""
    return re.sub(r"[-_.]+", "-", name).lower() if name else f"({ep.value})"


def _described(ep: metadata.EntryPoint) -> str:
    dist = ep.dist
    who = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
    return f"{who} ({ep.value})"


def names() -> list[str]:
    """The registered backends' names, in registration order: the descriptor's choices."""
    return list(registry())


def get(name: str) -> BackendInfo:
    """The backend registered as ``name``; an unknown name is refused in one line naming those registered."""
    known = registry()
    if name not in known:
        raise BadInput(f"unknown backend {name!r} (registered: {', '.join(known)})")
    return known[name]


def missing_requirements(info: BackendInfo) -> list[str]:
    """The modules this environment lacks to run ``info``'s cases in its main kernel."""
    import importlib.util

    return [m for m in info.requires if importlib.util.find_spec(m) is None]


def golden_makers() -> list[str]:
    """The backends `golden make` can run: those whose BackendInfo says how to open them for a golden."""
    return [name for name, info in registry().items() if info.makes_goldens]


def localizable() -> list[str]:
    """The backends whose per-layer activations `localize` can read (a ``BackendInfo.activations`` module), in the
    registry's order: what localize refuses a case on another backend with, and what its --help lists."""
    return [name for name, info in registry().items() if info.activations]


def open_backend(spec: CaseSpec) -> Backend:
    """The backend a case runs on, opened through its registered BackendInfo in the case's kernel."""
    return get(spec.backend).open(spec)


def legacy_runtime(provenance: dict) -> str | None:
    """The runtime key of an exact golden made before goldens recorded one, where its record says enough: what its
    backend's ``legacy_runtime`` hook recovers; None for a golden that names no backend installed here, or one
    without the hook (an XLA golden's features were never written down)."""
    name = provenance.get("backend")
    info = registry().get(name) if isinstance(name, str) else None
    return info.legacy_runtime_key(provenance) if info is not None else None


def golden_runtime(provenance: dict) -> str | None:
    """The runtime key an exact golden holds on: the one it records, else what its record implies."""
    return provenance.get("runtime") or legacy_runtime(provenance)


def choose_for_runtime(goldens: Sequence[Golden], runtime: str) -> Golden | None:
    """The golden made on ``runtime``, else None (kit.core.baselines.golden.choose_for_runtime, with each golden's
    runtime as its backend reads it)."""
    from kit.core.baselines.golden import choose_for_runtime as choose

    return choose(goldens, runtime, golden_runtime)


def duplicate_runtime(goldens: Sequence[Golden]) -> tuple[Golden, Golden] | None:
    """Two goldens of one list made on one runtime (kit.core.baselines.golden.duplicate_runtime, with each golden's
    runtime as its backend reads it)."""
    from kit.core.baselines.golden import duplicate_runtime as duplicate

    return duplicate(goldens, golden_runtime)


def remake_command(golden, model: str, fixture: str, out: str, options: dict | None = None) -> str:
    """The `parity-kit golden make` line that makes a golden like ``golden`` on the host that runs it, with
    the flags its backend says repeat how it was made (for the case ``options`` that decide its runtime,
    where given). A golden of a backend no longer installed gets the common flags alone."""
    from kit.core.baselines.golden import remake_command as command_line

    name = str(golden.provenance.get("backend", REFERENCE))  # goldens of old recorded no backend: the reference's
    info = registry().get(name)
    flags = info.remake_flags(golden.provenance, options) if info is not None else []
    return command_line(golden, model, fixture, out, flags, None if name == REFERENCE else name)


def backend_rows(infos: Iterable[BackendInfo] | None = None) -> list[dict]:
    """One row per backend, for `parity-kit backends`."""
    return [{"name": i.name, "summary": i.summary, "kernel": i.kernel, "notebook": i.notebook,
             "makes_goldens": i.makes_goldens, "installed": not missing_requirements(i), "install": i.install}
            for i in (infos or registry().values())]
