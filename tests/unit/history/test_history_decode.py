"""A decode case's worst step against its own bound is a series of the history's own: read from each run, tabled
as "<case> decode", and flagged when a step's error climbs toward its bound while every run still passes."""

from __future__ import annotations

import pytest

from kit.history.command import gather, markdown
from kit.history.rows import Check, read_location
from kit.core.records.store import open_store
from support.history import STEP_BOUNDS, decode_series

pytestmark = pytest.mark.unit

# Run-to-run noise of a step's error, a fifth of the first token's JITTER in tests/unit/history/test_history.py.
JITTER = [0.00004, -0.00002, 0.0, 0.00002, -0.00004, 0.00002, -0.00002, 0.00004, 0.0, -0.00004]


def test_a_decode_case_reads_into_a_row_of_its_worst_step_per_bucket(tmp_path):
    decode_series(tmp_path, [0.005])
    [run] = [p.name for p in tmp_path.iterdir()]
    read = read_location(open_store(str(tmp_path)), run)
    rows = {(b.check, b.bucket): b for b in read.buckets}
    # bucket 256 continued nothing
    assert set(rows) == {(Check.FIRST_TOKEN, 128), (Check.FIRST_TOKEN, 256), (Check.DECODE, 128)}
    step = rows[(Check.DECODE, 128)]
    # Step 3's 0.005 under its own 0.006 is the worst, not step 1's 0.004 under 0.02.
    assert (step.max_error, step.bound, step.prompts) == (0.005, STEP_BOUNDS["3"], 2)
    assert step.ratio == pytest.approx(0.005 / 0.006) and step.margin == pytest.approx(0.001)
    assert step.mean_error is None


def test_a_step_creeping_toward_its_bound_is_flagged_in_the_decode_series(tmp_path):
    # Ten runs with step 3 near 0.0025 of its 0.006, then four near 0.0045: every run passes, the step moved.
    step_3 = [0.0025 + j for j in JITTER] + [0.0045 + j for j in JITTER[:4]]
    runs = decode_series(tmp_path, step_3)
    found = gather(str(tmp_path))
    rows = {(r.series, r.bucket): r for r in found.margins}
    creeping = rows[("hf-bf16-decode decode", 128)]
    assert creeping.check == Check.DECODE and creeping.runs == 14
    assert creeping.flag is not None
    assert creeping.flag.startswith("worst decode step's error / bound stepped up from 0.4")
    assert creeping.step_run == runs[10].name
    assert creeping.max_error == pytest.approx(step_3[-1]) and creeping.bound == STEP_BOUNDS["3"]
    assert rows[("hf-bf16-decode", 128)].flag is None  # the first token did not move
    text = markdown(found)
    assert "| hf-bf16-decode decode | 128 | 14 |" in text and "worst decode step's error / bound stepped up" in text
    assert {(r["case"], r["check"], r["bucket"]) for r in found.to_dict()["shrinking"]} >= {
        ("hf-bf16-decode", Check.DECODE, 128)}


def test_the_history_notebook_plots_the_decode_series_apart_with_its_step_marked(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from kit.views import history as view

    step_3 = [0.0025 + j for j in JITTER] + [0.0045 + j for j in JITTER[:4]]
    decode_series(tmp_path, step_3)
    found = gather(str(tmp_path))
    data = view.load(found.index, found.selection)
    assert set(view.margin_table(data["margins"]).index) >= {("hf-bf16-decode decode", 128),
                                                                 ("hf-bf16-decode", 128)}
    steps = {r.bucket: r.step_run for r in data["margins"] if r.check == Check.DECODE and r.step_run}
    fig = view.case_plot(data["series"], "hf-bf16-decode", data["changes"], steps, Check.DECODE)
    [ax] = fig.axes
    assert ax.get_title() == "hf-bf16-decode decode, bucket 128"  # the one bucket continued
    assert "error stepped up" in ax.get_legend_handles_labels()[1]
