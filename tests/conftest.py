"""Fixtures for both tiers, and the markers each test gets from where it lives."""

from __future__ import annotations

import pytest

from support import Embedded, load_embedded

# Markers by folder and file: `-m "not e2e"` is the unit tier; the engine markers let a machine
# without an engine's environment leave its tests out knowingly.
_MODULE_MARKERS = {
    "test_levanter.py": ("levanter",), "test_vllm_backend.py": ("vllm",), "test_vllm_decode.py": ("vllm",),
    "test_ray_executor.py": ("ray",),
    "test_audit.py": ("browser",), "test_gpu_model_script.py": ("gpu",),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = item.path.parts
        if "e2e" in parts:
            item.add_marker(pytest.mark.e2e)
        if "unit" in parts:
            item.add_marker(pytest.mark.unit)
        for name in _MODULE_MARKERS.get(item.path.name, ()):
            item.add_marker(getattr(pytest.mark, name))


@pytest.fixture(scope="session")
def embedded() -> Embedded:
    return load_embedded()
