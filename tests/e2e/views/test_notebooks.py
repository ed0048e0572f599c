"""Notebooks are committed clean and stay thin: a tagged parameters cell, calls into kit."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import nbformat
import pytest

from kit.core.records import paths
from support import ROOT

NOTEBOOKS = sorted(paths.NOTEBOOKS.glob("*.ipynb"))
# A case notebook runs in its backend's kernel; the others in the main one.
KERNELS = {"parity_levanter.ipynb": paths.LEVANTER_KERNEL}


def test_there_are_notebooks():
    assert {p.name for p in NOTEBOOKS} >= {"parity_hf.ipynb", "parity_levanter.ipynb", "summary.ipynb",
                                           "control.ipynb", "build.ipynb", "qualify.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs; clear them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_one_tagged_parameters_cell_and_its_backends_kernel(path):
    nb = nbformat.read(str(path), as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert nb.metadata["kernelspec"]["name"] == KERNELS.get(path.name, paths.MAIN_KERNEL)
    nbformat.validate(nb)


def test_case_notebook_runs_as_is_with_its_default_parameters(tmp_path):
    """What a user gets when opening the notebook in JupyterLab and pressing run-all, wherever the notebook is
    (its defaults name the project's files, not files beside it)."""
    nb = _run_as_is("parity_hf.ipynb", tmp_path)
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "hf-bf16: passed, 0 of 64 prompts failed" in printed
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def test_summary_and_control_notebooks_run_as_is_on_the_newest_runs(tmp_path):
    """Opened in JupyterLab after `make gate` / `parity-kit control`, run-all shows the newest run under the
    project's runs/, from whatever folder its kernel starts in."""
    from nbclient import NotebookClient

    from support import parity_kit

    tag = uuid.uuid4().hex[:8]
    gate_dir, control_dir = ROOT / "runs" / f"nbtest-{tag}", ROOT / "runs" / f"nbtest-control-{tag}"
    try:
        proc = parity_kit("control", "--case", "hf-bf16", "--out", control_dir, "--no-summary")
        assert proc.returncode == 0, proc.stderr
        proc = parity_kit("gate", "--case", "hf-bf16", "--out", gate_dir, "--no-summary")
        assert proc.returncode == 0, proc.stderr
        for name, expect in (("summary.ipynb", "Gate <code>tiny-cpu</code>"),
                             ("control.ipynb", "Control: today&#x27;s pin <code>current</code>")):
            nb = nbformat.read(str(paths.NOTEBOOKS / name), as_version=4)
            NotebookClient(nb, kernel_name=paths.MAIN_KERNEL, timeout=300,
                           resources={"metadata": {"path": str(tmp_path)}}).execute()
            shown = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells for o in c.get("outputs", []))
            assert expect in shown, name
            assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
    finally:
        shutil.rmtree(gate_dir, ignore_errors=True)
        shutil.rmtree(control_dir, ignore_errors=True)


def test_an_executed_case_notebook_run_again_by_hand_leaves_the_recorded_result(tmp_path):
    """runs/<run>/cases/hf-bf16.ipynb opened in JupyterLab, run again and saved: it keeps the result_path the
    executor injected, but it is not the executor's run; the recorded result stays byte for byte, and the
    summary still shows it, not the numbers the notebook now holds."""
    from kit.views.summary import load_run
    from support import parity_kit

    run = tmp_path / "run"
    proc = parity_kit("gate", "--case", "hf-bf16", "--out", run, "--no-summary")
    assert proc.returncode == 0, proc.stderr
    cases = run / "cases"
    recorded = (cases / "hf-bf16.json").read_bytes()
    others = {p.name: p.read_bytes() for p in cases.iterdir() if p.name != "hf-bf16.ipynb"}
    nb = _run(cases / "hf-bf16.ipynb", cases)
    nbformat.write(nb, str(cases / "hf-bf16.ipynb"))  # as JupyterLab saves it
    printed = _printed(nb)
    assert ("case hf-bf16: not run by the gate, so its result is not written to hf-bf16.json (that file keeps "
            "what the gate recorded)\n") in printed  # the path as seen from the notebook's folder
    assert "hf-bf16: passed, 0 of 64 prompts failed" in printed  # it still scores, for the person looking
    assert (cases / "hf-bf16.json").read_bytes() == recorded
    assert {p.name: p.read_bytes() for p in cases.iterdir() if p.name != "hf-bf16.ipynb"} == others
    view = load_run(run)
    assert view.sources["hf-bf16"] == "executor"
    assert view.results["hf-bf16"].to_dict() == json.loads(recorded)


def test_localize_notebook_runs_as_is_from_another_folder_on_the_newest_localize_run(tmp_path):
    """Opened after `parity-kit localize`, run-all shows the newest localize run under the project's runs/,
    not a localize.json beside the kernel."""
    from kit.core.records import rundir
    from kit.core.noise.localize import localize, points

    folder = paths.runs_root() / f"localize-nbtest-{uuid.uuid4().hex[:8]}"
    pts = points(1)
    loc = localize("p", pts, [{"rel_l2_all": x} for x in (1e-3, 9e-2, 1e-1)],
                   [{"rel_l2_all": x} for x in (1e-3, 2e-3, 3e-3)])
    doc = {"case": "hf-bf16", "verdict": loc.verdict, "first_divergent": loc.to_dict()["first_divergent"],
           "localizations": [loc.to_dict()]}
    try:
        folder.mkdir(parents=True)
        (folder / rundir.LOCALIZE).write_text(json.dumps(doc))
        nb = _run(paths.NOTEBOOKS / "localize.ipynb", tmp_path)
        assert _printed(nb).splitlines() == [f"p: {loc.verdict}", loc.verdict]
        assert (folder / rundir.FIGURES / "localize-curve.png").is_file()
        assert list(tmp_path.iterdir()) == []
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_calibrate_notebook_runs_as_is_from_another_folder_into_a_fresh_folder(tmp_path, monkeypatch):
    """Run-all calibrates the tiny descriptor's hf-bf16 case, its samples in a fresh folder of their own (a
    temporary one), named in one line: nothing beside the kernel, nothing in notebooks/."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # the kernel's temporary folders
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = sorted(p.name for p in paths.NOTEBOOKS.iterdir())
    nb = _run(paths.NOTEBOOKS / "calibrate.ipynb", cwd)
    first = _printed(nb).splitlines()[0]
    [samples] = scratch.glob("parity-kit-calibrate-hf-bf16-*/hf-bf16.samples.jsonl")
    assert first == f"samples of case hf-bf16 go to {samples} (set samples_path to continue that file)"
    entries = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(entries) >= 3 and {e["case"] for e in entries} == {"hf-bf16"}
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert list(cwd.iterdir()) == [] and sorted(p.name for p in paths.NOTEBOOKS.iterdir()) == before


@pytest.mark.levanter
def test_levanter_notebook_runs_as_is_in_its_kernel(tmp_path):
    nb = _run_as_is("parity_levanter.ipynb", tmp_path)
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "levanter: passed, 0 of 64 prompts failed" in printed
    table = nb.cells[-1].outputs[0]["data"]["text/plain"]
    assert "reference" in table and "attention" in table


def _run_as_is(name: str, cwd: Path):
    return _run(paths.NOTEBOOKS / name, cwd)


def _run(path: Path, cwd: Path):
    """``path`` executed as JupyterLab runs it: its own parameters, nothing injected, the kernel in ``cwd``."""
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    NotebookClient(nb, kernel_name=nb.metadata["kernelspec"]["name"], timeout=300,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    assert not any(o.get("output_type") == "error" for c in nb.cells for o in c.get("outputs", []))
    return nb


def _printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stdout")
