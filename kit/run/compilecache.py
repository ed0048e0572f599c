"""Compilation caches that outlive a case's kernel, shared by every case and every run on the machine.

Each case runs in a fresh kernel, so an engine's in-memory compile cache dies with it: on the GPU gate the
jax float32 case spent most of its minute compiling one program per bucket, again in every run. XLA (for
jax) can keep its compiled programs on disk, keyed by the program, the compiler options and the device,
so a cached program is the very program a fresh compile would give and the numerics cannot change.
torch's inductor already keeps its caches on disk by default. A variable the user set is never replaced.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping

CACHE_ENV = "PARITY_KIT_COMPILE_CACHE"  # where the kit keeps compiled programs; "off" keeps none
JAX_CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"
# XLA caches only programs that took at least this long to compile (jax's default is 1 s); the gate's
# small CPU programs compile faster than that, the GPU ones for a 32K bucket take tens of seconds.
JAX_MIN_COMPILE_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


def cache_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where kernels keep their compiled programs: $PARITY_KIT_COMPILE_CACHE (``off``: nowhere), else the user's
    cache folder."""
    environ = os.environ if environ is None else environ
    chosen = environ.get(CACHE_ENV)
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    base = environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache" if Path.home().is_dir() else tempfile.gettempdir())
    return Path(base) / "parity-kit" / "compile"


def cache_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a case kernel gets so that its compiled programs persist (empty when caching is off)."""
    environ = os.environ if environ is None else environ
    root = cache_root(environ)
    if root is None or JAX_CACHE_ENV in environ:
        return {}
    return {JAX_CACHE_ENV: str(root / "jax"), JAX_MIN_COMPILE_ENV: environ.get(JAX_MIN_COMPILE_ENV, "1")}
