"""vLLM, the engine whose releases the gate qualifies: offline (`vllm.LLM`) or its OpenAI server.

The backend's runtime (its ``BackendInfo.runtime``): it opens the mode a case's settings choose
(kit.backends.vllm.engine resolves them), each mode in a module of its own, imported only when chosen.
"""

from __future__ import annotations

from kit.backends.vllm.engine import Mode, engine_settings
from kit.core.records.spec import CaseSpec


def open_backend(spec: CaseSpec):
    """The backend a case runs on: vLLM's OpenAI server where its settings say ``server``, else the offline
    engine; a mode's module (and vLLM with it) is imported only when that mode is opened."""
    settings = engine_settings(spec)
    if settings.mode == Mode.SERVER:
        from kit.backends.vllm.server import VllmServerBackend

        return VllmServerBackend(spec, settings)
    from kit.backends.vllm.offline import VllmOfflineBackend

    return VllmOfflineBackend(spec, settings)
