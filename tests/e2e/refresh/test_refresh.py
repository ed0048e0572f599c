"""Refresh: a fork's overlay replayed onto a newer upstream, its wheels built, qualified and controlled.

The fork is a local git repository made here (an upstream with a small pip-buildable engine,
``tinyengine``, and a fork carrying overlay commits). Its release matters: the parity case is the
``toy`` backend's (a plugin outside kit/ whose runtime computes through tinyengine), today's pin is a
kernel holding the tinyengine the fork had when the pin was built, and the candidate is whatever the
release's wheel installs. So an overlay commit that breaks the numbers fails the refresh, and every
verdict below is reached through the real CLI.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pytest
import scrapbook as sb

from kit.core.records.jsonio import sha256_file
from kit.refresh import build, qualify
from support import parity_kit, write_descriptor
from support.forkrepo import (BUILD_FAULT, GIT_ENV, IMPORT_FAULT, LONG_PROMPT_FAULT, LONG_PROMPT_FIX, PIN_KERNEL, git,
                              install_toy_backend, make_fork, register_pin_kernel)

DAY = dt.date(2025, 1, 2)


@pytest.fixture(autouse=True)
def git_identity(monkeypatch):
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    """The toy backend's site folder, shared: nothing writes to it."""
    return install_toy_backend(tmp_path_factory.mktemp("toy-plugin"))


# One toy case over two buckets: qualification runs the shorter, the control both.
TOY_CASE = {"backend": "toy", "golden": "semantic", "bound": 0.05, "buckets": [128, 256]}
TOY_PIN = {"current": {"description": "today's pin",
                       "backends": {"toy": {"kernel": PIN_KERNEL, "version": "tinyengine, the fork's last release"}}}}


def test_clean_replay_writes_a_manifest_whose_hashes_match_the_wheels(tmp_path):
    fork = make_fork(tmp_path)
    store = tmp_path / "releases"
    out = build.build_release(build.BuildRequest(
        fork.repo, fork.new_upstream, tmp_path / "run" / "build", store, today=DAY))
    assert out.status == "built", out.reason
    main_next = git(fork.repo, "rev-parse", "main-next")
    upstream = git(fork.repo, "rev-parse", "upstream")
    assert out.tag == f"tinyengine-20250102-{main_next[:12]}"
    assert out.version == f"0.0.0.dev20250102+tinyengine.{main_next[:12]}"
    assert [c["subject"] for c in out.overlay] == ["fork: add a fused kernel flag", "fork: clamp activations"]
    assert out.upstream_moved == 2
    assert out.reason == ("2 overlay commits replayed onto upstream (2 upstream commits newer); "
                          f"1 wheel(s) built as {out.tag}")
    # main-next is the new upstream plus the overlay, in order; the fork's own main is untouched.
    assert git(fork.repo, "log", "--format=%s", f"{upstream}..main-next").splitlines() == [
        "fork: clamp activations", "fork: add a fused kernel flag"]
    assert git(fork.repo, "rev-parse", "main") == fork.tip

    manifest = json.loads(Path(out.manifest).read_text())
    assert Path(out.manifest) == store / out.tag / "manifest.json"
    assert manifest["tag"] == out.tag and manifest["version"] == out.version
    assert manifest["source_commit"] == main_next and manifest["base_commit"] == upstream
    assert manifest["previous"] == {"base_commit": fork.old_base, "source_commit": fork.tip}
    [wheel] = manifest["wheels"]
    assert wheel["file"] == "tinyengine-1.0.0-py3-none-any.whl" and wheel["architecture"] == "any"
    assert wheel["sha256"] == sha256_file(store / out.tag / "wheels" / wheel["file"])
    audit = Path(out.range_diff).read_text().splitlines()
    assert len(audit) == 2 and all(" = " in line for line in audit)  # both commits carried over unchanged

    # The same replay again (the fixed dates give the same commits, so the same tag): refused, untouched.
    before = Path(out.manifest).read_bytes()
    git(fork.repo, "worktree", "remove", "--force", out.replay["worktree"])
    git(fork.repo, "branch", "-D", "main-next")
    again = build.build_release(build.BuildRequest(
        fork.repo, fork.new_upstream, tmp_path / "run2" / "build", store, today=DAY))
    assert again.status == "exists" and again.tag == out.tag
    assert again.reason == (f"release {out.tag} exists (its manifest is {out.manifest}); it is never overwritten")
    assert Path(out.manifest).read_bytes() == before
    assert not (tmp_path / "run2" / "build" / "wheels").exists()  # refused before building

    # A git tag of that name counts as well.
    shutil.rmtree(store)
    git(fork.repo, "worktree", "remove", "--force", again.replay["worktree"])
    git(fork.repo, "branch", "-D", "main-next")
    git(fork.repo, "tag", out.tag, main_next)
    third = build.build_release(build.BuildRequest(
        fork.repo, fork.new_upstream, tmp_path / "run3" / "build", store, today=DAY))
    assert third.status == "exists" and f"git tag {out.tag} exists" in third.reason


def test_changed_wheel_fails_qualification_naming_both_digests(tmp_path, embedded):
    fork = make_fork(tmp_path)
    out = build.build_release(build.BuildRequest(
        fork.repo, fork.new_upstream, tmp_path / "build", tmp_path / "releases", today=DAY))
    wheel = Path(out.manifest).parent / "wheels" / out.wheels[0]["file"]
    wheel.write_bytes(wheel.read_bytes() + b"\0")  # one byte more after the manifest was written
    q = qualify.qualify_release(out.manifest, embedded.descriptor, tmp_path / "qualify", backend="hf")
    assert q.qualified is False
    assert q.reason == (f"verify: wheel {wheel.name} changed since the manifest was written: manifest sha256 "
                        f"{out.wheels[0]['sha256']}, file sha256 {sha256_file(wheel)}")
    assert [c["step"] for c in q.checks] == ["verify"]  # nothing was installed from the changed bytes
    assert not (tmp_path / "qualify" / "venv").exists()
    assert json.loads((tmp_path / "qualify" / "qualify.json").read_text())["qualified"] is False


def test_conflicting_replay_stops_naming_the_commit_and_files(tmp_path):
    fork = make_fork(tmp_path, conflict=True)
    clamp = git(fork.repo, "rev-parse", "main")
    out = tmp_path / "refresh"
    proc = parity_kit("refresh", "--backend", "hf", "--fork-repo", fork.repo, "--upstream-ref", "upstream",
                      "--out", out, env=GIT_ENV)
    assert proc.returncode == 5, proc.stderr
    reason = (f"overlay commit {clamp[:12]} \"fork: clamp activations\" does not apply onto upstream upstream "
              f"({git(fork.repo, 'rev-parse', 'upstream')[:12]}): conflict in tinyengine/ops.py; "
              "1 of 2 commits applied on main-next")
    assert f"refresh build-stopped: build conflict: {reason}" in proc.stderr
    record = json.loads((out / "build" / "build.json").read_text())
    assert record["status"] == "conflict"
    assert record["replay"]["conflict"]["sha"] == clamp
    assert record["replay"]["conflict"]["files"] == ["tinyengine/ops.py"]
    # The cherry-pick was aborted: the worktree is clean at the one commit that applied.
    worktree = Path(record["replay"]["worktree"])
    assert git(worktree, "status", "--porcelain") == ""
    assert git(fork.repo, "log", "--format=%s", "upstream..main-next") == "fork: add a fused kernel flag"
    assert not (out / "releases").exists() and not (tmp_path / "releases").exists()
    assert not (out / "qualify.ipynb").exists() and not (out / "control").exists()
    assert sb.read_notebook(str(out / "build.ipynb")).scraps["build_status"].data == "conflict"
    html = (out / "summary.html").read_text()
    assert "Refresh <code>tiny-cpu</code>: <span" in html and ">NOT QUALIFIED (build-stopped)</span>" in html
    assert "Build: <strong>CONFLICT</strong>" in html
    assert f"git -C {worktree} cherry-pick {clamp}" in (out / "next-steps.sh").read_text()


def refresh(tmp_path, embedded, plugin, *args, later=(), pin_at=None, fork=None, out="refresh"):
    """`parity-kit refresh` of a toy fork (made here unless given) against today's pin, which holds the
    tinyengine of ``pin_at`` (default: the commit the pin was built from)."""
    fork = fork or make_fork(tmp_path / "fork", later=later)
    jupyter = tmp_path / "jupyter"
    if not (jupyter / "kernels" / PIN_KERNEL).exists():
        register_pin_kernel(jupyter, fork, plugin, at=pin_at)
    desc = write_descriptor(tmp_path, embedded, cases={"toy": TOY_CASE}, releases=TOY_PIN)
    out = tmp_path / out
    proc = parity_kit("refresh", desc, "--fork-repo", fork.repo, "--upstream-ref", "upstream", "--out", out, *args,
                      env=toy_env(tmp_path, plugin), timeout=900)
    return fork, out, proc


def toy_env(tmp_path, plugin) -> dict:
    """What a command needs to run the toy case: today's pin's kernel and the plugin."""
    return {**GIT_ENV, "JUPYTER_PATH": str(tmp_path / "jupyter"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH")]))}


def test_refresh_that_qualifies_computes_with_the_release_and_never_rebuilds_its_tag(tmp_path, embedded, plugin):
    fork, out, proc = refresh(tmp_path, embedded, plugin)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out.resolve())
    for step in ("[1/4] build", "[2/4] qualify", "[3/4] control", "[4/4] summary", "refresh qualified"):
        assert step in proc.stderr
    record = json.loads((out / "refresh.json").read_text())
    built = json.loads((out / "build" / "build.json").read_text())
    tag = built["tag"]
    assert record["verdict"] == "qualified" and record["exit_code"] == 0
    assert Path(built["manifest"]) == tmp_path / "releases" / tag / "manifest.json"  # beside the refresh dir

    q = json.loads((out / "qualify" / "qualify.json").read_text())
    venv = out / "qualify" / "venv"
    assert q["qualified"] is True and q["kernel"] == f"release-{tag}"
    assert q["imports"]["tinyengine"].startswith(str(venv))
    assert q["case"]["name"] == "toy" and q["case"]["bucket"] == 128 and q["case"]["verdict"] == "passed"
    assert q["hardware"]["cores"] >= 1 and q["hardware"]["cpu"]
    assert sb.read_notebook(str(out / "qualify.ipynb")).scraps["qualified"].data is True

    # The control ran the candidate in the qualified kernel, with the release's identity, and each side
    # computed with its own tinyengine: the pin's exported tree, the release's installed wheel.
    diagnosis = json.loads((out / "control" / "diagnosis.json").read_text())
    assert diagnosis["verdict"] == "qualified" and diagnosis["candidate"] == tag
    candidate = json.loads((out / "control" / tag / "manifest.json").read_text())
    toy = candidate["release"]["backends"]["toy"]
    assert toy["kernel"] == f"release-{tag}" and toy["source_commit"] == git(fork.repo, "rev-parse", "main-next")
    assert toy["wheels"] == {w["file"]: w["sha256"] for w in built["wheels"]}
    engine = json.loads((out / "control" / tag / "cases" / "toy.json").read_text())["release"]["tinyengine"]
    assert Path(engine).is_relative_to(venv)
    pinned = json.loads((out / "control" / "current" / "cases" / "toy.json").read_text())["release"]["tinyengine"]
    assert Path(pinned).is_relative_to(tmp_path / "jupyter" / f"{PIN_KERNEL}-site")

    html = (out / "summary.html").read_text()
    for part in ("Refresh <code>test</code>: <span", ">QUALIFIED</span>", "Build: <strong>BUILT</strong>",
                 f"Qualify <code>{tag}</code>: <strong>QUALIFIED</strong>",
                 "Control: today's pin <code>current</code> against candidate"):
        assert part in html
    steps = (out / "next-steps.sh").read_text()
    assert "push origin main-next" in steps and f"tag -a {tag} " in steps and "gh pr create" in steps
    # Nothing was tagged: the commands are for a person.
    assert git(fork.repo, "tag") == ""

    # The same refresh again (on another replay branch; the fixed dates give the same commits, so the same
    # tag): the release exists, so the build stops before building and the release is left as it was.
    manifest = Path(built["manifest"]).read_bytes()
    _, again, proc = refresh(tmp_path, embedded, plugin, "--branch", "main-next-again", fork=fork, out="again")
    assert proc.returncode == 5, proc.stderr
    reason = f"release {tag} exists (its manifest is {built['manifest']}); it is never overwritten"
    assert f"refresh build-stopped: build exists: {reason}" in proc.stderr
    assert json.loads((again / "refresh.json").read_text())["verdict"] == "build-stopped"
    assert not (again / "build" / "wheels").exists() and not (again / "qualify").exists()
    assert Path(built["manifest"]).read_bytes() == manifest


def test_overlay_commit_that_breaks_numerics_is_a_regression_naming_the_case(tmp_path, embedded, plugin):
    # The fork broke long prompts after today's pin was built; qualification (bucket 128) cannot see it,
    # the control (buckets 128 and 256) must.
    fork, out, proc = refresh(tmp_path, embedded, plugin, later=[LONG_PROMPT_FAULT])
    assert proc.returncode == 1, proc.stderr
    built = json.loads((out / "build" / "build.json").read_text())
    tag = built["tag"]
    assert built["overlay"][-1] == {"sha": fork.later[0], "subject": "fork: fast path for long prompts"}
    q = json.loads((out / "qualify" / "qualify.json").read_text())
    assert q["qualified"] is True and q["case"]["bucket"] == 128
    record = json.loads((out / "refresh.json").read_text())
    assert record["verdict"] == "regression" and record["exit_code"] == 1
    reason = f"the candidate `{tag}` fails `toy`, which today's pin `current` passes: a regression in the candidate"
    assert record["reason"] == reason
    assert f"refresh regression: {reason}" in proc.stderr and "refresh qualified" not in proc.stderr
    assert record["next_steps"] == [] and not (out / "next-steps.sh").exists()
    current = json.loads((out / "control" / "current" / "cases" / "toy.json").read_text())
    candidate = json.loads((out / "control" / tag / "cases" / "toy.json").read_text())
    assert current["status"] == "passed" and candidate["status"] == "failed"
    # Only the long prompts moved: the failing prompts are bucket 256's, the short ones score exactly.
    assert {p["bucket"] for p in candidate["prompts"] if not p["passed"]} == {256}
    assert all(p["max_probability_error"] == 0.0 for p in candidate["prompts"] if p["bucket"] == 128)
    # The evidence names the case, its worst prompts' bucket, and the commit the release was built from.
    evidence = (out / "control" / "evidence.md").read_text()
    assert evidence.startswith("# Refresh blocked: test — regression in the candidate (toy)\n")
    assert f"- `{tag}`, toy: worst case `toy` (12 of 32 prompts failed), prompt " in evidence
    assert "(bucket 256): max probability error 0.148, bound 0.05" in evidence
    assert f"| {built['replay']['tip']} |" in evidence
    html = (out / "summary.html").read_text()
    assert ">NOT QUALIFIED (regression)</span>" in html

    # A bisect of the refresh directory, one step of it: the tip is the refresh's replayed commit, its wheel
    # the refresh's release (nothing is built again), and it fails on the same long prompts.
    bisect = tmp_path / "bisect"
    proc = parity_kit("bisect", out, "--case", "toy", "--out", bisect, "--max-steps", "1",
                      env=toy_env(tmp_path, plugin), timeout=900)
    assert proc.returncode == 2, proc.stderr
    [tip] = json.loads((bisect / "bisect.json").read_text())["steps"]
    assert (tip["index"], tip["commit"], tip["built_from"]) == (3, fork.later[0], built["replay"]["tip"])
    assert tip["cached_build"] is True and tip["paths"]["manifest"] == built["manifest"]
    assert tip["verdict"] == "bad" and tip["reason"] == "toy fails on 12 of 32 prompt(s)"
    assert f"resume with parity-kit bisect --resume {bisect}" in proc.stderr


def test_qualification_refuses_a_release_whose_numbers_fail_its_case(tmp_path, embedded, plugin):
    fork, out, proc = refresh(tmp_path, embedded, plugin, "--qualify-bucket", "256", later=[LONG_PROMPT_FAULT])
    assert proc.returncode == 6, proc.stderr
    tag = json.loads((out / "build" / "build.json").read_text())["tag"]
    reason = f"parity case: toy on bucket 256 in kernel release-{tag}: failed"
    record = json.loads((out / "refresh.json").read_text())
    assert record["verdict"] == "qualification-failed" and record["exit_code"] == 6
    assert record["reason"] == f"qualification of {tag} failed: {reason}"
    assert f"refresh qualification-failed: qualification of {tag} failed: {reason}" in proc.stderr
    assert not (out / "control").exists()  # a release that fails its own case is never controlled


def test_qualification_refuses_a_release_whose_import_raises(tmp_path, embedded, plugin):
    fork, out, proc = refresh(tmp_path, embedded, plugin, later=[IMPORT_FAULT])
    assert proc.returncode == 6, proc.stderr
    tag = json.loads((out / "build" / "build.json").read_text())["tag"]
    q = json.loads((out / "qualify" / "qualify.json").read_text())
    assert [(c["step"], c["ok"]) for c in q["checks"]] == [("verify", True), ("install", True), ("kernel", True),
                                                           ("import", False)]
    reason = "import: import tinyengine failed: ModuleNotFoundError: No module named 'tinyengine_fused'"
    assert q["reason"] == reason and q["case"] == {}  # no parity case ran on a release that cannot import
    record = json.loads((out / "refresh.json").read_text())
    assert record["verdict"] == "qualification-failed" and record["exit_code"] == 6
    assert record["reason"] == f"qualification of {tag} failed: {reason}"
    assert f"refresh qualification-failed: {record['reason']}" in proc.stderr
    assert not (out / "control").exists()


def test_overlay_commit_that_breaks_the_build_stops_the_refresh(tmp_path, embedded, plugin):
    fork, out, proc = refresh(tmp_path, embedded, plugin, later=[BUILD_FAULT])
    assert proc.returncode == 5, proc.stderr
    built = json.loads((out / "build" / "build.json").read_text())
    assert built["status"] == "build-failed" and built["manifest"] == ""
    # The reason names the command, its log, and the log's line that says what went wrong, in plain text.
    log = out / "build" / "build.log"
    assert built["build_log"] == str(log) and built["build_command"][1:4] == ["-m", "pip", "wheel"]
    reason = (f"the wheel build exited 1: {' '.join(built['build_command'])} (log {log}): "
              "error: the fused kernels need the CUDA toolkit [/opt/tinyengine-cuda does not exist]")
    assert built["reason"] == reason
    assert "\x1b" not in log.read_text()
    record = json.loads((out / "refresh.json").read_text())
    assert record["verdict"] == "build-stopped" and record["exit_code"] == 5
    assert record["reason"] == f"build build-failed: {reason}"
    assert f"refresh build-stopped: build build-failed: {reason}" in proc.stderr
    assert built["overlay"][-1] == {"sha": fork.later[0], "subject": "fork: build the fused kernels"}
    assert not (tmp_path / "releases").exists() and not (out / "qualify").exists()


def test_refresh_whose_control_fails_is_not_qualified(tmp_path, embedded, plugin):
    # Today's pin was built while the fork had the long-prompt fault; the fork has fixed it since.
    fork = make_fork(tmp_path / "fork", later=[LONG_PROMPT_FAULT, LONG_PROMPT_FIX])
    _, out, proc = refresh(tmp_path, embedded, plugin, fork=fork, pin_at=fork.later[0])
    assert proc.returncode == 4, proc.stderr
    q = json.loads((out / "qualify" / "qualify.json").read_text())
    assert q["qualified"] is True  # the release's own bytes are fine ...
    record = json.loads((out / "refresh.json").read_text())
    assert record["verdict"] == "baseline-blocker"  # ... but the control decides, and it failed
    assert record["reason"].startswith("today's pin `current` fails `toy` while the candidate")
    assert "refresh qualified" not in proc.stderr and "refresh baseline-blocker" in proc.stderr
    assert record["next_steps"] == [] and not (out / "next-steps.sh").exists()
    html = (out / "summary.html").read_text()
    assert "Refresh <code>test</code>: <span" in html and ">NOT QUALIFIED (baseline-blocker)</span>" in html
    assert ">BASELINE BLOCKER</span>" in html


def test_refresh_refuses_bad_input_in_one_line(tmp_path):
    proc = parity_kit("refresh", "--backend", "hf", "--fork-repo", tmp_path, "--upstream-ref", "upstream",
                      "--out", tmp_path / "r")
    assert proc.returncode == 3
    assert proc.stderr.strip() == f"parity-kit: bad input: fork repository {tmp_path} is not a git repository"
    fork = make_fork(tmp_path / "fork")
    proc = parity_kit("refresh", "--backend", "hf", "--fork-repo", fork.repo, "--upstream-ref", "nope",
                      "--out", tmp_path / "r")
    assert proc.returncode == 3
    assert proc.stderr.strip() == f"parity-kit: bad input: upstream ref 'nope' is not a commit in {fork.repo}"
    proc = parity_kit("refresh", "--backend", "hf", "--fork-repo", fork.repo, "--upstream-ref", "upstream",
                      "--qualify-bucket", "99",
                      "--out", tmp_path / "r")
    assert proc.returncode == 3
    assert proc.stderr.strip() == "parity-kit: bad input: case hf-bf16 has no bucket 99 (buckets: 128, 256, 512, 1024)"
    assert not (tmp_path / "r").exists()
