"""The public API (kit.api): the one module a backend plugin imports. Every name it lists resolves; loading it imports
no pydantic (a plugin's runtime runs in kernels of other environments) until BackendOptions is asked for; a moved name
still resolves with a warning naming its new one; and the test plugin every plugin test installs imports nothing of
the kit but kit.api where it registers, sets its options and answers (its localize hook borrows the reference
backend's reader, which no plugin needs)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

import kit.api
from support import ECHO_PLUGIN, ROOT

pytestmark = pytest.mark.unit


def test_every_public_name_resolves_and_none_is_left_out_of_the_list():
    for name in kit.api.__all__:
        assert getattr(kit.api, name) is not None, name
    from kit.backends.options import BackendOptions
    from kit.core.records.records import Observation

    assert kit.api.BackendOptions is BackendOptions and kit.api.Observation is Observation
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        kit.api.Nothing  # noqa: B018


def test_loading_the_api_imports_no_pydantic_until_options_are_asked_for():
    probe = ("import sys, kit.api; print('pydantic' in sys.modules); kit.api.BackendOptions; "
             "print('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


def test_a_moved_name_still_resolves_with_a_warning_naming_the_new_one(monkeypatch):
    monkeypatch.setitem(kit.api.MOVED, "Observed", ("Observation", "0.3"))
    with pytest.warns(DeprecationWarning, match=r"kit\.api\.Observed is now kit\.api\.Observation; the old name goes "
                                                r"in parity-kit 0\.3"):
        assert kit.api.Observed is kit.api.Observation


@pytest.mark.parametrize("module", ["__init__.py", "options.py", "runtime.py"])
def test_the_test_plugin_imports_the_kit_only_through_its_public_api(module):
    tree = ast.parse(ECHO_PLUGIN[module])
    kit_imports = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                   and n.module.split(".")[0] == "kit"}
    kit_imports |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                    if a.name.split(".")[0] == "kit"}
    assert kit_imports == {"kit.api"}
