"""A notebook's outcome carries its kind, decided from types where the failure arises (kit.run.notebook): the class
a cell raised, nbclient's DeadKernelError, the kit's own kill on a timeout or an interrupt, and a kernel process
killed by SIGKILL the kit did not send. papermill's execution is replaced here; no kernel starts."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import papermill as pm
import pytest
from nbclient.exceptions import DeadKernelError

from kit.core import outcomes
from kit.core.errors import EngineDidNotStart, EngineStoppedAnswering, kind_named
from kit.run import notebook


def cell_error(ename: str, evalue: str = "it failed") -> pm.PapermillExecutionError:
    return pm.PapermillExecutionError(3, 3, "run_case()", ename, evalue, [])


def run_with(monkeypatch, tmp_path, execute, timeout_s: float | None = None) -> notebook.NotebookOutcome:
    monkeypatch.setattr(pm, "execute_notebook", execute)
    return notebook.run_notebook(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {}, "python3", timeout_s,
                                 tmp_path / "kernel.log")


def raising(exc: BaseException):
    def execute(*_a, **_kw):
        raise exc
    return execute


def live_handle() -> notebook.KernelHandle:
    with notebook._live_lock:
        [handle] = notebook._live
    return handle


@pytest.mark.parametrize("ename, kind", [
    ("EngineDidNotStart", outcomes.Outcome.ENGINE_DID_NOT_START),
    ("EngineStoppedAnswering", outcomes.Outcome.ENGINE_STOPPED_ANSWERING),
    ("OutOfMemoryError", outcomes.Outcome.OUT_OF_MEMORY),
    ("MemoryError", outcomes.Outcome.OUT_OF_MEMORY),
    ("torch.OutOfMemoryError", outcomes.Outcome.OUT_OF_MEMORY),
    ("KeyError", outcomes.Outcome.CASE_ERROR),
    ("VllmServerError", outcomes.Outcome.CASE_ERROR),  # an answer of the wrong shape: the case's own
    ("BadInput", outcomes.Outcome.BAD_INPUT),  # the case refused its input: a record of another GPU, a missing file
])
def test_a_cell_error_has_the_kind_of_the_class_it_raised(monkeypatch, tmp_path, ename, kind):
    outcome = run_with(monkeypatch, tmp_path, raising(cell_error(ename, "Connection refused, out of memory")))
    assert outcome.kind == kind
    assert outcome.error == f"cell 3 raised {ename}: Connection refused, out of memory"


def test_the_typed_exceptions_are_found_by_their_class_name():
    for cls in (EngineDidNotStart, EngineStoppedAnswering):
        assert kind_named(cls.__name__) == cls.kind
        assert issubclass(cls, RuntimeError)
    assert kind_named(None) == kind_named("") == outcomes.Outcome.CASE_ERROR


def test_a_dead_kernel_is_kernel_died(monkeypatch, tmp_path):
    outcome = run_with(monkeypatch, tmp_path, raising(DeadKernelError("Kernel died")))
    assert (outcome.kind, outcome.error, outcome.killed_by) == (outcomes.Outcome.KERNEL_DIED,
                                                                "the kernel died mid-case", None)


def test_any_other_failure_is_a_case_error(monkeypatch, tmp_path):
    outcome = run_with(monkeypatch, tmp_path, raising(ValueError("kernel died, connection refused")))
    assert outcome.kind == outcomes.Outcome.CASE_ERROR


def test_the_kill_on_a_timeout_is_a_timeout(monkeypatch, tmp_path):
    def hangs(*_a, **_kw):
        time.sleep(0.5)  # the kit's timer kills the kernel meanwhile; the notebook then ends as a dead kernel
        raise DeadKernelError("Kernel died")

    outcome = run_with(monkeypatch, tmp_path, hangs, timeout_s=0.05)
    assert (outcome.killed_by, outcome.kind) == ("timeout", outcomes.Outcome.TIMEOUT)


def test_an_interrupt_is_interrupted(monkeypatch, tmp_path):
    def interrupted(*_a, **_kw):
        live_handle().kill("interrupt")  # as stop_all does from another thread
        raise DeadKernelError("Kernel died")

    outcome = run_with(monkeypatch, tmp_path, interrupted)
    assert (outcome.killed_by, outcome.kind) == ("interrupt", outcomes.Outcome.INTERRUPTED)


def test_a_stopped_run_starting_no_kernel_is_interrupted(tmp_path):
    notebook.stop_all()
    try:
        outcome = notebook.run_notebook(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {}, "python3", None,
                                        tmp_path / "kernel.log")
    finally:
        notebook.allow_starts()
    assert (outcome.started, outcome.kind) == (False, outcomes.Outcome.INTERRUPTED)


def ended(code: str) -> subprocess.Popen:
    """A process standing in for the kernel, ended as ``code`` ends it."""
    proc = subprocess.Popen([sys.executable, "-c", code])
    proc.wait()
    return proc


def test_a_kernel_killed_by_sigkill_the_kit_did_not_send_is_a_dead_kernel_naming_the_signal(monkeypatch, tmp_path):
    def oom_killed(*_a, **_kw):
        live_handle().process = ended("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        raise DeadKernelError("Kernel died")

    outcome = run_with(monkeypatch, tmp_path, oom_killed)
    assert outcome.kind == outcomes.Outcome.KERNEL_DIED
    assert outcome.error == "the kernel died mid-case (killed by SIGKILL: the out-of-memory killer, or another process)"


def test_a_kernel_that_exited_on_its_own_died_whatever_nbclient_raised(monkeypatch, tmp_path):
    def exited(*_a, **_kw):
        live_handle().process = ended("raise SystemExit(3)")
        raise RuntimeError("Kernel died before replying to kernel_info")

    outcome = run_with(monkeypatch, tmp_path, exited)
    assert outcome.kind == outcomes.Outcome.KERNEL_DIED
    assert outcome.error.endswith("(its process exited with code 3)")


def test_a_kernel_papermill_shut_down_is_not_read_by_its_exit(monkeypatch, tmp_path):
    """papermill kills a kernel still alive at the end with SIGKILL itself: that is no out-of-memory kill."""
    def failed_then_shut_down(*_a, **_kw):
        handle = live_handle()
        handle.process = ended("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        handle.shut_down = True
        raise ValueError("papermill could not write the notebook")

    outcome = run_with(monkeypatch, tmp_path, failed_then_shut_down)
    assert outcome.kind == outcomes.Outcome.CASE_ERROR and "SIGKILL" not in outcome.error


def test_the_kernel_manager_marks_its_shutdown(tmp_path):
    import asyncio

    handle = notebook.KernelHandle(tmp_path / "kernel.log")
    manager = handle.manager_class()(kernel_name="python3")
    asyncio.run(manager.shutdown_kernel(now=True))  # no kernel: nothing to kill, the mark all the same
    assert handle.shut_down


def test_the_sigkill_of_a_kernel_behind_a_shell_counts_too():
    assert notebook.failure_kind(DeadKernelError("x"), 128 + signal.SIGKILL) == outcomes.Outcome.KERNEL_DIED
    assert notebook.exit_words(128 + signal.SIGKILL) == (" (killed by SIGKILL: the out-of-memory killer, or another "
                                                         "process)")
    assert notebook.failure_kind(DeadKernelError("x"), None) == outcomes.Outcome.KERNEL_DIED
    # A cell's class decides, whatever the process did afterwards.
    assert notebook.failure_kind(cell_error("EngineDidNotStart"),
                                 -signal.SIGKILL) == outcomes.Outcome.ENGINE_DID_NOT_START
