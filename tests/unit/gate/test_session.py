"""The gate session (kit.gate.session.GateSession): one lifecycle for every command that runs a gate. It claims
and locks each run's directory and writes its manifest's start; it releases every lock however it is left; an
interruption (Ctrl-C or a signal turned into ``Stopped``) writes each unfinished run's interrupted finish; an
error leaves the runs as they are; several runs execute side by side. No kernels: the case execution is faked."""

from __future__ import annotations

import dataclasses
import json
import signal

import pytest

from kit.core.errors import BadInput
from kit.descriptor.load import load_descriptor
from kit.gate.executor import RunRequest
from kit.gate.session import GateSession, gate_once
from kit.run import runlock
from kit.run.stopping import Stopped
from support import cases_pass_without_kernels, write_descriptor

COMMAND = ["parity-kit", "gate"]


@pytest.fixture
def desc(tmp_path, embedded, monkeypatch):
    cases_pass_without_kernels(monkeypatch)
    return load_descriptor(write_descriptor(tmp_path, embedded,
                                            cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]}))


def locked(run_dir) -> bool:
    """Whether another holder would be refused the run directory now."""
    try:
        runlock.acquire(run_dir).release()
    except BadInput:
        return True
    return False


def manifest(run_dir) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def test_start_claims_and_locks_the_run_directory_and_writes_the_manifests_start(tmp_path, desc):
    with GateSession(COMMAND, jobs=1) as session:
        run = session.start(RunRequest(desc, tmp_path / "run"))
        assert session.runs == [run] and run.run_dir == (tmp_path / "run").resolve()
        assert locked(run.run_dir)
        assert manifest(run.run_dir)["started_at"] and not (run.run_dir / "result.json").exists()
        session.execute()
        [finished] = session.finish(summary=False)
        assert session.unfinished == []
    assert not locked(run.run_dir) and finished.run_dir == run.run_dir
    run = finished
    assert run.verdict == "passed" and json.loads((run.run_dir / "result.json").read_text())["verdict"] == "passed"
    assert manifest(run.run_dir)["command"] == COMMAND


def test_a_run_is_frozen_and_the_finish_gives_a_new_one_with_what_running_added(tmp_path, desc):
    """A GateRun is a record: what the cases add is collected apart (RunProgress) and frozen into the run the
    finish returns; the run the start gave stays as it started."""
    with GateSession(COMMAND, jobs=1) as session:
        run = session.start(RunRequest(desc, tmp_path / "run"))
        with pytest.raises(dataclasses.FrozenInstanceError):
            run.finished_at = "2026-01-01T00:00:00+00:00"  # type: ignore[misc]
        session.execute()
        [finished] = session.finish(summary=False)
    assert finished is not run and finished.lock is run.lock and finished.started_at == run.started_at
    assert dict(run.results) == {} and run.finished_at == "" and run.verdict != "passed"
    assert set(finished.results) == {"hf-bf16"} and finished.finished_at and finished.verdict == "passed"
    with pytest.raises(TypeError):  # the finished results are read-only too, not only the field holding them
        finished.results["hf-bf16"] = finished.results["hf-bf16"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        finished.results = {}  # type: ignore[misc]


def test_an_error_releases_the_lock_and_leaves_the_run_unfinished(tmp_path, desc):
    with pytest.raises(RuntimeError, match="a bug"):
        with GateSession(COMMAND, jobs=1) as session:
            run = session.start(RunRequest(desc, tmp_path / "run"))
            session.execute()
            raise RuntimeError("a bug")
    assert not locked(run.run_dir)
    assert not (run.run_dir / "result.json").exists()  # an error is no interruption: nothing written for it


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), Stopped(signal.SIGTERM)], ids=["ctrl-c", "sigterm"])
def test_an_interruption_writes_the_interrupted_finish_and_releases_the_lock(tmp_path, desc, stop):
    with pytest.raises(KeyboardInterrupt):
        with GateSession(COMMAND, jobs=1) as session:
            run = session.start(RunRequest(desc, tmp_path / "run"))
            session.execute()
            raise stop
    assert not locked(run.run_dir)
    assert manifest(run.run_dir)["finished_at"]
    assert json.loads((run.run_dir / "result.json").read_text())["verdict"] == "passed"
    assert (run.run_dir / "evidence.md").is_file()
    assert not (run.run_dir / "summary.html").exists()  # a stopped run builds no summary: that starts a kernel


def test_an_interruption_before_any_case_ran_still_finishes_the_run(tmp_path, desc):
    with pytest.raises(KeyboardInterrupt):
        with GateSession(COMMAND, jobs=1) as session:
            run = session.start(RunRequest(desc, tmp_path / "run"))
            raise KeyboardInterrupt
    assert not locked(run.run_dir)
    assert manifest(run.run_dir)["finished_at"] and (run.run_dir / "result.json").is_file()
    assert run.verdict != "passed"  # no case ran


def test_an_interruption_rewrites_no_run_already_finished(tmp_path, desc):
    with pytest.raises(KeyboardInterrupt):
        with GateSession(COMMAND, jobs=1) as session:
            first = session.start(RunRequest(desc, tmp_path / "a"))
            session.execute()
            session.finish(summary=False)
            written = (first.run_dir / "result.json").read_text()
            second = session.start(RunRequest(desc, tmp_path / "b"))
            raise KeyboardInterrupt
    assert (first.run_dir / "result.json").read_text() == written
    assert (second.run_dir / "result.json").is_file()
    assert not locked(first.run_dir) and not locked(second.run_dir)


def test_a_refused_start_releases_the_runs_already_started(tmp_path, desc):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "stray").write_text("not a run")
    with pytest.raises(BadInput):
        with GateSession(COMMAND, jobs=1) as session:
            run = session.start(RunRequest(desc, tmp_path / "run"))
            session.start(RunRequest(desc, tmp_path / "taken"))
    assert session.runs == [run] and not locked(run.run_dir)


def test_several_runs_execute_side_by_side_and_each_finishes(tmp_path, desc):
    with GateSession(COMMAND, jobs=2) as session:
        runs = [session.start(RunRequest(desc, tmp_path / side)) for side in ("current", "candidate")]
        assert all(locked(r.run_dir) for r in runs)
        session.execute()
        finished = session.finish(summary=False)
    assert [r.run_dir for r in finished] == [r.run_dir for r in runs]
    for run in finished:
        assert not locked(run.run_dir)
        assert run.verdict == "passed" and set(run.results) == {"hf-bf16"}
        assert json.loads((run.run_dir / "result.json").read_text())["verdict"] == "passed"


def test_gate_once_is_the_whole_lifecycle_of_one_run(tmp_path, desc):
    run = gate_once(RunRequest(desc, tmp_path / "run"), COMMAND, jobs=1, summary=False)
    assert run.verdict == "passed" and not locked(run.run_dir)
    assert manifest(run.run_dir)["finished_at"] and (run.run_dir / "evidence.md").is_file()


def test_signal_handlers_are_restored_when_the_session_is_left(tmp_path, desc):
    before = signal.getsignal(signal.SIGTERM)
    with GateSession(COMMAND, jobs=1) as session:
        assert signal.getsignal(signal.SIGTERM) is not before
        session.start(RunRequest(desc, tmp_path / "run"))
    assert signal.getsignal(signal.SIGTERM) is before
