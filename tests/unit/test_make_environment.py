"""What make's commands start caches Python's bytecode in one folder of the checkout, also where the environment
switched writing it off: otherwise every kernel, engine and command compiled every module it imported again
(benchmarks/kernel_imports.py --bytecode; docs/figures.md)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from support import ROOT

pytestmark = pytest.mark.unit


def recipe_env(tmp_path, **env: str | None) -> dict[str, str]:
    """The environment a recipe of the Makefile runs with, under ``env`` (None: unset)."""
    probe = tmp_path / "probe.mk"
    probe.write_text(f"include {ROOT / 'Makefile'}\nprobe:\n\t@env\n")
    environ = {k: v for k, v in os.environ.items() if k not in env}
    environ.update({k: v for k, v in env.items() if v is not None})
    make = shutil.which("make")
    assert make, "the README's commands are make targets: make must be on the PATH"
    out = subprocess.run([make, "-s", "-C", str(ROOT), "-f", str(probe), "probe"], env=environ, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_bytecode_is_cached_in_the_checkout_even_where_writing_it_was_switched_off(tmp_path):
    seen = recipe_env(tmp_path, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=None)
    assert "PYTHONDONTWRITEBYTECODE" not in seen
    assert seen["PYTHONPYCACHEPREFIX"] == str(ROOT / ".cache" / "pycache")


def test_a_cache_folder_of_ones_own_is_kept(tmp_path):
    assert recipe_env(tmp_path, PYTHONPYCACHEPREFIX=str(tmp_path))["PYTHONPYCACHEPREFIX"] == str(tmp_path)
