"""What a bisect searches, read from a refresh directory or a fork's history, and the inputs it refuses
in one line before claiming a directory. Real git repositories (the refresh tests' toy fork); no kernel."""

from __future__ import annotations

import json

import pytest

from kit.bisect import run
from kit.bisect.inputs import State, from_fork, from_refresh, from_upstream
from kit.core.errors import BadInput
from kit.core.records.paths import EMBEDDED_DESCRIPTOR
from kit.descriptor.load import load_descriptor
from kit.refresh import overlay
from support import parity_kit
from support.forkrepo import GIT_ENV, LONG_PROMPT_FAULT, git, make_fork


@pytest.fixture(autouse=True)
def git_identity(monkeypatch):
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


def fake_refresh(tmp_path, fork):
    """A refresh directory as far as a bisect reads it: the record and the build step's replay."""
    commits = overlay.overlay_commits(fork.repo, fork.old_base, fork.tip)
    upstream = git(fork.repo, "rev-parse", "upstream")
    replay = overlay.replay_overlay(fork.repo, commits, upstream, tmp_path / "worktree")
    folder = tmp_path / "refresh"
    (folder / "build").mkdir(parents=True)
    (folder / "refresh.json").write_text(json.dumps({"kind": "refresh", "descriptor": str(EMBEDDED_DESCRIPTOR),
                                                     "store": str(tmp_path / "releases"), "current": "current"}))
    (folder / "build" / "build.json").write_text(json.dumps({
        "status": "built", "reason": "", "replay": replay.to_dict(),
        "inputs": {"repo": str(fork.repo), "fork": "tinyengine", "upstream_ref": "upstream", "base": fork.old_base,
                   "tip": fork.tip, "upstream": upstream},
        "overlay": [{"sha": c.sha, "subject": c.subject} for c in commits]}))
    return folder, replay, upstream


def test_a_refresh_directory_gives_its_replayed_commits(tmp_path):
    fork = make_fork(tmp_path / "fork", later=[LONG_PROMPT_FAULT])
    folder, replay, upstream = fake_refresh(tmp_path, fork)
    inp = from_refresh(folder)
    subjects = ["fork: add a fused kernel flag", "fork: clamp activations", "fork: fast path for long prompts"]
    assert inp.n == 3 and inp.store == tmp_path / "releases" and inp.descriptor == EMBEDDED_DESCRIPTOR
    assert inp.states[0] == State(0, upstream, upstream, "upstream without the overlay")
    assert [s.subject for s in inp.states[1:]] == subjects
    assert [(s.commit, s.built_from) for s in inp.states[1:]] == [(a["from"], a["to"]) for a in replay.applied]
    assert inp.states[3].commit == fork.later[0] and inp.states[3].built_from == replay.tip
    assert inp.base_label == f"upstream upstream ({upstream[:12]}) without the overlay"
    assert type(inp).from_dict(json.loads(json.dumps(inp.to_dict()))) == inp  # what bisect.json keeps


def test_an_upstream_range_gives_upstreams_commits_with_the_overlay_to_replay(tmp_path):
    fork = make_fork(tmp_path / "fork")
    folder, replay, upstream = fake_refresh(tmp_path, fork)
    inp = from_upstream(folder)
    docs = git(fork.repo, "rev-parse", "upstream~1")
    assert inp.scope == "upstream" and inp.n == 2
    assert inp.states == (State(0, fork.old_base, fork.tip, "the fork's tip on its old base"),
                          State(1, docs, "", "upstream: docs"),  # replayed when probed
                          State(2, upstream, replay.tip, "upstream: add scale"))  # the refresh's own replay
    assert [c[1] for c in inp.overlay] == ["fork: add a fused kernel flag", "fork: clamp activations"]
    assert type(inp).from_dict(json.loads(json.dumps(inp.to_dict()))) == inp


def test_a_forks_history_from_base_to_tip(tmp_path):
    fork = make_fork(tmp_path / "fork", later=[LONG_PROMPT_FAULT])
    inp = from_fork(EMBEDDED_DESCRIPTOR, fork.repo, fork.pinned, store=tmp_path / "releases")
    assert inp.n == 1 and inp.states[0] == State(0, fork.pinned, fork.pinned, "the base, without the overlay")
    assert inp.states[1] == State(1, fork.later[0], fork.later[0], "fork: fast path for long prompts")


def test_bad_input_is_refused_in_one_line_before_any_directory(tmp_path):
    fork = make_fork(tmp_path / "fork")
    out = tmp_path / "bisect"

    def refused(message, case="hf-bf16", **kwargs):
        with pytest.raises(BadInput) as exc:
            run.start_bisect(run.BisectRequest(case, out=out, **kwargs))
        assert str(exc.value) == message
        assert not out.exists()

    refused("bisect needs a refresh directory (REFRESH_DIR) or --fork-repo and --base")
    refused("bisect --upstream needs a refresh directory: the range is its old base..new upstream",
            fork_repo=fork.repo, base="HEAD", upstream=True)
    refused("bisect --fork-repo needs --base: the commit the overlay starts from", fork_repo=fork.repo)
    refused(f"refresh directory {tmp_path} has no refresh.json (not a refresh directory, or one that never "
            "finished)", refresh_dir=tmp_path)
    refused(f"no commits between base {fork.tip[:12]} and tip {fork.tip[:12]} in {fork.repo}; nothing to bisect",
            fork_repo=fork.repo, base="HEAD")
    refused(f"base 'nope' is not a commit in {fork.repo}", fork_repo=fork.repo, base="nope")
    cases = ", ".join(load_descriptor(EMBEDDED_DESCRIPTOR).cases)
    refused(f"descriptors/tiny-cpu.toml: no case named 'nope' (cases: {cases})", case="nope", fork_repo=fork.repo,
            base=fork.old_base, backend="hf")
    refused("case levanter runs the levanter backend, not hf, the one the fork builds; bisect a case of that "
            "backend", case="levanter", fork_repo=fork.repo, base=fork.old_base, backend="hf")
    with pytest.raises(BadInput, match=f"^{tmp_path} has no bisect.json: not a bisect directory$"):
        run.resume(tmp_path)


def test_the_command_refuses_a_bisect_without_its_case():
    proc = parity_kit("bisect", "--fork-repo", ".", "--base", "HEAD")
    assert proc.returncode == 3
    assert proc.stderr.strip() == "parity-kit: bad input: bisect needs --case: the case that fails at the tip"
    proc = parity_kit("bisect", "--resume", "runs/x", "--case", "toy")
    assert proc.returncode == 3
    assert proc.stderr.strip() == ("parity-kit: bad input: --resume continues with the inputs runs/x/bisect.json "
                                   "recorded; drop --case")


def test_a_step_cut_short_keeps_its_folder_and_the_retry_gets_its_own(tmp_path):
    state = State(2, "a" * 40, "b" * 40, "fork: something")
    first = run._step_dir(tmp_path, state)
    assert first == tmp_path / "steps" / f"02-{'b' * 12}"
    first.mkdir(parents=True)  # an attempt that was killed half way: a folder, no step record
    assert run._step_dir(tmp_path, state) == tmp_path / "steps" / f"02-{'b' * 12}-attempt2"
