"""A make's step times add up over the calls that finish it: a step a call finished, one a call was stopped in
(Ctrl-C), and one a killed call left with only its heartbeat, each counted once, numbered by the call it ran in."""

from __future__ import annotations

import pytest

from kit.baselines import steps

pytestmark = pytest.mark.unit


def test_step_times_add_up_over_calls_a_stop_and_a_kill_included(tmp_path, monkeypatch):
    first = steps.StepClock(tmp_path, planned=2)
    assert first.call == 1
    with first.step("calibration", "hf-bf16", "calibration record of hf-bf16"):
        pass
    with pytest.raises(KeyboardInterrupt):  # stopped mid-step: its time is kept, unfinished
        with first.step("power", "hf-bf16", "power record of hf-bf16", estimate_s=120):
            raise KeyboardInterrupt
    assert not (tmp_path / steps.CURRENT).exists()

    # A third call's step killed outright (SIGKILL: no handler runs) leaves its last heartbeat behind.
    second = steps.StepClock(tmp_path, planned=2)
    assert second.call == 2
    second._beat("power", "hf-bf16", 42.0, 120)
    third = steps.StepClock(tmp_path, planned=2)  # the next call counts it, for the call it ran in
    assert not (tmp_path / steps.CURRENT).exists() and third.call == 3
    with third.step("power", "hf-bf16", "power record of hf-bf16", estimate_s=120):
        pass

    times = third.times()
    assert [(t.step, t.call, t.finished) for t in times] == [
        ("calibration", 1, True), ("power", 1, False), ("power", 2, False), ("power", 3, True)]
    assert times[2].wall_s == 42.0
    by = {t.step: t for t in steps.totals(times)}
    assert (by["power"].calls, by["power"].finished, by["power"].estimate_s) == (3, True, 120)
    assert by["power"].wall_s == round(sum(t.wall_s for t in times if t.step == "power"), 1)
    table = steps.steps_markdown(steps.totals(times), calls=3)
    assert table[0] == "| step | for | wall time | calls | estimate |"
    assert table[-1].startswith("| **total** | | **") and table[-1].endswith(" | 3 | |")
    assert "| power | hf-bf16 | 42 s | 3 | 2 min 00 s |" in table


def test_a_line_cut_short_by_a_kill_is_passed_over(tmp_path):
    (tmp_path / steps.STEPS).write_text('{"step": "calibration", "subject": "a", "wall_s": 3.0, "finished": true}\n'
                                        '{"step": "power", "subj')
    assert [t.step for t in steps.read_times(tmp_path)] == ["calibration"]


@pytest.mark.parametrize("seconds, text", [(4.4, "4 s"), (190, "3 min 10 s"), (3900, "1 h 05 min")])
def test_durations_read_as_a_person_reads_them(seconds, text):
    assert steps.duration_text(seconds) == text
