"""The public API: what a backend plugin (or a script around the kit) imports, from here and nowhere else.

The kit's own modules move as the kit grows (``Observation`` moved from ``kit.core.records`` into
``kit.core.records.records`` once, and every plugin importing it from the old place broke). The names below do not:
a plugin written against this module keeps working across such moves, and a name that has to change stays importable
here for a release, with a ``DeprecationWarning`` naming its new name (``MOVED``). Everything else in ``kit`` is
internal.

A backend plugin is a package with a :class:`BackendInfo` registered under the ``parity_kit.backends`` entry-point
group (docs/layout.md, "Adding a backend"): its runtime module's ``open_backend(spec: CaseSpec)`` returns a
:class:`Backend` whose ``observe`` answers :class:`Observation` records (and, for a :class:`DecodingBackend`,
``decode`` answers :class:`Continuation` records); its options schema subclasses :class:`BackendOptions`. The
runtime runs inside a case kernel, which may be an environment of its own (Levanter's holds pydantic 1), so this
module imports nothing beyond the standard library and numpy when it loads: ``BackendOptions`` (pydantic 2, read by
the descriptor only, never in a kernel) is imported when first asked for.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from kit.backends.base import Backend, BackendInfo, DecodingBackend, can_decode
from kit.core.errors import (BadInput, EngineDidNotStart, EngineFault, EngineStoppedAnswering, NoBaselineHere,
                             ParityKitError)
from kit.core.records.fixture import Prompt
from kit.core.records.records import CaseResult, Continuation, Observation
from kit.core.records.spec import CaseSpec

if TYPE_CHECKING:  # imported on first use at run time (see the module)
    from kit.backends.options import BackendOptions

__all__ = ["Backend", "BackendInfo", "BackendOptions", "DecodingBackend", "can_decode", "Prompt", "CaseSpec",
           "Observation", "Continuation", "CaseResult", "ParityKitError", "BadInput", "NoBaselineHere", "EngineFault",
           "EngineDidNotStart", "EngineStoppedAnswering"]

# Imported on first use: (module, name).
_LAZY = {"BackendOptions": ("kit.backends.options", "BackendOptions")}

# A public name that changed: old name -> (new name, the release it goes in). Empty while nothing has.
MOVED: dict[str, tuple[str, str]] = {}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    if name in MOVED:
        new, until = MOVED[name]
        warnings.warn(f"kit.api.{name} is now kit.api.{new}; the old name goes in parity-kit {until}",
                      DeprecationWarning, stacklevel=2)
        return __getattr__(new) if new in _LAZY else globals()[new]
    raise AttributeError(f"module 'kit.api' has no attribute {name!r}")
