"""The CI progress lines: heartbeat at its interval, each finished bucket relayed once, with a fake clock."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from kit.core.errors import BadInput
from kit.core.records.progress import BucketDone, ProgressWriter, progress_path
from kit.gate.heartbeat import HEARTBEAT_ENV, Heartbeat, heartbeat_interval
from kit.gate.session import ci_heartbeat
from kit.run import output


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def relay(verbose: bool = False):
    lines: list[str] = []
    clock = Clock()
    return Heartbeat(lines.append, interval=30, verbose=verbose, clock=clock), lines, clock


def test_heartbeat_names_each_running_case_and_how_long_it_runs(tmp_path):
    beat, lines, clock = relay()
    beat.start("hf-bf16", progress_path(tmp_path / "hf-bf16"))
    clock.now += 21
    beat.start("vllm-pp1", progress_path(tmp_path / "vllm-pp1"))
    beat.tick()
    assert lines == []  # not yet 30 s
    clock.now += 9
    beat.tick()
    assert lines == ["[  30s] running: hf-bf16 (30 s), vllm-pp1 (9 s)"]
    clock.now += 32
    beat.tick()
    assert lines[-1] == "[  62s] running: hf-bf16 (62 s), vllm-pp1 (41 s)"
    beat.finish("hf-bf16")
    beat.finish("vllm-pp1")
    clock.now += 60
    beat.tick()
    assert len(lines) == 2  # nothing runs: no beat


def test_finished_buckets_are_relayed_once_and_the_rest_at_finish(tmp_path):
    prefix = tmp_path / "hf-bf16"
    (tmp_path / "hf-bf16.progress.jsonl").write_text(BucketDone(128, 9, 9.0, 1, 1).to_line())  # an earlier attempt
    beat, lines, clock = relay()
    beat.start("hf-bf16", progress_path(prefix))
    kernel = ProgressWriter(str(prefix))
    kernel.bucket_done(BucketDone(128, 16, 3.14159, 1, 2))
    beat.tick()
    beat.tick()
    assert lines == ["hf-bf16: bucket 128 done (16 prompts, 3.1 s)"]
    with open(progress_path(prefix), "a") as f:  # a line the kernel is still writing waits
        f.write(BucketDone(256, 16, 2.0, 2, 2).to_line()[:10])
    beat.tick()
    assert len(lines) == 1
    with open(progress_path(prefix), "a") as f:
        f.write(BucketDone(256, 16, 2.0, 2, 2).to_line()[10:] + "not json\n")
    beat.finish("hf-bf16")
    assert lines == ["hf-bf16: bucket 128 done (16 prompts, 3.1 s)", "hf-bf16: bucket 256 done (16 prompts, 2.0 s)"]


def test_verbose_says_how_many_buckets(tmp_path):
    beat, lines, clock = relay(verbose=True)
    beat.start("control/hf-bf16", progress_path(tmp_path / "hf-bf16"))
    ProgressWriter(str(tmp_path / "hf-bf16")).bucket_done(BucketDone(512, 8, 12.25, 3, 4))
    clock.now += 30
    beat.tick()
    assert lines == ["started control/hf-bf16",
                     "control/hf-bf16: bucket 512 done (8 prompts, 12.2 s; 3 of 4 buckets)",
                     "[  30s] running: control/hf-bf16 (30 s, 3 of 4 buckets)"]


def test_the_writer_writes_nothing_outside_the_executor(tmp_path, monkeypatch):
    monkeypatch.delenv("PARITY_KIT_LOG_PREFIX", raising=False)
    writer = ProgressWriter()
    writer.bucket_done(BucketDone(128, 1, 0.1, 1, 1))
    assert writer.path is None
    monkeypatch.setenv("PARITY_KIT_LOG_PREFIX", str(tmp_path / "gone" / "case"))
    writer = ProgressWriter()
    writer.bucket_done(BucketDone(128, 1, 0.1, 1, 1))  # its folder is missing: progress never fails a case
    assert writer.path is None


def test_interval_from_the_environment(monkeypatch):
    monkeypatch.delenv(HEARTBEAT_ENV, raising=False)
    assert heartbeat_interval() == 30.0
    monkeypatch.setenv(HEARTBEAT_ENV, "0.5")
    assert heartbeat_interval() == 0.5
    monkeypatch.setenv(HEARTBEAT_ENV, "soon")
    with pytest.raises(BadInput, match=r"^\$PARITY_KIT_HEARTBEAT_S='soon': expected a number of seconds above 0$"):
        heartbeat_interval()


def test_heartbeat_only_where_no_terminal_shows_the_bar_and_never_under_quiet(monkeypatch):
    monkeypatch.setenv(HEARTBEAT_ENV, "7")
    output.setup(output.NORMAL)  # what the CLI sets without -q or -v
    piped = Console(file=io.StringIO(), force_terminal=False)
    beat = ci_heartbeat(piped)
    assert beat is not None and beat.interval == 7.0 and not beat.verbose
    assert ci_heartbeat(Console(file=io.StringIO(), force_terminal=True)) is None
    try:
        output.setup(output.QUIET)
        assert ci_heartbeat(piped) is None
        output.setup(output.VERBOSE)
        assert ci_heartbeat(piped).verbose
    finally:
        output.setup(output.NORMAL)
