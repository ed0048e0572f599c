"""The stale golden that the control and golden-regen modules both read."""

from __future__ import annotations

import pytest

from support.shared import stale_semantic_golden


@pytest.fixture(scope="module")
def stale_golden(tmp_path_factory, embedded):
    """A semantic golden made from an older build of the model: same fixture, other numbers."""
    goldens, proc = stale_semantic_golden(tmp_path_factory, embedded)
    assert proc.returncode == 0, proc.stderr
    return next(goldens.glob("*-semantic.json"))
