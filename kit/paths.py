"""Where the project's own files are: notebooks, descriptors, the embedded default."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = PROJECT_ROOT / "notebooks"
DESCRIPTORS = PROJECT_ROOT / "descriptors"
EMBEDDED_DESCRIPTOR = DESCRIPTORS / "tiny-cpu.toml"
MAIN_KERNEL = "parity-kit"
LEVANTER_KERNEL = "parity-kit-levanter"  # .venv-levanter's kernel, registered in .venv


def backend_notebook(backend: str) -> Path:
    return NOTEBOOKS / f"parity_{backend}.ipynb"


def claim_empty_dir(path: str | Path, directory: str, run: str) -> Path:
    """Create ``path`` for a new ``run``, refusing one that already holds anything:
    an earlier run's artifacts are never written over."""
    from kit.errors import BadInput

    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise BadInput(f"{directory} {path} exists and is not empty; a {run} never writes over an "
                       "earlier one (choose another --out)")
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def display(path: str | Path) -> str:
    """A path as a reader wants it in a message: relative to the working directory when inside it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)
