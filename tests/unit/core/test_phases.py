"""The phase timeline of a case: marks in order, exactly the phases marked (whatever their length), the executor's
frame."""

from __future__ import annotations

import time

from kit.core.records.phases import KERNEL_START, WRITE_OUT, PhaseClock, ordered, with_executor_phases


def test_each_mark_closes_the_phase_since_the_last_and_every_marked_phase_is_kept():
    clock = PhaseClock()
    time.sleep(0.02)
    clock.mark("model load")
    clock.mark("repeats")  # marked at once: it happened, however short
    time.sleep(0.01)
    clock.mark("bucket 128")
    assert list(clock.seconds) == ["model load", "repeats", "bucket 128"]
    assert clock.seconds["model load"] >= 0.02 and clock.seconds["bucket 128"] >= 0.01
    assert 0 <= clock.seconds["repeats"] < clock.seconds["model load"]


def test_a_phase_never_marked_is_absent_however_long_the_thread_was_away():
    # A preempted thread makes the time between two marks long; that alone never adds a phase.
    clock = PhaseClock()
    clock.mark("model load")
    time.sleep(0.02)
    clock.mark("bucket 128")
    assert list(clock.seconds) == ["model load", "bucket 128"]


def test_a_phase_marked_twice_adds_up_in_its_first_place():
    clock = PhaseClock()
    time.sleep(0.01)
    clock.mark("bucket 128")
    clock.mark("compare")
    time.sleep(0.01)
    clock.mark("bucket 128")
    assert list(clock.seconds) == ["bucket 128", "compare"] and clock.seconds["bucket 128"] >= 0.02


def test_the_executor_frames_the_kernels_phases_with_what_only_it_saw():
    framed = with_executor_phases({"model load": 2.0}, [100.0, 110.0], launched_epoch=95.5, done_epoch=113.0)
    assert framed == {KERNEL_START: 4.5, "model load": 2.0, WRITE_OUT: 3.0}
    assert with_executor_phases({"x": 1.0}, [], 0.0, 1.0) == {"x": 1.0}  # a result without a span: as it is


def test_phases_read_back_in_run_order_with_buckets_by_size():
    phases = {"compare": 0.1, "bucket 1024": 5.0, WRITE_OUT: 2.0, "bucket 128": 1.0, "inputs": 0.1,
              KERNEL_START: 9.0, "model load": 3.0, "custom": 0.5}
    assert [name for name, _ in ordered(phases)] == [KERNEL_START, "inputs", "model load", "bucket 128",
                                                     "bucket 1024", "compare", WRITE_OUT, "custom"]
