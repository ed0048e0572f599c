"""Bisect: the first overlay commit of the toy fork whose build fails a case the tip fails.

The fork is the refresh tests' (tests/support/forkrepo.py): an upstream ``tinyengine`` and a fork whose
overlay over today's pin is two commits, the first of which breaks long prompts. Every step builds the state's wheel
(or takes it from the store), qualifies it in a fresh kernel and runs the toy case through it, through
the real CLI. One fork and one release store serve all three bisects, so the later ones build nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kit.refresh import build
from support import parity_kit, write_descriptor
from support.forkrepo import (GIT_ENV, LONG_PROMPT_FAULT, PIN_KERNEL, git, install_toy_backend, make_fork,
                              register_pin_kernel)

TOY_CASE = {"backend": "toy", "golden": "semantic", "bound": 0.05, "buckets": [128, 256]}
TOY_PIN = {"current": {"description": "today's pin",
                       "backends": {"toy": {"kernel": PIN_KERNEL, "version": "tinyengine, the fork's last release"}}}}
HARMLESS = ("fork: document the flags", {"docs/flags.md": "FUSED turns the fused kernels on.\n"})


@pytest.fixture(autouse=True)
def git_identity(monkeypatch):
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


def steps(out: Path) -> list[tuple[int, str, bool]]:
    record = json.loads((out / "bisect.json").read_text())
    return [(s["index"], s["verdict"], s["cached_build"]) for s in record["steps"]]


def test_bisect_names_the_first_bad_commit_resumes_and_says_when_no_commit_is_bad(tmp_path, embedded):
    plugin = install_toy_backend(tmp_path / "plugin")
    fork = make_fork(tmp_path / "fork", later=[LONG_PROMPT_FAULT, HARMLESS])
    fault = fork.later[0]
    jupyter = tmp_path / "jupyter"
    register_pin_kernel(jupyter, fork, plugin)
    desc = write_descriptor(tmp_path, embedded, cases={"toy": TOY_CASE}, releases=TOY_PIN)
    env = {**GIT_ENV, "JUPYTER_PATH": str(jupyter),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH")]))}

    def bisect(*args):
        return parity_kit("bisect", *map(str, args), env=env, timeout=900)

    # The overlay over today's pin: the fault, then a harmless commit. Two steps, then stopped: the tip
    # fails (its failing prompts recorded), the base passes.
    out = tmp_path / "bisect"
    proc = bisect("--descriptor", desc, "--fork-repo", fork.repo, "--base", fork.pinned, "--case", "toy",
                  "--out", out, "--max-steps", "2")
    assert proc.returncode == 2, proc.stderr
    assert (f"bisect incomplete: stopped after 2 new step(s) (--max-steps); resume with parity-kit bisect "
            f"--resume {out}") in proc.stderr
    assert steps(out) == [(2, "bad", False), (0, "good", False)]
    record = json.loads((out / "bisect.json").read_text())
    tip = record["steps"][0]
    assert tip["prompts_run"] == 32 and len(tip["failing_prompts"]) == 12  # bucket 256's long prompts
    assert record["failing_prompts"] == tip["failing_prompts"] and record["steps"][1]["prompts_run"] == 12
    finished = record["steps"]

    # Resumed: the finished steps are kept as they were; one more names the commit.
    proc = bisect("--resume", out)
    assert proc.returncode == 1, proc.stderr
    line = f"first bad commit: {fault} fork: fast path for long prompts"
    assert f"bisect first-bad-commit: {line}" in proc.stderr
    assert proc.stdout.strip() == str(out.resolve())
    record = json.loads((out / "bisect.json").read_text())
    assert record["steps"][:2] == finished
    assert steps(out) == [(2, "bad", False), (0, "good", False), (1, "bad", False)]
    assert record["verdict"] == "first-bad-commit" and record["exit_code"] == 1 and record["reason"] == line
    assert record["first_bad"] == {"index": 1, "commit": fault, "built_from": fault,
                                   "subject": "fork: fast path for long prompts"}
    assert [s["reason"] for s in record["steps"]] == [
        "toy fails on 12 of 32 prompt(s)", "toy passes on 12 prompt(s)", "toy fails on 12 of 12 prompt(s)"]
    for s in record["steps"]:  # every step's notebooks: qualification and the case
        folder = Path(s["paths"]["step"])
        assert (folder / "qualify.ipynb").is_file() and (folder / "case" / "cases" / "toy.ipynb").is_file()
    assert line in (out / "summary.md").read_text() and line in (out / "evidence.md").read_text()
    report = parity_kit("report", out, "--markdown")
    assert report.returncode == 0 and report.stdout.count(line) >= 2, report.stderr
    assert "| step | state | commit | subject | verdict |" in report.stdout
    proc = bisect("--resume", out)
    assert proc.returncode == 3
    assert proc.stderr.strip() == (f"parity-kit: bad input: bisect {out} is finished (first-bad-commit: {line}); "
                                   "nothing to resume")

    # The fault is already in the base: no overlay commit is to blame. Both wheels come from the store.
    out = tmp_path / "at-base"
    proc = bisect("--descriptor", desc, "--fork-repo", fork.repo, "--base", fault, "--case", "toy", "--out", out)
    assert proc.returncode == 4, proc.stderr
    reason = (f"no overlay commit is bad: case toy fails at the base, base {fault} ({fault[:12]}), on the tip's "
              "12 failing prompt(s): the fault is upstream or in the pin")
    assert f"bisect fails-at-base: {reason}" in proc.stderr
    assert steps(out) == [(1, "bad", True), (0, "bad", True)]

    # A tip that passes: nothing to bisect.
    out = tmp_path / "passes"
    proc = bisect("--descriptor", desc, "--fork-repo", fork.repo, "--base", fork.old_base, "--tip", fork.pinned,
                  "--case", "toy", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert (f"bisect passes-at-tip: case toy passes at the tip {fork.pinned[:12]} (fork: clamp activations): "
            "nothing to bisect") in proc.stderr
    assert steps(out) == [(2, "good", True)]
    assert len(list((tmp_path / "releases").iterdir())) == 3  # one build per commit, whichever bisect asked


def test_bisect_over_the_upstream_range_names_the_upstream_commit(tmp_path, embedded):
    # Upstream broke long prompts two commits before the refresh's new upstream; the overlay is fine.
    plugin = install_toy_backend(tmp_path / "plugin")
    fork = make_fork(tmp_path / "fork", upstream_later=[
        ("upstream: fast path for long prompts", LONG_PROMPT_FAULT[1]),
        ("upstream: test the engine", {"tests/test_engine.py": "def test_engine():\n    pass\n"})])
    fault = git(fork.repo, "rev-parse", "upstream~1")
    jupyter = tmp_path / "jupyter"
    register_pin_kernel(jupyter, fork, plugin)
    desc = write_descriptor(tmp_path, embedded, cases={"toy": TOY_CASE}, releases=TOY_PIN)
    env = {**GIT_ENV, "JUPYTER_PATH": str(jupyter),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(plugin), os.environ.get("PYTHONPATH")]))}
    # The refresh's build step, as the refresh runs it, and its record: what a bisect reads of a refresh.
    refresh = tmp_path / "refresh"
    built = build.build_release(build.BuildRequest(fork.repo, "upstream", refresh / "build", tmp_path / "releases"))
    assert built.status == "built", built.reason
    (refresh / "refresh.json").write_text(json.dumps({"kind": "refresh", "descriptor": str(desc), "current": "current",
                                                      "store": str(tmp_path / "releases")}))
    out = tmp_path / "bisect"
    proc = parity_kit("bisect", refresh, "--upstream", "--case", "toy", "--out", out, env=env, timeout=900)
    assert proc.returncode == 1, proc.stderr
    line = f"first bad upstream commit: {fault} upstream: fast path for long prompts"
    assert f"bisect first-bad-commit: {line}" in proc.stderr
    # The new upstream with the overlay is the refresh's release; the others are replayed and built here.
    assert steps(out) == [(4, "bad", True), (0, "good", False), (2, "good", False), (3, "bad", False)]
    record = json.loads((out / "bisect.json").read_text())
    assert record["steps"][1]["built_from"] == fork.tip  # state 0: the fork's own tip on its old base
    replayed = record["steps"][3]["built_from"]
    assert git(fork.repo, "rev-parse", f"{replayed}~2") == fault  # the two overlay commits onto the fault
    assert git(fork.repo, "branch", "--list", "--format=%(refname:short)") == "main\nmain-next\nupstream"
