"""The main kernel for an installation that never registered one (a plain `pip install parity-kit`).

Cases that run in the main environment, and the summary and control notebooks, run in the kernel
named ``parity-kit``. A checkout's `make` registers it in `.venv/`; pip registers no kernel, and a
separate `parity-kit kernel install` step would be one more thing for every user and CI job to
forget, whose omission the first gate after an install would refuse. Registering one silently
into the environment or the user's home would outlive the run and point at a stale interpreter
once the venv moves. So when no kernel of that name is registered, the gate writes a spec for its
own interpreter into a temporary folder and puts that folder on ``JUPYTER_PATH`` for this process:
papermill's kernel managers and the kernels they start (which inherit the environment) find it,
and it is removed when the process exits. A registered kernel of that name always wins: it may
name another environment on purpose.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kit.core.records import paths

JUPYTER_PATH_ENV = "JUPYTER_PATH"  # jupyter_core's search path for data folders (kernels/ among them)


@dataclass(frozen=True)
class ProvidedKernel:
    name: str
    spec_dir: Path  # <JUPYTER_PATH entry>/kernels/<name>
    python: str

    def describe(self) -> str:
        """Where the kernel comes from, in words for the preflight's line."""
        return f"provided by the gate for {self.python}, for the run only"


def registered_kernels() -> dict[str, str]:
    """The Jupyter kernels installed where this environment's Jupyter looks, by name: what a case's kernel is
    looked up in."""
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().find_kernel_specs()


@functools.cache
def provide_main_kernel() -> ProvidedKernel | None:
    """Make the main kernel findable, once per process; None when one is registered already."""
    if paths.MAIN_KERNEL in registered_kernels():
        return None
    from ipykernel.kernelspec import write_kernel_spec

    root = Path(tempfile.mkdtemp(prefix="parity-kit-jupyter-"))
    atexit.register(shutil.rmtree, root, True)
    spec_dir = root / "kernels" / paths.MAIN_KERNEL
    write_kernel_spec(spec_dir, overrides={"display_name": "parity-kit (this interpreter)"})
    earlier = os.environ.get(JUPYTER_PATH_ENV)
    os.environ[JUPYTER_PATH_ENV] = os.pathsep.join([str(root), earlier] if earlier else [str(root)])
    return ProvidedKernel(paths.MAIN_KERNEL, spec_dir, sys.executable)
