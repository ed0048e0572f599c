"""`parity-kit gate --publish` end to end, one CPU case, against a real S3-compatible server: the finished run
is in the bucket, readable as a run through the history's store, and the local run records where it went."""

from __future__ import annotations

from kit.core.records import rundir
from kit.history.publish import publications
from kit.core.records.store import open_store
from support import parity_kit


def test_gate_publishes_its_finished_run(s3, tmp_path):
    run_dir = tmp_path / "tiny-cpu-published"
    proc = parity_kit("gate", "--case", "hf-bf16", "--no-summary", "--out", run_dir, "--publish", s3.url("ci"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(run_dir.resolve()) or proc.stdout.strip() == str(run_dir)
    assert f"-> {s3.url('ci/tiny-cpu-published')}" in proc.stderr
    store = open_store(s3.url("ci"))
    assert list(store.run_dirs()) == ["tiny-cpu-published"]
    assert store.read_json(f"tiny-cpu-published/{rundir.RESULT}")["verdict"] == "passed"
    assert store.read_bytes(f"tiny-cpu-published/{rundir.CASES}/hf-bf16.json") == \
        (run_dir / rundir.CASES / "hf-bf16.json").read_bytes()
    [done] = publications(run_dir)
    assert done.error is None and done.url == s3.url("ci/tiny-cpu-published")
    assert f"ci/tiny-cpu-published/{rundir.PUBLISHED}" not in s3.keys()
