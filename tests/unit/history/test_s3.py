"""The history of runs kept in an S3 bucket, against a real S3-compatible server (moto's, on this host): read,
indexed in the user's cache, updated incrementally by the objects' ETags; an endpoint that does not answer is one
line and exit 3."""

from __future__ import annotations

import json
import socket

import pytest

from kit.cli import main
from kit.core.exitcodes import ExitCode
from kit.history.command import gather
from support.history import series

pytestmark = pytest.mark.unit

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def endpoint(monkeypatch, tmp_path):
    """An S3 server on this host, the environment pointing botocore at it, and a cache of our own."""
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    for key, value in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_MAX_ATTEMPTS": "1", "XDG_CACHE_HOME": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()  # a client made for another endpoint must not be reused
    yield f"http://127.0.0.1:{port}"
    s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


def test_runs_in_a_bucket(tmp_path, endpoint, capsys):
    fs = s3fs.S3FileSystem()
    fs.mkdir("team")
    local = series(tmp_path / "local", [0.010, 0.012, 0.014])
    fs.put(str(tmp_path / "local"), "team/parity-runs", recursive=True)
    found = gather("s3://team/parity-runs")
    assert found.runs == 3 and found.index.is_relative_to(tmp_path / "cache")
    assert found.indexed.read == 3
    assert gather("s3://team/parity-runs").indexed.read == 0
    # One case result rewritten in the bucket: only its run is read again.
    key = f"team/parity-runs/{local[1].name}/cases/hf-bf16.json"
    doc = json.loads(fs.cat_file(key))
    doc["prompts"][0]["max_probability_error"] = 0.019
    fs.pipe(key, json.dumps(doc).encode())
    again = gather("s3://team/parity-runs")
    assert again.indexed.read == 1
    assert main(["history", "--runs", "s3://team/parity-runs", "--json"]) == ExitCode.PASSED
    assert json.loads(capsys.readouterr().out)["runs"] == 3


def test_an_endpoint_that_does_not_answer_is_one_line_and_exit_3(endpoint, monkeypatch, capsys):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    s3fs.S3FileSystem.clear_instance_cache()
    assert main(["history", "--runs", "s3://team/parity-runs", "--json"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("parity-kit: bad input")]
    assert "s3://team/parity-runs" in line and "Traceback" not in err
