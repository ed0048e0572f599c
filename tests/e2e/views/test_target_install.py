"""A run's summary renders from the notebook stack as a GPU node installs it (`pip install --target DIR`,
scripts/gpu-checks.sh), with nothing set for its templates: no JUPYTER_PATH, the interpreter's own prefix and
user folder holding none (support.targetsite)."""

from __future__ import annotations

import shutil

import pytest

from support import parity_kit, write_descriptor
from support.targetsite import target_site


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return target_site(tmp_path_factory)


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory, embedded):
    """The checkpoint case alone: a real run's summary notebook, executed, at the least cost."""
    tmp = tmp_path_factory.mktemp("gate")
    desc = write_descriptor(tmp, embedded, cases={"checkpoint": embedded.doc["cases"]["checkpoint"]})
    proc = parity_kit("gate", desc, "--out", tmp / "run")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return tmp / "run"


def test_a_runs_summary_renders_from_a_target_install_with_its_verdict_banner(site, gate_run, tmp_path):
    notebook = tmp_path / "summary.ipynb"
    shutil.copy(gate_run / "summary.ipynb", notebook)
    rendered = site.render(notebook)
    if rendered.found:
        pytest.skip(f"this host holds nbconvert's templates on Jupyter's data path ({rendered.found[0]}): a render "
                    "would find them without the install's own")
    assert rendered.nbconvert.is_relative_to(site.site)  # the stack is the --target one
    assert rendered.error is None, rendered.error
    assert rendered.html == notebook.with_suffix(".html")
    html = rendered.html.read_text(encoding="utf-8")
    assert '<code>test</code>: <span style="color:#1a7f37">PASSED</span></div><div>all 1 cases are within their ' \
           "bounds</div>" in html
