"""The unit tier imports no engine, and the guard that holds it to that (support/engines.py) can fail.

The guard runs with every unit test; here it is shown failing on planted tests, each importing a stand-in
engine (an empty package named like one, so the proof needs no engine installed) in one of the ways a test
can: when its module is collected, in its body, in a fixture of wider scope, and in a Python it starts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from support import ROOT
from support.engines import ENGINES, noted, unwatched_env, watched_env

PLANTED = {
    "conftest.py": ("from support.engines import (pytest_make_collect_report, pytest_runtest_setup,  # noqa: F401\n"
                    "                             pytest_runtest_teardown)\n"),
    "test_collected.py": "import jax\n\n\ndef test_nothing():\n    pass\n",
    "test_body.py": "def test_imports_torch():\n    import torch  # noqa: F401\n",
    "test_fixture.py": ("import pytest\n\n\n@pytest.fixture(scope='module')\ndef engine():\n"
                        "    import levanter\n    return levanter\n\n\ndef test_uses_it(engine):\n    pass\n"),
    "test_subprocess.py": ("import subprocess, sys\n\n\ndef test_starts_one():\n"
                           "    subprocess.run([sys.executable, '-c', 'import vllm'], check=True)\n"),
    "test_clean.py": ("import importlib.util, subprocess, sys\n\n\ndef test_only_asks_and_starts_a_clean_python():\n"
                      "    assert importlib.util.find_spec('transformers') is not None  # a lookup is no import\n"
                      "    subprocess.run([sys.executable, '-c', 'import json'], check=True)\n"),
}


def planted_run(tmp_path: Path) -> dict[str, str]:
    """Runs the planted tests under the guard; returns each test's (or module's) failure or error message,
    by its name, from the run's JUnit report ("" for one that passed)."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for name, text in PLANTED.items():
        (tests / name).write_text(text)
    stand_ins = tmp_path / "engines"
    for engine in ENGINES:
        (stand_ins / engine).mkdir(parents=True)
        (stand_ins / engine / "__init__.py").write_text("")
    # The planted tests are meant to import engines: this test's own watch stays out of their processes.
    env = unwatched_env()
    env["PYTHONPATH"] = os.pathsep.join([str(stand_ins), str(ROOT / "tests"), str(ROOT)])
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the planted run needs none of the installed plugins
    junit = tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-p", "no:cacheprovider", "-q",
                           "--continue-on-collection-errors", "--junitxml", str(junit), "--rootdir", str(tmp_path),
                           "-c", os.devnull, "--import-mode=importlib"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and junit.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    said: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name") or case.get("classname", "")
        bad = [e.get("message", "") + (e.text or "") for e in case if e.tag in ("error", "failure")]
        said[name] = said.get(name, "") + " ".join(bad)
    return said


def test_a_unit_test_that_imports_an_engine_fails_naming_it_and_a_clean_one_passes(tmp_path):
    said = planted_run(tmp_path)
    collected = next(text for name, text in said.items() if "test_collected" in name)
    assert re.search(r"test_collected\.py imports jax when collected: the unit tier imports no engine", collected)
    assert "imported torch itself: the unit tier imports no engine" in said["test_imports_torch"]
    assert "imported levanter itself" in said["test_uses_it"]  # in a module-scoped fixture
    assert "started a Python that imported vllm (-c)" in said["test_starts_one"]
    assert said["test_only_asks_and_starts_a_clean_python"] == ""


def test_the_unit_tier_imports_no_engine_when_collected(tmp_path):
    """Every unit test module, its conftest and the support package, collected in a fresh Python under the
    watch: no engine is imported. (What the tests' bodies import the guard checks as they run.)"""
    log = tmp_path / "imports.log"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "tests" / "unit"), "--collect-only", "-q",
                           "-p", "no:cacheprovider"], cwd=ROOT, env=watched_env(log, unwatched_env()),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"^\d+ tests collected", proc.stdout, re.M), proc.stdout[-2000:]
    assert noted(log) == []
