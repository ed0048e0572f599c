"""The unit tier's guard: no unit test, nor anything it starts, imports an engine (support/engines.py)."""

# Hooks are registered by their names in a conftest: these apply to the tests under this folder only.
from support.engines import (pytest_make_collect_report, pytest_runtest_setup,  # noqa: F401
                             pytest_runtest_teardown)
