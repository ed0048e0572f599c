"""Publishing a finished run to a store (``--publish``), against a real S3-compatible server: the whole run
copied once under its own name, never over an existing one, its markers last; a failure leaves the local run as
it was, is recorded in its published.json, and the gate's exit code stays its verdict's."""

from __future__ import annotations

import json

import pytest

from kit.cli import main
from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.gate.run import publish_finished
from kit.history.publish import PUBLISH_ENV, publications, publish, publish_run, run_files
from support.rundirs import control_dir, gate_run

RUN = "tiny-20261201-100000-aaaa"


def tree(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_publish_copies_the_whole_run_under_its_name(s3, tmp_path):
    run = gate_run(tmp_path / RUN)
    url = publish(run, s3.url("team/runs/"))
    assert url == f"s3://{s3.bucket}/team/runs/{RUN}"
    expected = {k: v for k, v in tree(run).items() if k != rundir.LOCK}
    assert s3.keys() == sorted(f"team/runs/{RUN}/{k}" for k in expected)
    body = s3.client().get_object(Bucket=s3.bucket, Key=f"team/runs/{RUN}/{rundir.RESULT}")["Body"].read()
    assert body == expected[rundir.RESULT]


def test_markers_go_last_deepest_first(tmp_path):
    files = run_files(control_dir(tmp_path / "control-tiny"))
    assert files[-3:] == [f"candidate/{rundir.MANIFEST}", f"current/{rundir.MANIFEST}", rundir.CONTROL]
    assert not any(name.endswith(rundir.LOCK) for name in files)


def test_an_existing_destination_is_refused_and_left_alone(s3, tmp_path):
    publish(gate_run(tmp_path / "first" / RUN), s3.url("runs"))
    before = s3.keys()
    with pytest.raises(BadInput) as exc:
        publish(gate_run(tmp_path / "second" / RUN, failing=True), s3.url("runs"))
    assert str(exc.value).startswith(f"s3://{s3.bucket}/runs/{RUN}: already exists; a published run is never replaced")
    assert s3.keys() == before
    result = s3.client().get_object(Bucket=s3.bucket, Key=f"runs/{RUN}/{rundir.RESULT}")["Body"].read()
    assert json.loads(result)["verdict"] == "passed"  # the first run's, not the second's


def test_a_failed_publication_keeps_the_run_and_says_why(s3, tmp_path, caplog):
    run = gate_run(tmp_path / RUN)
    before = tree(run)
    url = f"s3://{s3.bucket}-missing/runs"
    publish_finished(run, url)  # as the gate does after its run: logs, never raises
    [line] = [r.getMessage() for r in caplog.records if r.name == "kit.gate.run"]
    assert line.startswith(f"[red]not published[/]: {url}: cannot be opened: the bucket does not exist; "
                           f"the run stays in {run}")
    after = tree(run)
    assert set(after) - set(before) == {rundir.PUBLISHED}
    assert all(after[k] == v for k, v in before.items())
    [attempt] = publications(run)
    assert attempt.url == f"{url}/{RUN}" and attempt.files == 0
    assert attempt.error == f"{url}: cannot be opened: the bucket does not exist"


def test_publication_recorded_after_and_not_copied(s3, tmp_path):
    run = gate_run(tmp_path / RUN)
    done = publish_run(run, s3.url("runs"))
    assert done.error is None and done.url == s3.url(f"runs/{RUN}") and done.files == 6
    assert publications(run) == [done]
    again = publish_run(run, s3.url("runs"))  # a second attempt is refused, and recorded after the first
    assert again.error and "already exists" in again.error
    assert publications(run) == [done, again]
    assert f"runs/{RUN}/{rundir.PUBLISHED}" not in s3.keys()


def test_publish_command(s3, tmp_path, capsys, monkeypatch):
    run = control_dir(tmp_path / "control-tiny-20261201-120000-cccc")
    monkeypatch.setenv(PUBLISH_ENV, s3.url("ci"))
    assert main(["publish", str(run)]) == 0
    assert capsys.readouterr().out.strip() == s3.url("ci/control-tiny-20261201-120000-cccc")
    assert f"ci/{run.name}/{rundir.CONTROL}" in s3.keys()
    assert main(["publish", str(run)]) == 3
    assert "already exists" in capsys.readouterr().err
    assert main(["publish", str(tmp_path)]) == 3
    assert "not a gate run or control directory" in capsys.readouterr().err


def test_gate_refuses_an_unusable_store_before_running(s3, tmp_path, capsys):
    # The store is checked before the descriptor is read: the run directory is never made.
    code = main(["gate", str(tmp_path / "absent.toml"), "--out", str(tmp_path / "run"),
                 "--publish", f"s3://{s3.bucket}-missing/runs"])
    assert code == 3
    assert capsys.readouterr().err.strip() == (f"parity-kit: bad input: s3://{s3.bucket}-missing/runs: cannot be "
                                               "opened: the bucket does not exist")
    assert not (tmp_path / "run").exists()


def test_publish_to_a_folder_store(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    run = control_dir(tmp_path / "local" / "control-tiny-20261201-120000-cccc")
    url = publish(run, str(shared))
    assert url == f"{shared}/{run.name}"
    assert tree(shared / run.name) == {k: v for k, v in tree(run).items() if not k.endswith(rundir.LOCK)}
    with pytest.raises(BadInput, match=r"/absent: cannot be opened: no such file or folder$"):
        publish(run, str(tmp_path / "absent"))  # a folder store is not made: a typo would scatter runs


def test_a_link_out_of_the_run_is_refused_before_anything_is_copied(s3, tmp_path):
    run = gate_run(tmp_path / RUN)
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not the run's")
    (run / "notes.txt").symlink_to(secret)
    with pytest.raises(BadInput, match=r"notes.txt: a link that leads out of the run"):
        publish(run, s3.url("runs"))
    assert s3.keys() == []
