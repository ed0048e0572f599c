"""Backends turn (model, fixture cases) into observations.

Each backend is a module ``kit.backends.<name>`` with ``open_backend(spec)``;
modules are imported lazily because each one pulls in its own engine, which may
only exist in that backend's kernel.
"""

from __future__ import annotations

import importlib

from kit.backends.base import Backend
from kit.spec import CaseSpec

BACKENDS = ("hf", "levanter", "jax", "vllm")


def open_backend(spec: CaseSpec) -> Backend:
    if spec.backend not in BACKENDS:
        raise ValueError(f"case {spec.name}: unknown backend {spec.backend!r} (known: {', '.join(BACKENDS)})")
    module = importlib.import_module(f"kit.backends.{spec.backend}")
    return module.open_backend(spec)
