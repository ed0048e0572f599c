"""Goldens are never overwritten, through the real `golden make`: it runs the model before it writes, so this
lives in the e2e tier (the unit tier imports no engine)."""

from __future__ import annotations

from support import parity_kit


def test_golden_make_never_writes_over_an_existing_golden(embedded):
    sem = embedded.goldens["semantic"]
    before = sem.read_bytes()
    proc = parity_kit("golden", "make", "--model", embedded.model, "--fixture", embedded.fixture,
                      "--kind", "semantic", "--out", sem.parent)
    assert proc.returncode == 3
    assert f"golden {sem} exists; goldens are never overwritten" in proc.stderr
    assert sem.read_bytes() == before
