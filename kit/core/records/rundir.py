"""A run directory in one place: the names of its files (docs/architecture.md, Data formats), the paths to them,
the rule that keeps a path inside its run, and a control's record of its two runs.

Gate runs, control directories and refresh directories are read back by results, the summary, the history, the
baselines archive and control; every reader and writer takes the names and paths from here, so that one rule keeps
every path inside its root. A run directory is input from the world (copied by hand, published, edited): a case
name in a manifest is used as a file name, so ``../../../x`` or an absolute name would read or write outside the
run; a link may lead out of the folder of runs or back into itself. Each of these is refused here in one line
naming what and where.

Stdlib only: kernels import kit.core. A folder of runs is walked by kit.core.records.store, the one way the kit reads
a folder of runs, here or in a bucket.
"""

from __future__ import annotations

import os
import posixpath
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping, Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import read_json_input
from kit.core.records.paths import display, separator_or_control
from kit.core.records.recordcheck import Wrong, mapping, text


class RunRole(StrEnum):
    """Which run a case result was read from, as the baselines archive's observations and the history's rows spell
    it: a gate run, one side of a control, or (the archive's only) a calibration's clean sample."""

    GATE_RUN = "gate run"
    CONTROL_CANDIDATE = "control candidate"
    CONTROL_CURRENT = "control current"
    CALIBRATION_SAMPLE = "calibration sample"


MANIFEST = "manifest.json"        # gate run: descriptor, digests, kit version, host, times
RESULT = "result.json"            # gate run: the verdict and every case result
EVIDENCE = "evidence.md"          # a paragraph for an issue comment or a pin PR
SUMMARY_NOTEBOOK = "summary.ipynb"
SUMMARY_HTML = "summary.html"
# There while a run's summary is owed: written when it starts (or when a stopped run skips it), removed once it is
# built or its failure is said; left by a run stopped meanwhile, so that `report --attach` can say so.
SUMMARY_PENDING = "summary.pending"
CASES = "cases"                   # cases/<case>.ipynb, cases/<case>.json, cases/<case>.log
MODEL_DIGESTS = "model-digests.json"  # gate run: the preflight's file digests, which the kernels reuse
CONTROL = "control.json"          # control directory: the control's record
CONTROL_NOTEBOOK = "control.ipynb"
DIAGNOSIS = "diagnosis.json"
REFRESH = "refresh.json"          # refresh directory: the refresh's record
BISECT = "bisect.json"            # bisect directory: the inputs, every state and every finished step
SUMMARY_MARKDOWN = "summary.md"   # bisect directory: the answer and every step, for people
LOCALIZE = "localize.json"        # localize directory: the curves, the named point, the case's verdict
REGEN_REPORT = "regen.md"
FIGURES = "figures"               # the summary's plots as PNG and SVG files
LOCK = ".lock"
TREND = "trend.json"              # gate run: the steps up in a case's error this run completed (kit.gate.trend)
BAD_MARK = "bad.json"             # gate run: a person's mark that the run is known bad, and why (kit.baselines.marks)
PUBLISHED = "published.json"     # run or control: where and when it was copied to a store, or why not
# gate run: a DSSE envelope signing its root digest (kit.gate.attest); outside the seal, since it signs the seal
ATTESTATION = "attestation.dsse.json"


def new_run_dir(kind: str, name: str, root: str = "runs") -> Path:
    """A fresh directory name under ``root`` for one command's run: ``<kind>-<name>-<time>-<4 hex>``
    (no kind prefix for a gate run, whose directories are the most common). The random suffix keeps two
    runs started in the same second apart; the time keeps a listing in the order they ran."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root) / "-".join(filter(None, (kind, name, stamp, os.urandom(2).hex())))


def control_run_names(doc: Any) -> tuple[str, str]:
    """The folders of a control's current and candidate runs, as its record (``control.json``) names them;
    Wrong at the first key that is not what a control writes. A name is one folder inside the control
    directory: a record that points elsewhere would make its readers read another run as this control's."""
    d = mapping(doc, "")
    current, candidate = text(d.get("current"), "current"), text(d.get("candidate"), "candidate")
    runs = mapping(d.get("runs"), "runs")
    names = tuple(text(runs.get(release), f"runs.{release}") for release in (current, candidate))
    for release, name in zip((current, candidate), names):
        if Path(name).name != name or name in (".", ".."):
            raise Wrong(f"runs.{release}", "expected the name of a folder in the control directory", name)
    return names[0], names[1]


# The record that makes a folder a run directory of each kind, in the order a folder is recognised (a control's
# record before any manifest, as in kit.core.records.store's ``walk``); the names are those commands and notebooks
# use for the kinds.
RECORDS = {"control": CONTROL, "gate": MANIFEST, "refresh": REFRESH, "localize": LOCALIZE, "bisect": BISECT}

def run_kind_of(folder: str | Path) -> str | None:
    """Which kind of run directory ``folder`` is (a key of ``RECORDS``), by the record it holds; None for none."""
    return next((kind for kind, record in RECORDS.items() if (Path(folder) / record).is_file()), None)


def name_problem(name: object) -> str | None:
    """Why ``name`` (a case name a manifest lists) cannot be one file's name inside a run's cases/, or None. Such a
    name is joined to a path: ``../x`` or ``/x`` would read or write outside the run directory."""
    if not isinstance(name, str) or not name:
        return "it is empty" if name == "" else "it is not a string"
    if name in (".", ".."):
        return f"{name} names a folder, not a case"
    return separator_or_control(name)


def safe_name(name: str, where: str) -> str:
    """``name`` as one file name in a run directory, or one line naming it, ``where`` it came from and why not."""
    problem = name_problem(name)
    if problem:
        raise BadInput(f"{where}: case name {name!r} is not a file name inside the run directory ({problem}); "
                       "refused")
    return name


# What a case leaves in cases/, as suffixes of its name; they move together when the case is run again.
CASE_RESULT = ".json"              # the case's result (kit.core.records.records.CaseResult)
CASE_NOTEBOOK = ".ipynb"           # the executed notebook, saved after every cell
KERNEL_LOG = ".kernel.log"         # what the case's kernel and engine printed
ATTEMPTS = ".attempts.jsonl"       # Ray only: one line per attempt of the case's task
# what its verdict was judged from (kit.core.verdict.caseevidence): `verify` judges it again
CASE_EVIDENCE = ".evidence.json"
CASE_FILES = (CASE_RESULT, CASE_NOTEBOOK, KERNEL_LOG, ATTEMPTS, CASE_EVIDENCE)
# The files a finished run's verdict rests on, per case: its result, what it was judged from and its in-kernel
# reference. The manifest seals them by digest, and itself beside them (``sealed``, ``root_digest``); `parity-kit
# verify` checks them.
CASE_REFERENCE = ".reference.json"
SEALED = (CASE_RESULT, CASE_EVIDENCE, CASE_REFERENCE)
# The manifest's keys that hold its seal; its own digest is of everything else in it (``manifest_digest``).
SEAL_KEYS = ("files", "root_sha256")
SUPERSEDED = "superseded"          # cases/superseded/<case>.<n>.*: a case's earlier files, before --resume ran it
RETRIED = "retried"                # cases/retried/<case>.<n>.*: an attempt's files, before the gate's retry ran it


def case_file(cases_dir: str | Path, case: str, suffix: str = CASE_RESULT) -> Path:
    """``cases/<case><suffix>`` of a run: where its executor writes a case's result (``CASE_RESULT``), notebook
    (``CASE_NOTEBOOK``) and logs. A case name that would lead out of ``cases_dir`` is refused."""
    return Path(cases_dir) / f"{safe_name(case, str(cases_dir))}{suffix}"


def kernel_log(folder: str | Path, name: str) -> Path:
    """``<folder>/<name>.kernel.log``: where what a notebook's kernel (a case's, a summary's, a command's) and its
    engine printed is kept. Every such log is named here, so that the files a run leaves are found by one rule."""
    return case_file(folder, name, KERNEL_LOG)


def attempt_notebook(cases_dir: str | Path, case: str, attempt: int) -> Path:
    """``cases/<case>.attempt<n>.ipynb``: the partial notebook of a Ray task's attempt whose worker was lost."""
    return case_file(cases_dir, case, f".attempt{attempt}{CASE_NOTEBOOK}")


def case_files_present(cases_dir: str | Path, case: str) -> list[Path]:
    """Every file a case left in ``cases_dir``: those of ``CASE_FILES`` that exist, then its attempts' notebooks."""
    present = [p for p in (case_file(cases_dir, case, ext) for ext in CASE_FILES) if p.exists()]
    return present + sorted(Path(cases_dir).glob(f"{safe_name(case, str(cases_dir))}.attempt[0-9]*{CASE_NOTEBOOK}"))


def case_member(run: str, case: str, suffix: str = CASE_RESULT) -> str:
    """The same file as ``case_file``, as a path relative to a store's root (POSIX separators)."""
    return posixpath.join(run, CASES, f"{safe_name(case, posixpath.join(run, CASES) or CASES)}{suffix}")


def inside(path: str | Path, root: str | Path, what: str = "file") -> Path:
    """``path`` once its links are resolved, refused in one line when that leads out of ``root`` (also resolved):
    a run's files are its own, and a link to elsewhere makes a reader read something else as the run's."""
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    if leads_out(real, top):
        raise BadInput(f"{display(path)}: a link leading out of {display(root)} (to {real}); the {what} is refused")
    return real


def leads_out(real: str | Path, top: str | Path) -> bool:
    """Whether the resolved path ``real`` lies outside the resolved folder ``top``: the one test of containment
    (``inside`` for a file, the walk for a folder a link leads to)."""
    real, top = Path(real), Path(top)
    return real != top and not real.is_relative_to(top)


def member(root: str | Path, relative: str) -> Path:
    """The file ``relative`` names below ``root``, which must stay inside it: no absolute name, no ``..``, and no
    link that leads out (``inside``)."""
    parts = relative.replace("\\", "/").split("/")
    if relative.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise BadInput(f"{display(root)}: {relative!r} is not a path inside it; refused")
    path = Path(root, *[p for p in parts if p not in ("", ".")])
    inside(path, root)
    return path


def control_run_dirs(control_dir: str | Path) -> tuple[Path, Path]:
    """A control directory's current and candidate run directories, as its record (``control.json``) names them;
    one line naming the record and the key when it is not one a control writes."""
    control_dir = Path(control_dir)
    path = control_dir / CONTROL
    try:
        current, candidate = control_run_names(read_json_input(path, display(path)))
    except Wrong as wrong:
        raise BadInput(f"{display(path)}: malformed control record: {wrong.text}") from None
    return member(control_dir, current), member(control_dir, candidate)


def sealed_files(run_dir: str | Path, cases: Sequence[str]) -> dict[str, str]:
    """Each file of ``SEALED`` that ``cases`` left in the run, by its path inside the run (``cases/x.json``): its
    SHA-256."""
    from kit.core.records.jsonio import sha256_file

    run_dir = Path(run_dir)
    out = {}
    for case in cases:
        for suffix in SEALED:
            path = case_file(run_dir / CASES, case, suffix)
            if path.is_file():
                out[path.relative_to(run_dir).as_posix()] = sha256_file(path)
    return out


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """The SHA-256 of a manifest less its seal (``SEAL_KEYS``), as canonical JSON: what its ``files`` seal it by,
    under its own name. The manifest names the descriptor, the cases, the hardware and the baselines the verdict
    was resolved for; sealed, none of them changes without the root digest changing."""
    from kit.core.records.jsonio import canonical_bytes, sha256_bytes

    return sha256_bytes(canonical_bytes({k: v for k, v in manifest.items() if k not in SEAL_KEYS}))


def sealed(run_dir: str | Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` with its seal: ``files`` (each file of ``SEALED`` its cases left in the run, and the manifest's
    own digest under MANIFEST) and their ``root_sha256``."""
    files = {**sealed_files(run_dir, manifest["cases"]), MANIFEST: manifest_digest(manifest)}
    return {**manifest, "files": files, "root_sha256": root_digest(files)}


def root_digest(files: dict[str, str]) -> str:
    """The run's root digest: the SHA-256 of its sealed files' digests, as canonical JSON. One value that names
    every file the verdict rests on: quoted in the evidence and the summary, so a copy edited since shows."""
    from kit.core.records.jsonio import canonical_bytes, sha256_bytes

    return sha256_bytes(canonical_bytes(dict(sorted(files.items()))))

