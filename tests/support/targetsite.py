"""The notebook stack as a GPU node gets it: `pip install --target DIR` (scripts/gpu-checks.sh), for an
interpreter whose own environment has none of it.

Such an install puts nbconvert's HTML templates in DIR/share/jupyter, which is on none of Jupyter's data paths,
so a report renders there only if the kit finds them itself. The interpreter here is a virtual environment
without pip or any package, with DIR and the checkout on its path and none of the variables through which the
main environment's Jupyter folders could leak in; its user data folder is an empty one of its own, so that only
the system's folders remain, which the caller checks hold no templates.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

from support import ROOT
from support.shared import made_once
from support.wheelenv import CONSTRAINTS, unleaked_environ

# What rendering a notebook to HTML imports (kit.run.notebook.render_html), at the versions the lock file pins.
STACK = ("nbconvert", "nbformat", "jupyter_client")
RENDER = """
import json, sys
from pathlib import Path
import nbconvert
from jupyter_core.paths import jupyter_path
from kit.run.notebook import try_render_html

found = [p for p in jupyter_path("nbconvert", "templates") if Path(p, "lab").is_dir()]
page, error = try_render_html(Path(sys.argv[1]))
print(json.dumps({"html": page and str(page), "error": error, "nbconvert": nbconvert.__file__, "found": found}))
"""


@dataclass(frozen=True)
class Rendering:
    """What the kit's render_html gave in that interpreter."""

    html: Path | None
    error: str | None  # the kit's one line when it could not render
    nbconvert: Path  # where the interpreter imported nbconvert from
    found: list[str]  # the folders on Jupyter's data path that hold nbconvert's templates


@dataclass(frozen=True)
class TargetSite:
    site: Path  # the --target folder
    python: Path  # a bare interpreter: the standard library, then the site and the checkout
    data_dir: Path  # its empty Jupyter user data folder

    def env(self) -> dict[str, str]:
        return {**unleaked_environ(), "PYTHONPATH": f"{self.site}:{ROOT}", "JUPYTER_DATA_DIR": str(self.data_dir)}

    def render(self, notebook: Path) -> Rendering:
        """The kit's render_html of ``notebook`` (HTML beside it), run in that interpreter."""
        proc = subprocess.run([str(self.python), "-c", RENDER, str(notebook)], env=self.env(), cwd=notebook.parent,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.splitlines()[-1])
        return Rendering(out["html"] and Path(out["html"]), out["error"], Path(out["nbconvert"]), out["found"])


def target_site(tmp_path_factory) -> TargetSite:
    """The stack installed with --target from the package index, made once per test session."""

    def make(folder: Path) -> None:
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
                               "--disable-pip-version-check", "--only-binary=:all:", "-c", str(CONSTRAINTS),
                               "--target", str(folder / "site"), *STACK], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"pip install --target failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        venv.create(folder / "python", with_pip=False)
        (folder / "jupyter-data").mkdir()

    folder = made_once(tmp_path_factory, "target-site", make)
    return TargetSite(folder / "site", folder / "python" / "bin" / "python", folder / "jupyter-data")
