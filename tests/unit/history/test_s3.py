"""The history of runs kept in an S3 bucket, against a real S3-compatible server (tests/support/s3server.py): read,
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


def test_runs_in_a_bucket(tmp_path, s3, monkeypatch, capsys):
    import s3fs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    local = series(tmp_path / "local", [0.010, 0.012, 0.014])
    fs.put(str(tmp_path / "local"), f"{s3.bucket}/parity-runs", recursive=True)
    url = s3.url("parity-runs")
    found = gather(url)
    assert found.runs == 3 and found.index.is_relative_to(tmp_path / "cache")
    assert found.indexed.read == 3
    assert gather(url).indexed.read == 0
    # One case result rewritten in the bucket: only its run is read again.
    key = f"{s3.bucket}/parity-runs/{local[1].name}/cases/hf-bf16.json"
    doc = json.loads(fs.cat_file(key))
    doc["prompts"][0]["max_probability_error"] = 0.019
    fs.pipe(key, json.dumps(doc).encode())
    assert gather(url).indexed.read == 1
    assert main(["history", "--runs", url, "--json"]) == ExitCode.PASSED
    assert json.loads(capsys.readouterr().out)["runs"] == 3


def test_an_endpoint_that_does_not_answer_is_one_line_and_exit_3(s3, monkeypatch, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens here once the socket is closed
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed}")
    url = s3.url("parity-runs")
    assert main(["history", "--runs", url, "--json"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("parity-kit: bad input")]
    assert url in line and "cannot reach the endpoint" in line and "Traceback" not in err
