"""vLLM's server raises the typed faults every backend raises (kit.core.errors): EngineDidNotStart for a server that
exits or is not healthy in time, EngineStoppedAnswering for a connection refused mid-case; an answer of the wrong
shape stays a VllmServerError, the case's own. No server is started: a stand-in process exits at once, and the
address answers nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kit.backends.vllm.server import VllmServerBackend, VllmServerError, free_port
from kit.core import outcomes
from kit.core.errors import EngineDidNotStart, EngineStoppedAnswering, kind_named


def server(tmp_path, code: str = "raise SystemExit(1)") -> VllmServerBackend:
    backend = object.__new__(VllmServerBackend)  # its fields, without starting `vllm serve`
    backend.log_path = tmp_path / "c.server.log"
    backend.log_path.write_text("$ vllm serve m\nValueError: max_model_len is too large\n")
    backend.url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    backend.proc = subprocess.Popen([sys.executable, "-c", code])
    backend.proc.wait()
    return backend


def test_a_server_that_exits_before_it_is_healthy_did_not_start(tmp_path):
    with pytest.raises(EngineDidNotStart, match="vllm serve exited with code 1 before it became healthy") as caught:
        server(tmp_path)._wait_healthy(5)
    assert "max_model_len is too large" in str(caught.value)  # its log tail follows
    assert kind_named(type(caught.value).__name__) == outcomes.Outcome.ENGINE_DID_NOT_START


def test_a_server_that_is_not_healthy_in_time_did_not_start(tmp_path):
    backend = server(tmp_path)
    backend.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(EngineDidNotStart, match="was not healthy within 0.1 s"):
            backend._wait_healthy(0.1)
    finally:
        backend.proc.kill()
        backend.proc.wait()


def test_a_connection_refused_mid_case_is_an_engine_that_stopped_answering(tmp_path):
    with pytest.raises(EngineStoppedAnswering, match="/v1/completions: the server stopped answering") as caught:
        server(tmp_path)._post("/v1/completions", {})
    assert kind_named(type(caught.value).__name__) == outcomes.Outcome.ENGINE_STOPPED_ANSWERING


def test_a_wrong_answer_is_the_cases_own():
    assert kind_named(VllmServerError.__name__) == outcomes.Outcome.CASE_ERROR
