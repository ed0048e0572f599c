"""A notebook opened in JupyterLab and run as it is: its defaults name the project's files, not files beside
the folder its kernel starts in; it writes nothing into that folder, nor over what a gate recorded; a
calibration by hand measures into a fresh folder of its case's own. Each from a working directory that holds
none of the project (the tests of the notebooks themselves are in tests/e2e/views/test_notebooks.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from kit.case import calibrate, runner
from kit.core.records import contract, paths
from kit.core.noise.calibration import Sample
from kit.core.errors import BadInput
from kit.core.records.records import CaseResult
from kit.views import localize as localize_view
from kit.views import summary

pytestmark = pytest.mark.unit


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory outside the project, as a copied notebook's kernel has."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_a_descriptor_parameter_names_an_embedded_descriptor_from_any_folder(elsewhere):
    assert paths.descriptor_path(None) == paths.EMBEDDED_DESCRIPTOR
    assert paths.descriptor_path("tiny-cpu") == paths.EMBEDDED_DESCRIPTOR
    assert paths.descriptor_path("tiny-jax") == paths.DESCRIPTORS / "tiny-jax.toml"
    assert paths.descriptor_path("tiny-jax.toml") == paths.DESCRIPTORS / "tiny-jax.toml"
    # A file the user names is that file, relative to where they are.
    own = elsewhere / "tiny-cpu.toml"
    own.write_text("mine")
    assert paths.descriptor_path("tiny-cpu.toml") == own
    with pytest.raises(BadInput) as exc:
        paths.descriptor_path("../descriptors/tiny-cpu.toml")
    embedded = ", ".join(sorted(p.stem for p in paths.DESCRIPTORS.glob("*.toml")))
    assert str(exc.value) == (f"descriptor ../descriptors/tiny-cpu.toml: no such file (from {elsewhere}) and no "
                              f"embedded descriptor of that name (embedded: {embedded})")


def test_a_by_hand_case_resolves_its_descriptor_against_the_project_not_the_kernels_folder(elsewhere, monkeypatch):
    asked = []
    monkeypatch.setattr(runner, "_spec_from_main_environment", lambda descriptor, *_: asked.append(descriptor))
    runner.resolve_spec(None, "tiny-cpu", "hf-bf16")
    runner.resolve_spec(None, None, "hf-bf16")
    assert asked == [str(paths.EMBEDDED_DESCRIPTOR)] * 2


def test_the_runs_a_notebook_looks_in_are_the_checkouts_whatever_the_folder(elsewhere):
    assert paths.CHECKOUT is not None  # the tests run from a checkout
    assert paths.runs_root() == paths.CHECKOUT / "runs"


def test_newest_runs_are_looked_for_under_the_projects_runs(elsewhere, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setattr(paths, "runs_root", lambda: runs)
    with pytest.raises(FileNotFoundError) as exc:
        summary.latest_run(kind="control")
    assert str(exc.value) == f"no control run under {runs}; run `parity-kit control` first"
    for age, (name, mark) in enumerate((("gate", "manifest.json"), ("control", "control.json"),
                                        ("localize", "localize.json"))):
        (runs / name).mkdir(parents=True)
        (runs / name / mark).write_text("{}")
        os.utime(runs / name / mark, (age, age))
    assert summary.latest_run() == runs / "control"  # a localize run is no gate run, however new
    assert summary.latest_run(kind="gate") == runs / "gate"
    assert summary.latest_run(kind="control") == runs / "control"
    assert summary.latest_run(kind="localize") == runs / "localize"


def test_the_localize_notebook_shows_the_newest_localize_run_or_refuses_in_one_line(elsewhere, tmp_path,
                                                                                     monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setattr(paths, "runs_root", lambda: runs)
    with pytest.raises(BadInput) as exc:
        localize_view.load(None)
    assert str(exc.value) == (f"no localize run under {runs}; run `parity-kit localize` first (or set "
                              "localize_json to a localize.json)")
    doc = {"case": "hf-bf16", "verdict": "first divergent: layer 1 attention", "localizations": []}
    for name in ("older", "newer"):
        (runs / name).mkdir(parents=True)
        (runs / name / "localize.json").write_text(json.dumps({**doc, "case": name}))
        os.utime(runs / name / "localize.json", (1, 1 if name == "older" else 2))
    assert localize_view.load(None) == ({**doc, "case": "newer"}, runs / "newer")
    assert localize_view.load(runs / "older") == ({**doc, "case": "older"}, runs / "older")
    # The committed notebook's old default, localize.json beside the kernel, is no default any more.
    with pytest.raises(BadInput) as exc:
        localize_view.load("localize.json")
    assert str(exc.value) == ("localize_json localize.json: cannot be read as a localize.json "
                              "(No such file or directory)")
    (elsewhere / "other.json").write_text("[]")
    with pytest.raises(BadInput) as exc:
        localize_view.load("other.json")
    assert str(exc.value) == "localize_json other.json: not a localize.json written by `parity-kit localize`"


def recorded(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "cases" / "hf-bf16.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"recorded": "by the gate"}\n')
    return path


def test_a_case_notebook_run_again_by_hand_writes_nowhere_and_says_so(elsewhere, tmp_path, monkeypatch, capsys):
    """The executed notebook keeps its injected result_path; the executor's variable is not in JupyterLab's
    kernel, so the result the gate recorded there stays as it is."""
    path = recorded(tmp_path)
    before = path.read_bytes()
    monkeypatch.delenv(contract.RESULT_PATH_ENV, raising=False)
    assert runner.result_target(str(path), "hf-bf16") is None
    runner.save(CaseResult("hf-bf16", "hf", "passed"), str(path))
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == ["hf-bf16.json"]
    line = (f"case hf-bf16: not run by the gate, so its result is not written to {path} (that file keeps what the "
            "gate recorded)\n")
    assert capsys.readouterr().out == line * 2
    # A kernel the executor started for another case's result is no licence either.
    monkeypatch.setenv(contract.RESULT_PATH_ENV, str(path.with_name("other.json")))
    assert runner.result_target(str(path), "hf-bf16") is None
    # Without a result_path (the notebook as committed) there is nothing to refuse and nothing is said.
    capsys.readouterr()
    assert runner.result_target(None, "hf-bf16") is None and capsys.readouterr().out == ""


def test_the_kernel_the_executor_started_writes_its_result(tmp_path, monkeypatch, capsys):
    path = recorded(tmp_path)
    monkeypatch.setenv(contract.RESULT_PATH_ENV, str(path))
    assert runner.result_target(str(path), "hf-bf16") == str(path)
    runner.save(CaseResult("hf-bf16", "hf", "passed"), str(path))
    assert json.loads(path.read_text())["status"] == "passed" and capsys.readouterr().out == ""


def test_a_calibration_by_hand_measures_into_a_fresh_folder_of_its_cases_own(elsewhere, tmp_path, monkeypatch,
                                                                             capsys):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    measured = []
    monkeypatch.setattr(calibrate, "resolve_spec", lambda spec, descriptor, case: SimpleNamespace(name=case))
    monkeypatch.setattr(calibrate, "variant_samples", lambda spec, variants, path: measured.append(Path(path)) or [])
    for case in ("hf-bf16", "hf-bf16", "hf-f32"):
        calibrate.notebook_calibration(None, [], "tiny-cpu", case, None)
    assert [p.name for p in measured] == ["hf-bf16.samples.jsonl", "hf-bf16.samples.jsonl", "hf-f32.samples.jsonl"]
    assert len({p.parent for p in measured}) == 3  # run again, or for another case: never an earlier file
    assert all(p.parent.parent == tmp_path / "tmp" and p.parent.name.startswith(f"parity-kit-calibrate-{p.name[:6]}")
               for p in measured)
    assert list(elsewhere.iterdir()) == [] and not any(paths.NOTEBOOKS.glob("*.jsonl"))
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"samples of case hf-bf16 go to {measured[0]} (set samples_path to continue that file)"
    # Given its file, a calibration continues it.
    calibrate.notebook_calibration(None, [], "tiny-cpu", "hf-bf16", str(tmp_path / "mine.jsonl"))
    assert measured[-1] == tmp_path / "mine.jsonl"


def test_a_samples_file_of_another_case_is_refused_in_one_line(tmp_path):
    sample = Sample("as-set", 1, 1, {"p": 0.01}, {"p": -0.005}).to_dict()
    entry = {"sample": sample, "inputs": {}, "release": {}, "runtime": {}}
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in ({**entry, "case": "hf-bf16"}, entry)))
    assert len(calibrate.finished(path, "hf-bf16")) == 2  # a sample naming no case predates the case key
    with pytest.raises(BadInput) as exc:
        calibrate.finished(path, "hf-f32")
    assert str(exc.value) == (f"{path}:1: a sample of case hf-bf16, not of hf-f32; calibrate hf-f32 with a samples "
                              "file of its own")
