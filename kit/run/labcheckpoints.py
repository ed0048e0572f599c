"""JupyterLab's checkpoints, kept outside the folder `parity-kit lab` serves.

jupyter_server keeps a notebook's checkpoint beside it, in ``.ipynb_checkpoints/``: opened in a run directory (the
audit artifact), that is a folder the run never wrote, zipped and published with it. Its ``FileCheckpoints.root_dir``
setting alone does not move them for good: where the folder under that root does not exist yet (every one, at
first), jupyter_server writes to the system's temporary folder instead, shared by every user of a node. These
checkpoints are kept under ``root_dir`` by the notebook's own path, their folder made as needed. The server imports
this class by name (``lab_options``), so it runs in JupyterLab's process, never in a command's.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from jupyter_core.utils import ensure_dir_exists
from jupyter_server.services.contents.filecheckpoints import AsyncFileCheckpoints


class OutsideCheckpoints(AsyncFileCheckpoints):
    """A notebook's checkpoint at ``root_dir/<its folder>/<name>-<id><ext>``."""

    def checkpoint_path(self, checkpoint_id: str, path: str) -> str:
        """Where JupyterLab keeps a notebook's checkpoint: beside it under the served root, never inside a
        run directory, whose files are sealed by digest."""
        parent, _, name = path.strip("/").rpartition("/")
        base, ext = os.path.splitext(name)
        folder = self._get_os_path(path=parent)  # under root_dir; a path leading out of it is refused (404)
        with self.perm_to_403():
            ensure_dir_exists(folder)
        return os.path.join(folder, f"{base}-{checkpoint_id}{ext}")


def checkpoint_root(served: Path) -> Path:
    """Where the checkpoints of the project at ``served`` go: the user's cache, one folder per project (two
    checkouts' notebooks of one name never share a checkpoint)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(served.resolve()).encode("utf-8")).hexdigest()[:16]
    return base / "parity-kit" / "lab-checkpoints" / digest


def lab_options(served: Path) -> list[str]:
    """The `jupyter lab` options that keep its checkpoints out of ``served`` (and so out of every run directory)."""
    return [f"--FileContentsManager.checkpoints_class={OutsideCheckpoints.__module__}.{OutsideCheckpoints.__name__}",
            f"--{OutsideCheckpoints.__name__}.root_dir={checkpoint_root(served)}"]
