"""`parity-kit lab` keeps JupyterLab's checkpoints out of the folder it serves, so a run directory (the audit
artifact) never gains an ``.ipynb_checkpoints/``: the command it starts, read by jupyter_server's own contents
manager, checkpoints a run's notebook in the user's cache."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import nbformat
import pytest
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from traitlets.config.loader import KVArgParseConfigLoader

from kit.cli import main
from kit.core.records import paths, rundir
from kit.run.labcheckpoints import OutsideCheckpoints, checkpoint_root

pytestmark = pytest.mark.unit


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project with one run directory holding its summary notebook, and a cache of the test's own."""
    root = tmp_path / "project"
    run = root / "runs" / "r1"
    run.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(run / rundir.SUMMARY_NOTEBOOK))
    monkeypatch.setattr(paths, "CHECKOUT", root)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(paths.LAB_ROOT_ENV, str(root))  # `lab` sets it for its kernels; restored after the test
    return root


def lab_command(monkeypatch, *argv: str) -> list[str]:
    """The command `parity-kit lab` would become (os.execv replaced)."""
    started: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda path, cmd: started.append(list(cmd)))
    main(["lab", *argv])
    [cmd] = started
    return cmd


def test_lab_puts_checkpoints_outside_the_project(project, monkeypatch):
    cmd = lab_command(monkeypatch, str(project / "runs" / "r1"), "--no-browser")
    assert "--FileContentsManager.checkpoints_class=kit.run.labcheckpoints.OutsideCheckpoints" in cmd
    [root] = [a.split("=", 1)[1] for a in cmd if a.startswith("--OutsideCheckpoints.root_dir=")]
    assert Path(root) == checkpoint_root(project)
    assert not Path(root).resolve().is_relative_to(project.resolve())


def test_options_after_a_bare_dash_dash_still_come_last(project, monkeypatch):
    """A person's own setting (after `--`) overrides the kit's, as jupyter reads the last one given."""
    cmd = lab_command(monkeypatch, "--no-browser", "--", "--FileContentsManager.checkpoints_class=x.Y")
    assert cmd[-1] == "--FileContentsManager.checkpoints_class=x.Y"


def test_the_server_checkpoints_a_run_notebook_in_the_cache(project, monkeypatch):
    cmd = lab_command(monkeypatch, str(project / "runs" / "r1"), "--no-browser")
    config = KVArgParseConfigLoader([a for a in cmd if "Checkpoints" in a]).load_config()
    contents = AsyncLargeFileManager(root_dir=str(project), config=config)
    assert isinstance(contents.checkpoints, OutsideCheckpoints)
    notebook = f"runs/r1/{rundir.SUMMARY_NOTEBOOK}"
    asyncio.run(contents.create_checkpoint(notebook))
    assert [c["id"] for c in asyncio.run(contents.list_checkpoints(notebook))] == ["checkpoint"]
    asyncio.run(contents.restore_checkpoint("checkpoint", notebook))
    assert not list(project.rglob(".ipynb_checkpoints")) and not list(project.rglob("*-checkpoint.ipynb"))
    assert (checkpoint_root(project) / "runs" / "r1" / "summary-checkpoint.ipynb").is_file()
