"""The unit tier imports no engine: what it must not import, and the guard tests/unit/conftest.py installs.

A unit test runs on any machine with the main package alone (`make test-unit`), so neither it nor anything it
starts may import an engine. The guard fails a unit test module that imports one when collected, a unit test
whose body (or fixtures) import one, and a unit test whose subprocess does (engine_watch/sitecustomize.py
notes imports in every Python started under it). In a session that ran e2e tests first, an engine those
imported is already loaded and a unit test's import of it goes unseen: the unit tier run on its own is the
check, as `make test-unit` runs it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

# Top-level packages: the engines and the libraries that are only there for them.
ENGINES = ("torch", "jax", "jaxlib", "vllm", "levanter", "haliax", "equinox", "transformers")
LOG_ENV, ENGINES_ENV = "PARITY_KIT_TEST_ENGINE_LOG", "PARITY_KIT_TEST_ENGINES"
WATCH = Path(__file__).resolve().parent / "engine_watch"  # its sitecustomize.py
MOVE = "the unit tier imports no engine: move the test to tests/e2e, or keep the engine out of it"


def loaded_engines() -> set[str]:
    return {name for name in ENGINES if name in sys.modules}


def watched_env(log: Path, environ=os.environ) -> dict[str, str]:
    """``environ`` with the watch on: every Python started with it notes its engine imports in ``log``."""
    path = os.pathsep.join(p for p in (str(WATCH), environ.get("PYTHONPATH", "")) if p)
    return {**environ, "PYTHONPATH": path, LOG_ENV: str(log), ENGINES_ENV: ",".join(ENGINES)}


def unwatched_env(environ=os.environ) -> dict[str, str]:
    """``environ`` without the watch: for a test that starts Pythons meant to import an engine (a planted one)."""
    path = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != WATCH]
    env = {k: v for k, v in environ.items() if k not in (LOG_ENV, ENGINES_ENV, "PYTHONPATH")}
    return {**env, "PYTHONPATH": os.pathsep.join(path)} if path else env


def noted(log: Path) -> list[str]:
    """The imports the watch noted, one line each: the engine, the process id, its command line."""
    return log.read_text().splitlines() if log.is_file() else []


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A unit test module that imports an engine when collected is a collection error naming it."""
    before = loaded_engines()
    report = yield
    new = loaded_engines() - before
    if new and isinstance(collector, pytest.Module):
        report.outcome = "failed"
        report.longrepr = f"{collector.path} imports {', '.join(sorted(new))} when collected: {MOVE}"
    return report


_WATCHED = pytest.StashKey[tuple]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """From before the test's fixtures are set up (those of wider scope too): the engines loaded so far, and the
    watch on for every Python started."""
    fd, name = tempfile.mkstemp(prefix="engine-imports-", suffix=".log")
    os.close(fd)
    log = Path(name)
    saved = {k: os.environ.get(k) for k in (LOG_ENV, ENGINES_ENV, "PYTHONPATH")}
    item.stash[_WATCHED] = (loaded_engines(), log, saved)
    os.environ.update(watched_env(log))
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the test's teardown: the test fails when it, its fixtures, or a Python it started imported an engine."""
    try:
        result = yield
    finally:
        before, log, saved = item.stash.get(_WATCHED, (loaded_engines(), None, {}))
        if _WATCHED in item.stash:
            del item.stash[_WATCHED]
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    new, started = loaded_engines() - before, noted(log) if log else []
    if log:
        log.unlink(missing_ok=True)
    if new or started:
        said = [f"imported {', '.join(sorted(new))} itself"] if new else []
        for line in started:
            engine, _, command = line.split("\t", 2)
            said.append(f"started a Python that imported {engine} ({command})")
        pytest.fail(f"{'; '.join(said)}: {MOVE}", pytrace=False)
    return result
