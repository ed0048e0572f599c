"""Fixtures for both tiers, and the markers each test gets from where it lives."""

from __future__ import annotations

from collections import defaultdict

import pytest

from kit.core.host.runtime import HOST_CLASS_ENV
from support import Embedded, load_embedded
from support.hostclass import HostClass, host_classes

# Markers by folder and file: `-m "not e2e"` is the unit tier; the engine markers let a machine
# without an engine's environment leave its tests out knowingly.
_MODULE_MARKERS = {
    "test_levanter.py": ("levanter",), "test_vllm_backend.py": ("vllm",), "test_vllm_decode.py": ("vllm",),
    "test_calibrate_vllm.py": ("vllm",),
    "test_ray_executor.py": ("ray",), "test_ray_cluster.py": ("ray",),
    "test_audit.py": ("browser",), "test_gpu_model_script.py": ("gpu",),
}


# The longest modules first, so that xdist's one-module-at-a-time workers (`--dist loadfile`) do not end on a
# long module while the other worker idles: longest-first is what keeps two workers' ends close. The order is
# the modules' summed test time on a 2-core machine (docs/figures.md); a module left out runs after these, in
# collection order (stable sort). The two modules that use the session's one embedded gate run
# (support.shared) are apart, so that one worker does not wait on the other's lock at the start. `make test`
# passes --no-loadscope-reorder: otherwise pytest-xdist sends the modules with the most tests first.
LONGEST_FIRST = ("test_ray_executor.py", "test_ray_cluster.py", "test_catalogue.py", "test_refresh.py",
                 "test_golden_regen.py", "test_control.py", "test_bisect.py", "test_clean_runs.py", "test_gate_e2e.py",
                 "test_notebooks.py",
                 "test_make.py", "test_levanter.py", "test_vllm_backend.py", "test_calibrate.py", "test_localize.py",
                 "test_resume_lock.py", "test_audit.py", "test_wheel.py")


def pytest_generate_tests(metafunc):
    # A test whose outcome follows the host's class of CPU runs as every class the repository holds records for,
    # and as one it holds none for (support.hostclass): found when collected, so a new class needs no edit here.
    if "host_class" in metafunc.fixturenames:
        metafunc.parametrize("host_class", host_classes(), indirect=True, ids=str)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)) if "e2e" in item.path.parts else len(rank))
    for item in items:
        parts = item.path.parts
        if "e2e" in parts:
            item.add_marker(pytest.mark.e2e)
        if "unit" in parts:
            item.add_marker(pytest.mark.unit)
        for name in _MODULE_MARKERS.get(item.path.name, ()):
            item.add_marker(getattr(pytest.mark, name))


# Where the suite's time goes, printed at its end by every run (CI's included), so that a slow module is seen
# where it appears rather than found by a profiling run of its own: each module's summed set-up, call and
# tear-down seconds. Under xdist the reports reach the controlling process, which prints the table.
_MODULE_SECONDS: defaultdict[str, float] = defaultdict(float)
SLOWEST_SHOWN = 15


def pytest_runtest_logreport(report):
    _MODULE_SECONDS[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    if not _MODULE_SECONDS:
        return
    terminalreporter.section(f"the {SLOWEST_SHOWN} slowest modules (seconds, set-up, call and tear-down summed)")
    ranked = sorted(_MODULE_SECONDS.items(), key=lambda kv: -kv[1])
    for module, seconds in ranked[:SLOWEST_SHOWN]:
        terminalreporter.write_line(f"{seconds:8.1f}  {module}")
    terminalreporter.write_line(f"{sum(_MODULE_SECONDS.values()):8.1f}  all {len(_MODULE_SECONDS)} modules")


@pytest.fixture(scope="session")
def embedded() -> Embedded:
    return load_embedded()


@pytest.fixture
def host_class(request, monkeypatch) -> HostClass:
    """This test's host as one class of CPU (kit.core.host.runtime.host_cpu), for the kit in this process and
    every command it starts; a test asking for it runs once per class (``pytest_generate_tests``)."""
    monkeypatch.setenv(HOST_CLASS_ENV, request.param.value)
    return request.param
