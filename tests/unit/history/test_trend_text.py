"""A trend the history cannot compute (a series of one run) reads "—" wherever the history shows trends, never
"+nan", and is null in its JSON."""

from __future__ import annotations

import json

import pytest

from kit.cli import main
from kit.core.exitcodes import ExitCode
from kit.history import queries
from kit.history.command import gather, markdown
from kit.views.history import margin_table
from support.history import series

pytestmark = pytest.mark.unit


def test_a_series_of_one_run_has_no_trend(tmp_path, capsys):
    series(tmp_path, [0.010])
    rows = gather(str(tmp_path)).margins
    assert rows and all(r.slope is None and r.p_value is None and r.trend == "—" for r in rows)
    text = markdown(gather(str(tmp_path)))
    assert "nan" not in text.lower()
    assert "| hf-bf16 | 128 | 1 |" in text and "| — |" in text
    table = margin_table(rows)
    assert set(table["trend per run"]) == {"—"} and set(table["trend p"]) == {"—"}
    assert main(["history", "--runs", str(tmp_path), "--json"]) == ExitCode.PASSED
    doc = json.loads(capsys.readouterr().out)  # NaN would be no JSON at all
    assert all(r["slope"] is None for r in doc["margins"])


def test_a_series_of_two_runs_has_a_signed_trend(tmp_path):
    series(tmp_path, [0.010, 0.012])
    text = markdown(gather(str(tmp_path)))
    assert "nan" not in text.lower()
    assert {r.trend[0] for r in gather(str(tmp_path)).margins} <= {"+", "-"}


@pytest.mark.parametrize("slope, n", [(float("nan"), 1), (None, 0), (float("inf"), 3), (0.5, 1)])
def test_a_slope_that_cannot_be_computed_is_none(slope, n):
    assert queries.fitted_slope(slope, n) is None


def test_a_fitted_slope_stays():
    assert queries.fitted_slope(-0.25, 2) == -0.25
