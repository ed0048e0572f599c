"""--resume reuses what finished with unchanged inputs; one gate run at a time per run directory."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import venv

import pytest

from kit.core.errors import BadInput
from kit.core.records.jsonio import canonical_bytes, sha256_file
from kit.run import runlock
from support import ROOT, SLEEPER, gone, hf_cases, parity_kit, trusted, write_descriptor, write_notebook


def restamped_golden(golden, dest):
    """The same golden, made again: equal numbers, other provenance, other digest."""
    doc = json.loads(golden.read_text())
    doc["provenance"]["created_at"] = "2030-01-01T00:00:00+00:00"
    dest.write_bytes(canonical_bytes(doc))
    return dest


def test_resume_reuses_finished_cases_and_reruns_the_rest(tmp_path, embedded):
    dies = write_notebook(tmp_path / "dies.ipynb", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    cases = {**hf_cases(embedded), "dies": {**embedded.doc["cases"]["checkpoint"], "notebook": trusted(dies)}}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == 2, proc.stderr
    cases_dir = run_dir / "cases"
    before = {n: (cases_dir / f"{n}.ipynb").stat().st_mtime_ns for n in cases}
    old_bf16 = (cases_dir / "hf-bf16.json").read_bytes()

    # The semantic golden is remade: hf-bf16 scores against it and must run again; checkpoint must not.
    golden = restamped_golden(embedded.goldens["semantic"], tmp_path / "semantic.json")
    desc = write_descriptor(tmp_path, embedded, name="v2.toml", cases=cases,
                            goldens={**embedded.goldens, "semantic": golden})
    proc = parity_kit("gate", desc, "--resume", run_dir)
    assert proc.returncode == 2, proc.stderr  # `dies` dies again
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert list(manifest["reused"]) == ["checkpoint"]
    assert manifest["rerun"] == {"hf-bf16": "its inputs changed: golden",
                                 "dies": "its earlier attempt ended with error"}
    assert len(manifest["history"]) == 1 and manifest["history"][0]["command"][-1] == "--no-summary"
    assert (cases_dir / "checkpoint.ipynb").stat().st_mtime_ns == before["checkpoint"], \
        "a reused case is not re-executed"
    assert (cases_dir / "hf-bf16.ipynb").stat().st_mtime_ns != before["hf-bf16"]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["cases"]["hf-bf16"]["status"] == "passed"
    assert result["cases"]["hf-bf16"]["golden_sha256"] == sha256_file(golden)
    assert result["cases"]["checkpoint"]["status"] == "passed"
    # The earlier results are set aside, not overwritten.
    assert (cases_dir / "superseded" / "hf-bf16.1.json").read_bytes() == old_bf16
    assert (cases_dir / "superseded" / "hf-bf16.1.ipynb").is_file()
    assert (cases_dir / "superseded" / "dies.1.json").is_file()
    assert "reused checkpoint: passed" in proc.stderr and "rerun  hf-bf16: its inputs changed: golden" in proc.stderr
    assert "INCOMPLETE" in (run_dir / "summary.html").read_text()  # `dies` still dies
    assert "Reused from an earlier run into this directory, inputs unchanged: `checkpoint`." in \
        (run_dir / "evidence.md").read_text()

    # Nothing changed since: a resume of the finished cases runs nothing, and `dies`, not selected, keeps
    # its error: the verdict still covers every case of the run.
    proc = parity_kit("gate", desc, "--resume", run_dir, "--case", "checkpoint", "--case", "hf-bf16", "--no-summary")
    assert proc.returncode == 2, proc.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert sorted(manifest["reused"]) == ["checkpoint", "hf-bf16"] and manifest["rerun"] == {}
    assert manifest["kept"] == {"dies": "not selected by --case; its earlier attempt ended with error"}
    assert json.loads((run_dir / "result.json").read_text())["cases"]["dies"]["status"] == "error"
    assert "kept   dies: not selected by --case; its earlier attempt ended with error" in proc.stderr


def release_environment(folder):
    """An environment of its own for a release kernel: a fresh venv that sees this one's packages (a .pth
    adds them as a site directory), so what pip installs into it changes its release and nothing else."""
    venv.EnvBuilder(with_pip=False).create(folder)
    site = folder / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    main_site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    (site / "main-env.pth").write_text(f"import site; site.addsitedir({main_site!r})\n")
    return folder / "bin" / "python", site


def install_into(site, name, version):
    """What `pip install name==version` leaves for the kernel's release fingerprint to see."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_resume_reruns_a_case_whose_release_changed_and_reuses_a_failed_one(tmp_path, embedded):
    python, site = release_environment(tmp_path / "pinned-env")
    spec = tmp_path / "jupyter" / "kernels" / "pinned"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "pinned",
        "language": "python"}))
    env = {"JUPYTER_PATH": str(tmp_path / "jupyter")}
    install_into(site, "tinyengine", "1.0")
    few = ["chat-sharegpt-00", "code-humaneval-00", "math-gsm-00"]
    base = {**embedded.doc["cases"]["hf-bf16"], "prompts": few}
    hand = {k: v for k, v in base.items() if k != "calibration"}  # a hand-set bound replaces the record
    cases = {"pinned": {**base, "kernel": "pinned"}, "tight": {**hand, "bound": 1e-9}}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary", env=env)
    assert proc.returncode == 1, proc.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert {n: c["status"] for n, c in result["cases"].items()} == {"pinned": "passed", "tight": "failed"}
    then = json.loads((run_dir / "manifest.json").read_text())["kernel_fingerprints"]
    tight_notebook = (run_dir / "cases" / "tight.ipynb").stat().st_mtime_ns

    # The pinned release's environment gets a new build of its engine: its case runs again; the failed
    # case, whose release and inputs hold, is reused as failed, and the run stays failed.
    install_into(site, "tinyengine", "2.0")
    proc = parity_kit("gate", desc, "--resume", run_dir, "--no-summary", env=env)
    assert proc.returncode == 1, proc.stderr
    reason = "the release in kernel 'pinned' changed (or was not recorded)"
    assert f"rerun  pinned: {reason}" in proc.stderr
    assert "reused tight: failed at " in proc.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["rerun"] == {"pinned": reason} and list(manifest["reused"]) == ["tight"]
    now = manifest["kernel_fingerprints"]
    assert now["pinned"] != then["pinned"] and now["parity-kit"] == then["parity-kit"]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "failed" and result["missing"] == []
    assert {n: c["status"] for n, c in result["cases"].items()} == {"pinned": "passed", "tight": "failed"}
    assert (run_dir / "cases" / "tight.ipynb").stat().st_mtime_ns == tight_notebook, "a reused case is not re-run"
    assert (run_dir / "cases" / "superseded" / "pinned.1.json").is_file()


def test_resume_refuses_what_is_not_a_run_of_this_descriptor(tmp_path, embedded):
    proc = parity_kit("gate", "--resume", tmp_path)
    assert proc.returncode == 3
    assert proc.stderr.strip() == (f"parity-kit: bad input: --resume {tmp_path}: not a gate run directory "
                                   "(it has no manifest.json)")
    (tmp_path / "manifest.json").write_text(json.dumps({"name": "other"}))
    proc = parity_kit("gate", "--resume", tmp_path)
    assert proc.stderr.strip() == (f"parity-kit: bad input: --resume {tmp_path}: it holds a run of descriptor "
                                   "'other', not 'tiny-cpu'")


def test_a_second_run_on_a_busy_run_directory_is_refused(tmp_path, embedded):
    pidfile = tmp_path / "sleeper.pids"
    sleepy = write_notebook(tmp_path / "sleepy.ipynb", SLEEPER.format(pidfile=str(pidfile)))
    cases = {"sleeps": {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(sleepy), "timeout_s": 300}}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    run_dir = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "kit.cli", "gate", desc, "--out", run_dir, "--no-summary"],
                             cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pidfile.exists(), "the first run never started its case"
        holder = f"pid {first.pid} on {socket.gethostname()} since "
        for args in (["--resume", run_dir], ["--out", run_dir]):
            proc = parity_kit("gate", desc, *args, "--no-summary")
            assert proc.returncode == 3, proc.stderr
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1, proc.stderr
            assert lines[0].startswith(f"parity-kit: bad input: run directory {run_dir} is in use by another "
                                       f"gate run: {holder}")
            assert lines[0].endswith(f"(parity-kit gate {desc} --out {run_dir} --no-summary)")
        assert not (run_dir / "cases" / "superseded").exists(), "a refused run touches nothing"
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert gone(map(int, pidfile.read_text().split()))
    runlock.acquire(run_dir).release()  # the holder is gone, and so is its lock


def test_a_crashed_holder_leaves_no_stale_lock(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from kit.run import runlock; "
                               f"runlock.acquire(__import__('pathlib').Path({str(tmp_path)!r}), ['holder']); "
                               "print('locked', flush=True); time.sleep(600)"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(BadInput, match=rf"is in use by another gate run: pid {holder.pid} .*\(holder\)$"):
            runlock.acquire(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    with runlock.acquire(tmp_path, ["next"]):
        assert json.loads((tmp_path / runlock.LOCK_NAME).read_text())["command"] == ["next"]
