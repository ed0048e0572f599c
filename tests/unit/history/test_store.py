"""The store of run directories on a real S3-compatible server (moto's, tests/support/s3server.py): run
directories listed and read through s3:// as from a folder, and every way a store can be unusable said in one
line naming the URL, quickly, never as a botocore traceback."""

from __future__ import annotations

import socket
import sys
import time

import importlib

import pytest

from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.history.publish import publish
from kit.core.records.store import STORAGE_OPTIONS_ENV, open_store, storage_options
from support.rundirs import control_dir, gate_run


def test_lists_and_reads_run_dirs_on_s3_as_in_a_folder(s3, tmp_path):
    runs = tmp_path / "runs"
    published = [publish(gate_run(runs / "tiny-20261201-100000-aaaa"), s3.url("team/runs")),
                 publish(gate_run(runs / "tiny-20261201-110000-bbbb", failing=True), s3.url("team/runs")),
                 publish(control_dir(runs / "control-tiny-20261201-120000-cccc"), s3.url("team/runs"))]
    assert published[0] == f"s3://{s3.bucket}/team/runs/tiny-20261201-100000-aaaa"

    remote, local = open_store(s3.url("team/runs")), open_store(str(runs))
    assert list(remote.run_dirs()) == list(local.run_dirs()) == [
        "control-tiny-20261201-120000-cccc", "tiny-20261201-100000-aaaa", "tiny-20261201-110000-bbbb"]
    run = "tiny-20261201-110000-bbbb"
    assert remote.read_json(f"{run}/{rundir.RESULT}") == local.read_json(f"{run}/{rundir.RESULT}")
    assert remote.read_json(f"{run}/{rundir.RESULT}")["verdict"] == "failed"
    assert remote.listdir(run) == sorted([rundir.CASES, rundir.EVIDENCE, rundir.MANIFEST, rundir.RESULT,
                                          rundir.SUMMARY_HTML])
    assert local.listdir(run) == sorted([rundir.LOCK, *remote.listdir(run)])  # the lock is not published
    assert remote.listdir("control-tiny-20261201-120000-cccc/candidate") == sorted(
        [rundir.CASES, rundir.EVIDENCE, rundir.MANIFEST, rundir.RESULT])
    assert remote.read_bytes(f"{run}/{rundir.EVIDENCE}") == (runs / run / rundir.EVIDENCE).read_bytes()
    assert remote.exists(run) and not remote.exists("tiny-never")
    with pytest.raises(BadInput, match=rf"^s3://{s3.bucket}/team/runs/{run}/nothing.json: no such file$"):
        remote.read_json(f"{run}/nothing.json")


def test_an_empty_prefix_is_a_store_with_no_runs(s3):
    store = open_store(s3.url("nobody/published/here"))
    store.probe()
    assert list(store.run_dirs()) == []


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_a_bucket_that_does_not_exist(s3):
    url = f"s3://{s3.bucket}-missing/runs"
    with pytest.raises(BadInput) as exc:
        open_store(url).probe()
    assert one_line(exc) == f"{url}: cannot be opened: the bucket does not exist"
    with pytest.raises(BadInput, match=r"^s3://.*-missing/runs: cannot be opened: the bucket does not exist$"):
        list(open_store(url).run_dirs())


def test_an_unreachable_endpoint_is_one_line_and_quick(s3, monkeypatch):
    with socket.socket() as sock:  # a port nothing listens on: bound, then given back
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    url = s3.url("runs")
    started = time.monotonic()
    with pytest.raises(BadInput) as exc:
        list(open_store(url).run_dirs())
    # Bounded, not fast to a host's number: botocore's defaults take minutes where a connect hangs.
    assert time.monotonic() - started < 30
    assert one_line(exc).startswith(f"{url}: cannot be opened: cannot reach the endpoint http://127.0.0.1:{port}")


@pytest.mark.parametrize("which, code", [("unknown key", "InvalidAccessKeyId"),
                                         ("wrong secret", "SignatureDoesNotMatch"),
                                         ("no permission", "AccessDenied")])
def test_credentials_the_server_refuses(s3, s3_checks_keys, monkeypatch, which, code):
    if which != "unknown key":  # a key the server knows; the test's own dummy key it does not
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_checks_keys.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY",
                           "not-the-secret" if which == "wrong secret" else s3_checks_keys.secret_key)
    url = s3.url("runs")
    with pytest.raises(BadInput) as exc:
        open_store(url).probe()
    assert one_line(exc) == (f"{url}: cannot be opened: access denied ({code}): check the credentials "
                             "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and what they may do "
                             "on this bucket")


def test_no_credentials_at_all(s3, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(BadInput) as exc:
        open_store(s3.url("runs")).probe()
    assert one_line(exc) == (f"{s3.url('runs')}: cannot be opened: no credentials: set AWS_ACCESS_KEY_ID and "
                             "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE")


def test_s3fs_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "s3fs", None)  # an import of it fails, as where it was never installed
    known = importlib.import_module("fsspec.registry")._registry  # fsspec keeps each class it imported
    monkeypatch.delitem(known, "s3", raising=False)
    with pytest.raises(BadInput) as exc:
        open_store("s3://team/runs")
    assert one_line(exc) == "s3://team/runs: the s3:// filesystem is not installed: pip install parity-kit[s3]"


def test_storage_options_from_the_environment(monkeypatch):
    monkeypatch.setenv(STORAGE_OPTIONS_ENV, '{"anon": true, "config_kwargs": {"connect_timeout": 2}}')
    options = storage_options("s3://team/runs")
    assert options["anon"] is True
    assert options["config_kwargs"]["connect_timeout"] == 2
    assert options["config_kwargs"]["retries"] == {"max_attempts": 2, "mode": "standard"}  # kept, not dropped
    monkeypatch.setenv(STORAGE_OPTIONS_ENV, "[1]")
    with pytest.raises(BadInput, match=r"^\$PARITY_KIT_STORAGE_OPTIONS: expected a JSON object"):
        open_store("s3://team/runs")


def test_a_local_folder_that_does_not_exist(tmp_path):
    with pytest.raises(BadInput, match=r"/absent: cannot be opened: no such file or folder$"):
        open_store(str(tmp_path / "absent")).probe()
