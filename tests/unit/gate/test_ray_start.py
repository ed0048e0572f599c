"""A Ray that does not start is no fact about the engine: a run tries it again, then says in one line that it
cannot run (exit 2, as an incomplete run), never a traceback and never a parity verdict."""

from __future__ import annotations

import ray

from kit.cli import main
from kit.core.errors import Unrunnable
from kit.core.exitcodes import ExitCode
from kit.gate.executors import ray_executor

SLOW_NODE = ("The current node timed out during startup. This could happen because some of the raylet failed to "
             "startup or the GCS has become overloaded.")


def fake_ray(monkeypatch, fails: int) -> list[dict]:
    """ray.init failing ``fails`` times as a node that did not come up does, then succeeding; the calls."""
    calls: list[dict] = []

    def init(**options):
        calls.append(options)
        if len(calls) <= fails:
            raise Exception(SLOW_NODE)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    monkeypatch.setattr(ray_executor, "_reap", lambda temp: None)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return calls


def test_a_ray_that_misses_its_startup_wait_is_started_again(monkeypatch, caplog):
    calls = fake_ray(monkeypatch, fails=ray_executor.RAY_STARTS - 1)
    with ray_executor.ray_session(2) as where:
        assert where.startswith("a Ray started for this run")
    assert len(calls) == ray_executor.RAY_STARTS and all(c["num_cpus"] == 2 for c in calls)
    assert "a Ray for this run did not start in time (try 1 of 3); starting it again" in caplog.text


def test_a_ray_that_never_starts_is_unrunnable(monkeypatch):
    fake_ray(monkeypatch, fails=ray_executor.RAY_STARTS)
    try:
        with ray_executor.ray_session(2):
            raise AssertionError("the session must not start")
    except Unrunnable as exc:
        assert str(exc).startswith("a Ray for this run did not start, 3 times within Ray's own startup wait: "
                                   "The current node timed out during startup.")


def test_any_other_ray_failure_is_not_hidden(monkeypatch):
    def init(**options):
        raise ValueError("a bad option")

    fake_ray(monkeypatch, fails=0)
    monkeypatch.setattr(ray, "init", init)
    try:
        with ray_executor.ray_session(2):
            pass
    except ValueError as exc:
        assert str(exc) == "a bad option"
    else:
        raise AssertionError("a Ray that refused its options must raise")


def test_the_gate_says_it_cannot_run_in_one_line(monkeypatch, tmp_path, capsys):
    fake_ray(monkeypatch, fails=ray_executor.RAY_STARTS)
    code = main(["gate", "--executor", "ray", "--case", "hf-bf16", "--out", str(tmp_path / "run"), "--no-summary"])
    err = capsys.readouterr().err
    assert code == ExitCode.INCOMPLETE
    line = next(x for x in err.splitlines() if x.startswith("parity-kit: "))
    assert line.startswith("parity-kit: cannot run: a Ray for this run did not start, 3 times")
    assert "Traceback" not in err
