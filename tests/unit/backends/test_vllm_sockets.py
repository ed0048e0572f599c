"""vLLM's sockets: each engine gets a folder of its own for them, removed when it closes (vLLM removes none)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from kit.backends.vllm.engine import RPC_ENV, remove_rpc_dir, with_own_rpc_dir


@pytest.fixture
def short_tmp(monkeypatch):
    """A temporary folder with a short path (pytest's own are too long for a socket's path)."""
    folder = Path(tempfile.mkdtemp(prefix="t-"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_socket_folder_is_the_engines_own_unless_one_was_chosen(short_tmp, monkeypatch):
    tmp_path = short_tmp
    monkeypatch.delenv(RPC_ENV, raising=False)
    env, made = with_own_rpc_dir({"VLLM_NO_USAGE_STATS": "1"}, "vllm-pp1")
    assert made is not None and Path(made).parent == tmp_path
    assert Path(made).name.startswith("parity-kit-vllm-vllm-pp1-")
    assert env == {"VLLM_NO_USAGE_STATS": "1", RPC_ENV: made}
    (Path(made) / "a-socket-left").write_text("")
    remove_rpc_dir(made)
    assert not Path(made).exists()
    assert with_own_rpc_dir({RPC_ENV: "/chosen"}, "c") == ({RPC_ENV: "/chosen"}, None)  # the case's choice
    monkeypatch.setenv(RPC_ENV, "/the-users")
    assert with_own_rpc_dir({}, "c") == ({}, None)  # the user's
    assert list(tmp_path.iterdir()) == []


def test_a_folder_too_long_for_a_socket_path_is_not_made(tmp_path, monkeypatch):
    """vLLM's socket paths are the folder and a UUID, and a socket's path has at most 107 characters: past that,
    vLLM's own choice stands (and says what is wrong), rather than an engine that cannot bind."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / ("x" * 60)))
    (tmp_path / ("x" * 60)).mkdir()
    monkeypatch.delenv(RPC_ENV, raising=False)
    assert with_own_rpc_dir({}, "a-case-with-a-long-name") == ({}, None)
    assert list((tmp_path / ("x" * 60)).iterdir()) == []


def test_a_server_that_cannot_be_started_leaves_no_socket_folder(short_tmp, monkeypatch, tmp_path):
    """A `vllm serve` that never starts (its program missing) is the engine's typed fault, named with its command,
    and the folder made for its sockets goes with it."""
    from types import SimpleNamespace

    from kit.backends.vllm import server
    from kit.backends.vllm.engine import EngineSettings
    from kit.core.records.contract import LOG_PREFIX_ENV
    from kit.core.errors import EngineDidNotStart

    monkeypatch.delenv(RPC_ENV, raising=False)
    monkeypatch.setenv(LOG_PREFIX_ENV, str(tmp_path / "vllm-pp2"))
    monkeypatch.setattr(server, "serve_command", lambda model: [str(tmp_path / "no-such-vllm"), "serve", model])
    with pytest.raises(EngineDidNotStart, match=r"^vllm serve could not be started: \[Errno 2\] .*no-such-vllm"):
        server.VllmServerBackend(SimpleNamespace(name="vllm-pp2"), EngineSettings(model="m", mode="server",
                                                                                 engine_args={}))
    assert list(short_tmp.iterdir()) == []
    assert (tmp_path / "vllm-pp2.server.log").read_text().startswith(f"$ {tmp_path / 'no-such-vllm'} serve m")
