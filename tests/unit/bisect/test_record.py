"""A bisect's record read back: `bisect --resume` and `report` on a bisect.json that is damaged or that an older
kit wrote are one line naming the file and the key (exit 3), never a traceback, and the folder is left as it
was; one bisect at a time holds a folder (kit.run.runlock), a second is refused naming the first. Records are
built by hand as kit.bisect.run writes them (no git, build or kernel)."""

from __future__ import annotations

import re


import pytest

from kit import __version__
from kit.bisect import run
from kit.bisect.inputs import State
from kit.bisect.step import Probe, StepRecord
from kit.cli import main
from kit.core.records import rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import write_json
from kit.run import runlock

BASE, TIP = "a" * 40, "b" * 40


def record(folder) -> dict:
    """A bisect stopped after probing its tip (bad on one prompt), as bisect.json holds it."""
    states = [State(0, BASE, BASE, "the base, without the overlay"), State(1, TIP, TIP, "fork: fast path")]
    tip = StepRecord(1, TIP, TIP, "fork: fast path", Probe.BAD, "toy fails on 1 of 4 prompt(s)", True, ["p-7"], 4,
                     paths={"step": str(folder / "steps" / f"01-{TIP[:12]}")}, wall_s=3.5)
    return {"kind": "bisect", "name": "tiny", "case": "toy", "kit_version": __version__,
            "inputs": {"repo": "/src/fork", "fork": "fork", "descriptor": "/d.toml", "base_label": "base",
                       "states": [s.to_dict() for s in states], "store": "/releases", "refresh_dir": None,
                       "current": "current", "backend": "hf", "scope": "overlay", "overlay": []},
            "build_command": None, "command": ["parity-kit", "bisect"], "started_at": "2025-01-01T00:00:00+00:00",
            "failing_prompts": ["p-7"], "steps": [tip.to_dict()], "verdict": run.INCOMPLETE,
            "reason": "stopped after 1 new step(s) (--max-steps)", "exit_code": 2, "first_bad": None}


def bisect_dir(tmp_path, change=None):
    folder = tmp_path / "bisect"
    doc = record(folder)
    if change is not None:
        change(doc)
    write_json(folder / rundir.BISECT, doc)
    return folder


def snapshot(folder) -> dict:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(capsys, *argv) -> str:
    assert main(list(argv)) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    return err.removeprefix("parity-kit: bad input: ").rstrip("\n")


@pytest.fixture
def never_probed(monkeypatch):
    """A resume that got past its checks would probe a state: here that fails the test instead."""
    def probe(*args, **kwargs):
        raise AssertionError("a state was probed")

    monkeypatch.setattr(run.step, "probe", probe)


DAMAGES = {
    "no inputs": (lambda d: d.pop("inputs"), "inputs: missing"),
    "no steps": (lambda d: d.pop("steps"), "steps: missing"),
    "a step that is not an object": (lambda d: d["steps"].append("tip"), "steps[1]: expected an object, got 'tip'"),
    "a step without its verdict": (lambda d: d["steps"][0].pop("bad"), "steps[0].bad: missing"),
    "a step of no state": (lambda d: d["steps"][0].update(index=7), "steps[0].index: expected a state of 0..1, got 7"),
    "a step's time as text": (lambda d: d["steps"][0].update(wall_s="3.5 s"),
                              "steps[0].wall_s: expected a number, got '3.5 s'"),
    "states out of order": (lambda d: d["inputs"]["states"].reverse(),
                            "inputs.states[0].index: expected 0, got 1"),
    "no commit to bisect": (lambda d: d["inputs"]["states"].pop(),
                            "inputs.states: expected the base and at least one commit, got 1 state(s)"),
    "failing prompts as one string": (lambda d: d.update(failing_prompts="p-7"),
                                      "failing_prompts: expected a list, got 'p-7'"),
}


@pytest.mark.parametrize("name", DAMAGES)
def test_resume_refuses_a_damaged_record_in_one_line_naming_it(tmp_path, capsys, monkeypatch, never_probed, name):
    monkeypatch.chdir(tmp_path)
    change, message = DAMAGES[name]
    folder = bisect_dir(tmp_path, change)
    before = snapshot(folder)
    assert refused(capsys, "bisect", "--resume", "bisect") == f"bisect/bisect.json: {message}"
    assert snapshot(folder) == before


def test_resume_refuses_a_truncated_record(tmp_path, capsys, monkeypatch, never_probed):
    monkeypatch.chdir(tmp_path)
    folder = bisect_dir(tmp_path)
    path = folder / rundir.BISECT
    path.write_bytes(path.read_bytes()[:200])
    assert refused(capsys, "bisect", "--resume", "bisect").startswith("bisect/bisect.json is not valid JSON: ")


def test_an_older_kits_record_names_the_kit_or_reads_with_defaults(tmp_path, capsys, monkeypatch, never_probed):
    """A key every version writes, missing, names the version that wrote the record; a step field added later
    (its timings) reads with its default, as a new step starts with it."""
    monkeypatch.chdir(tmp_path)
    folder = bisect_dir(tmp_path, lambda d: (d.update(kit_version="0.0.1"), d.pop("case")))
    assert refused(capsys, "bisect", "--resume", "bisect") == (
        f"bisect/bisect.json: case: missing (written by kit 0.0.1; this is kit {__version__})")
    folder = bisect_dir(tmp_path, lambda d: [d["steps"][0].pop(k) for k in ("timings_s", "cached_build")])
    _, doc = run.resume(folder)
    assert doc["steps"][0]["timings_s"] == {} and doc["steps"][0]["cached_build"] is False


def test_a_second_bisect_in_a_folder_is_refused_naming_the_first(tmp_path, capsys, monkeypatch, never_probed):
    monkeypatch.chdir(tmp_path)
    folder = bisect_dir(tmp_path)
    with runlock.acquire(folder, ["parity-kit", "bisect", "--resume", "bisect"], what="bisect"):
        before = snapshot(folder)
        line = refused(capsys, "bisect", "--resume", "bisect")
        assert line.startswith(f"run directory {folder.resolve()} is in use by another bisect: pid ")
        assert line.endswith("(parity-kit bisect --resume bisect)")
        assert snapshot(folder) == before
        with pytest.raises(BadInput, match=f"^run directory {re.escape(str(folder))} is in use by another bisect: "):
            run._claim(folder, None)  # a new bisect pointed at the folder: named, not only called full


def test_a_record_that_moved_on_while_the_lock_was_awaited_is_not_continued(tmp_path, never_probed):
    folder = bisect_dir(tmp_path)
    _, doc = run.resume(folder)
    write_json(folder / rundir.BISECT, {**doc, "steps": []})  # another bisect rewrote it meanwhile
    with pytest.raises(BadInput, match=r"bisect\.json changed since it was read \(another bisect ran in the folder"):
        run.run_bisect(folder.resolve(), doc)


def test_report_shows_a_stopped_bisect_from_its_record_or_names_a_damaged_one(tmp_path, capsys, monkeypatch):
    """Killed before it wrote summary.md, a bisect still reports every finished step, from bisect.json."""
    monkeypatch.chdir(tmp_path)
    bisect_dir(tmp_path)
    assert main(["report", "bisect", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Bisect `tiny`, case `toy`: **INCOMPLETE**\n")
    assert f"| 1 | 1/1 | `{TIP[:12]}` | fork: fast path | **bad** | built | 3.5 |" in out
    bisect_dir(tmp_path, lambda d: d["steps"][0].pop("commit"))
    assert refused(capsys, "report", "bisect", "--markdown") == "bisect/bisect.json: steps[0].commit: missing"


def test_a_started_bisect_runs_under_its_lock_on_the_record_it_wrote(tmp_path, monkeypatch):
    """start writes the record and run_bisect takes it again under the lock: the two must read as one record."""
    from support.forkrepo import GIT_ENV, make_fork

    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    fork = make_fork(tmp_path / "fork")
    folder, doc = run.start_bisect(run.BisectRequest("hf-bf16", out=tmp_path / "bisect", fork_repo=fork.repo,
                                              base=fork.old_base, backend="hf"))
    tip = doc["inputs"]["states"][-1]

    def probe(inp, state, case, prompts, step_dir, template):
        assert runlock.LOCK_NAME in {p.name for p in folder.iterdir()}
        with pytest.raises(BadInput, match="is in use by another bisect"):
            runlock.acquire(folder, what="bisect")  # held while the step runs
        return StepRecord(state.index, state.commit, state.built_from, state.subject, "good", "passes", False)

    monkeypatch.setattr(run.step, "probe", probe)
    done = run.run_bisect(folder, doc)
    assert (done.verdict, done.reason) == ("passes-at-tip", f"case hf-bf16 passes at the tip {tip['built_from'][:12]} "
                                                            f"({tip['subject']}): nothing to bisect")
    runlock.acquire(folder).release()  # and given back when it ends
