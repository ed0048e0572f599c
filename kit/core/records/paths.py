"""Where the project's own files are: notebooks, descriptors, fixtures, goldens, the embedded model.

They live at the top of the repository, where users look for them. An installed wheel carries
the same folders as package data under ``kit/_data/`` (the build maps them there), so the two
cases are told apart here, once: the packaged copy when it exists, else the checkout the
package was imported from (an editable install or a plain checkout).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def _data_root() -> Path:
    packaged = Path(str(resources.files("kit") / "_data"))
    checkout = Path(__file__).resolve().parents[3]  # kit/core/records/paths.py
    # A wheel whose data went missing must not take site-packages for a checkout: it keeps the
    # packaged root, and require_embedded_data names that folder.
    if packaged.is_dir() or not (checkout / "pyproject.toml").is_file():
        return packaged
    return checkout


DATA_ROOT = _data_root()
# The repository checkout when running from one (None for a wheel install): JupyterLab's root and
# the place `runs/` goes by default.
CHECKOUT: Path | None = None if DATA_ROOT.name == "_data" else DATA_ROOT
NOTEBOOKS = DATA_ROOT / "notebooks"
DESCRIPTORS = DATA_ROOT / "descriptors"
EMBEDDED_DESCRIPTOR = DESCRIPTORS / "tiny-cpu.toml"
MAIN_KERNEL = "parity-kit"
LEVANTER_KERNEL = "parity-kit-levanter"  # the Levanter environment's kernel, registered beside the main one


def require_embedded_data() -> None:
    """Refuse, in one line, an install whose embedded data is missing (a wheel built without it)."""
    from kit.core.errors import BadInput

    missing = [name for name in ("notebooks", "descriptors") if not (DATA_ROOT / name).is_dir()]
    if missing:
        raise BadInput(f"this installation of parity-kit has no embedded {' or '.join(missing)} under {DATA_ROOT}: "
                       "reinstall it from a wheel built with `python -m build` (or pass a descriptor and notebooks)")


# Set by `parity-kit lab` for the kernels of the JupyterLab it starts: the folder it serves. A wheel install has
# no checkout whose runs/ a notebook could look in, and JupyterLab starts each kernel in its notebook's folder.
LAB_ROOT_ENV = "PARITY_KIT_LAB_ROOT"


def runs_root() -> Path:
    """Where a notebook run by hand looks for the newest run and puts what it writes: the checkout's runs/ (a
    kernel starts in notebooks/, whose ../runs a copied notebook does not have), or, installed from a wheel,
    runs/ in the folder `parity-kit lab` serves (else the working directory), where the commands put theirs."""
    import os

    if CHECKOUT is not None:
        return CHECKOUT / "runs"
    return Path(os.environ.get(LAB_ROOT_ENV) or Path.cwd()).resolve() / "runs"


def descriptor_path(given: str | Path | None = None) -> Path:
    """The descriptor a notebook's ``descriptor`` parameter names: None, the embedded descriptor; a file that
    exists, itself; else the name of an embedded descriptor (``tiny-jax``, ``tiny-jax.toml``). A notebook's
    defaults name the embedded ones, so that they hold in whatever folder its kernel starts (a checkout's
    notebooks/, a copy, a wheel's package data). Anything else is refused in one line."""
    from kit.core.errors import BadInput

    if given is None:
        return EMBEDDED_DESCRIPTOR
    path = Path(given).expanduser()
    if path.is_file():
        return path.resolve()
    if path.name == str(given):
        for candidate in (DESCRIPTORS / path.name, DESCRIPTORS / f"{path.name}.toml"):
            if candidate.is_file():
                return candidate
    embedded = sorted(p.stem for p in DESCRIPTORS.glob("*.toml"))
    raise BadInput(f"descriptor {given}: no such file (from {Path.cwd()}) and no embedded descriptor of that name "
                   f"(embedded: {', '.join(embedded) or 'none'})")


def claim_empty_dir(path: str | Path, directory: str, run: str, hint: str = "choose another --out") -> Path:
    """Create ``path`` for a new ``run``, refusing one that already holds anything: an earlier run's artifacts are
    never written over (``hint``: what the refusal tells the user to do instead). The one emptiness test of the
    kit (kit.run.lifecycle.claim names a live holder first)."""
    path = Path(path)
    check_dir_target(path, directory)
    refuse_full(path, directory, run, hint)
    make_dir(path, directory)
    return path.resolve()


def refuse_full(path: str | Path, directory: str, run: str, hint: str = "choose another --out") -> None:
    """Refuse ``path`` in one line when it holds anything (``claim_empty_dir``'s test, for a command that claims
    its folder only once it has something to write and refuses a full one before it starts)."""
    from kit.core.errors import BadInput

    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise BadInput(f"{directory} {path} exists and is not empty; a {run} never writes over an "
                       f"earlier one ({hint})")


def check_dir_target(path: str | Path, what: str) -> None:
    """Refuse, before anything runs, a folder the command could not create or write into: ``path``
    or the nearest folder above it that exists is a file (or a dangling link), or is not writable
    (permissions, a read-only filesystem). Writes nothing."""
    import os

    from kit.core.errors import BadInput

    path = Path(path)
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    place = "" if existing == path else f": {existing}"
    if existing.is_symlink() and not existing.exists():
        raise BadInput(f"{what} {path}{place} is a link to nothing")
    if not existing.is_dir():
        raise BadInput(f"{what} {path}{place} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"{what} {path}{place} is not writable (its permissions or a read-only filesystem)")


HOLDS_SEPARATOR = "it holds a path separator"


def plain_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one folder's name inside another, or None. A name that holds a separator, is
    ``.`` or ``..``, or is empty names another place than a folder of its own (``../../x`` writes outside the
    parent); one that starts with a dash reads as an option to the shell commands a person retypes."""
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return f"{name} names a folder that is already there"
    problem = separator_or_control(name)
    if name.startswith("-") and problem != HOLDS_SEPARATOR:
        return "it starts with a dash"
    return problem


def separator_or_control(name: str) -> str | None:
    """Why ``name`` cannot be one component of a path however it is used (a folder of ours, a case's file), or
    None: a separator makes it several components, a control character garbles every line that names it."""
    if "/" in name or "\\" in name:
        return HOLDS_SEPARATOR
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return "it holds a control character"
    return None


def check_plain_name(name: str, what: str) -> None:
    """Refuse, before anything runs, a ``name`` that is made a folder's name but would not be a plain one."""
    from kit.core.errors import BadInput

    problem = plain_name_problem(name)
    if problem:
        raise BadInput(f"{what} {name!r} is not a plain name for a folder: {problem}")


def make_dir(path: str | Path, what: str) -> Path:
    """mkdir -p, where a failure (a race with the check above, a full disk) is one line, not a traceback."""
    from kit.core.errors import BadInput

    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"{what} {path} cannot be created: {exc.strerror or exc}") from None
    return Path(path)


def real_outside(path: Path, root: Path) -> Path | None:
    """Where ``path`` really is, when a link takes it outside ``root`` (a resolved folder); None when it stays
    inside. A run's copies (a zip to attach, a published run) carry only the run's own files."""
    target = path.resolve()
    return None if target.is_relative_to(root) else target


def display(path: str | Path) -> str:
    """A path as a reader wants it in a message: relative to the working directory when inside it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, RuntimeError, OSError):  # outside it; a link loop, a vanished folder: shown as given
        return str(p)
