"""A case's kernel listens on sockets in a folder of this user's alone, not on loopback ports another process could
take between jupyter_client choosing them and the kernel binding them; the folder goes when the notebook ends."""

from __future__ import annotations

import stat
from pathlib import Path

import nbformat
import pytest

from kit.core.records import paths
from kit.run import notebook, warmkernels
from kit.run.notebook import run_notebook

pytestmark = pytest.mark.unit


def a_notebook(folder: Path, out: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import json, pathlib\nfrom ipykernel.connect import get_connection_info\n"
        f"pathlib.Path({str(out)!r}).write_text(json.loads(get_connection_info())['transport'])")]
    path = folder / "in.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_kernel_listens_in_a_private_folder_that_goes_with_it(tmp_path, monkeypatch):
    seen = []
    original = notebook.KernelHandle.private_sockets

    def spy(self, manager):
        original(self, manager)
        seen.append((self.sockets, manager.transport))
        assert stat.S_IMODE(Path(self.sockets).stat().st_mode) == 0o700
        assert Path(self.sockets).parent == warmkernels.folder()

    monkeypatch.setattr(notebook.KernelHandle, "private_sockets", spy)
    transport = tmp_path / "transport"
    outcome = run_notebook(a_notebook(tmp_path, transport), tmp_path / "out.ipynb", {}, paths.MAIN_KERNEL, 120,
                           tmp_path / "kernel.log")
    assert outcome.error is None, outcome.log_tail
    assert transport.read_text() == "ipc"
    [(sockets, kind)] = seen
    assert kind == "ipc" and not Path(sockets).exists()
    assert "running over TCP" not in (tmp_path / "kernel.log").read_text()


def test_without_a_private_folder_the_kernel_keeps_its_ports(tmp_path, monkeypatch):
    def no_folder():
        raise OSError("no folder for warm kernels: none writable")

    monkeypatch.setattr(warmkernels, "folder", no_folder)
    monkeypatch.setenv(warmkernels.ENABLED_ENV, "0")  # a warm process needs the folder too
    transport = tmp_path / "transport"
    outcome = run_notebook(a_notebook(tmp_path, transport), tmp_path / "out.ipynb", {}, paths.MAIN_KERNEL, 120,
                           tmp_path / "kernel.log")
    assert outcome.error is None, outcome.log_tail
    assert transport.read_text() == "tcp"
