"""Resume a gate run: reuse every finished case whose inputs are unchanged, rerun the rest.

A case result is reusable when it finished (passed or failed: a verdict, not an
accident), its inputs digest matches what the case would be run with now
(descriptor entry, fixture, golden, model; see ``CaseSpec.inputs_digest``), and
the kernel that would run it holds the same release as the kernel that did; and
what was left on disk is whole: the result loads and covers the case's prompts,
the executed notebook parses (a full disk can truncate it). An earlier result
that is not reused is moved to ``cases/superseded/``, never overwritten, so the
audit trail keeps every attempt.

A resumed run's verdict covers every case of its directory. ``--case`` picks the
cases that may run again; every other case of the directory keeps what it had: a
result that still holds is reused, an earlier error or timeout stays one (the
verdict stays incomplete), an earlier failure stays one until the case itself is
run again (docs/gate.md, "Resume"), and a case with no result that
holds counts as missing, its earlier files set aside like a rerun case's, so that
no reader of the folder shows a verdict the run does not count. So a resume can
never drop a failed case out of the verdict, nor call a recorded failure missing.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kit import __version__
from kit.core.records import rundir
from kit.core.verdict.coverage import Expected, coverage_problem, rejudged
from kit.core.errors import BadInput
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import RunDir, kernel_result
from kit.core.records.spec import CaseSpec
from kit.descriptor.plan import Outline


@dataclass
class ResumePlan:
    reused: dict[str, CaseResult] = field(default_factory=dict)
    rerun: dict[str, str] = field(default_factory=dict)  # case -> why it runs again
    kept: dict[str, str] = field(default_factory=dict)  # not selected: case -> why it neither runs nor is reused
    # Of those, the earlier errors, timeouts and failures, kept as they are: each still says what happened.
    kept_results: dict[str, CaseResult] = field(default_factory=dict)

    @property
    def superseded(self) -> list[str]:
        """The cases whose earlier files go to superseded/: those that run again, and those counted missing."""
        return [*self.rerun, *(name for name in self.kept if name not in self.kept_results)]


def earlier_manifest(run_dir: Path, desc_name: str) -> dict:
    """The manifest of the run being resumed, refused unless it is a gate run of this descriptor."""
    if not (run_dir / rundir.MANIFEST).is_file():
        raise BadInput(f"--resume {run_dir}: not a gate run directory (it has no manifest.json)")
    earlier = RunDir.local(run_dir).manifest_doc(f"--resume {run_dir}: its {rundir.MANIFEST}")
    if not isinstance(earlier, dict):
        raise BadInput(f"--resume {run_dir}: its {rundir.MANIFEST} is not a JSON object")
    if earlier.get("name") != desc_name:
        raise BadInput(f"--resume {run_dir}: it holds a run of descriptor {earlier.get('name')!r}, "
                       f"not {desc_name!r}")
    return earlier


def covered_cases(run_dir: Path, stated: Outline, only: Sequence[str] | None) -> list[str] | None:
    """The cases a resumed run covers: every case of its directory, and those ``--case`` adds (all of the
    descriptor's without ``--case``). None: every case of the descriptor."""
    earlier = list(earlier_manifest(run_dir, stated.name).get("cases", []))
    gone = [n for n in earlier if n not in stated.cases]
    if gone:
        raise BadInput(f"--resume {run_dir}: its run has case {gone[0]!r}, which {stated.path.name} no longer "
                       "defines; a resumed run covers every case of its directory (start a new run with --out)")
    if not only:
        return None
    return [*earlier, *(n for n in only if n not in earlier)]


def release_fingerprint(kernel: str) -> str | None:
    """A digest of what a kernel runs: its spec, and the name-version of every distribution in its
    environment (the dist-info folders, read without starting the kernel). None if it is not installed."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel)
    except NoSuchKernel:
        return None
    h = hashlib.sha256(json.dumps(spec.to_dict(), sort_keys=True).encode())
    h.update(__version__.encode())
    exe = spec.argv[0] if spec.argv else ""
    exe = exe if os.path.isabs(exe) else (shutil.which(exe) or "")
    if exe:
        # Not resolved: a venv's bin/python links to the base interpreter, whose prefix is not the venv's.
        prefix = Path(exe).parent.parent
        for dist in sorted(glob.glob(str(prefix / "lib" / "python*" / "site-packages" / "*.dist-info"))):
            h.update(Path(dist).name.encode() + b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class ResumeInputs:
    """What a resumed run's cases are weighed with: the earlier run's cases folder, the cases now, the fixture's and
    each golden file's digest, the kernels' fingerprints now and then, what each verdict must cover (``expected``),
    the custom notebooks' digests then and now, and the cases that may run again (``selected``; None: all)."""

    cases_dir: Path
    specs: Sequence[CaseSpec]
    fixture_sha256: str
    golden_sha256: dict[str, str]
    fingerprints_now: dict[str, str | None]
    fingerprints_then: dict[str, str | None]
    expected: dict[str, Expected] | None = None
    notebooks_then: dict[str, str] | None = None
    notebooks_now: dict[str, str] | None = None
    selected: Sequence[str] | None = None


def plan(request: ResumeInputs) -> ResumePlan:
    """``golden_sha256`` maps each golden file the cases use to its digest: the file, not the entry's kind,
    since two exact entries (or one entry on two runtimes) name different files. ``notebooks_*`` are the
    digests of custom case notebooks (then: the earlier manifest's); ``selected`` the cases that may run
    again (None: all)."""
    cases_dir, specs, fixture_sha256 = request.cases_dir, request.specs, request.fixture_sha256
    golden_sha256, fingerprints_now = request.golden_sha256, request.fingerprints_now
    fingerprints_then, expected, notebooks_then = request.fingerprints_then, request.expected, request.notebooks_then
    notebooks_now, selected = request.notebooks_now, request.selected
    out = ResumePlan()
    for spec in specs:
        if spec.no_baseline:  # nothing ran, nothing to reuse: recorded again when the run is prepared
            continue
        old, reason = _assess(cases_dir, spec, fixture_sha256, golden_sha256.get(spec.golden_path, ""),
                              fingerprints_now.get(spec.kernel), fingerprints_then.get(spec.kernel),
                              (expected or {}).get(spec.name))
        if reason is None and (notebooks_then or {}).get(spec.name) != (notebooks_now or {}).get(spec.name):
            reason = "its custom notebook changed"
        if reason is None:
            assert old is not None  # _assess finds no reason against a result only in one it read
            out.reused[spec.name] = old
        elif selected is None or spec.name in selected:
            out.rerun[spec.name] = reason
        elif old is not None and old.status in (Status.ERROR, Status.TIMEOUT):
            out.kept[spec.name] = f"not selected by --case; {reason}"
            out.kept_results[spec.name] = old
        elif old is not None and old.status == Status.FAILED and old.case == spec.name:
            out.kept[spec.name] = f"not selected by --case; {reason}: its recorded failure stands until it runs again"
            out.kept_results[spec.name] = old
        else:
            out.kept[spec.name] = f"not selected by --case; {reason}: counted missing"
    return out


def _assess(cases_dir: Path, spec: CaseSpec, fixture: str, golden: str, fp_now: str | None,
            fp_then: str | None, expected: Expected | None) -> tuple[CaseResult | None, str | None]:
    """The earlier result (None if there is none to read) and why it cannot be reused (None: it can)."""
    try:
        old = kernel_result(cases_dir, spec.name)
    except (OSError, BadInput, ValueError, TypeError, KeyError) as exc:
        return None, f"its earlier result is unreadable ({type(exc).__name__})"
    if old is None:
        return None, "no earlier result"
    if old.status not in (Status.PASSED, Status.FAILED):
        return old, f"its earlier attempt ended with {old.status}"
    broken = _notebook_problem(rundir.case_file(cases_dir, spec.name, rundir.CASE_NOTEBOOK))
    if broken:
        return old, broken
    if old.inputs_digest != spec.inputs_digest(fixture, golden):
        return old, "its inputs changed: " + _what_changed(old, spec, fixture, golden)
    if fp_now is None or fp_now != fp_then:
        return old, f"the release in kernel {spec.kernel!r} changed (or was not recorded)"
    problem = coverage_problem(old, expected) if expected is not None else None
    if problem is not None:
        return old, f"its earlier result does not hold: {problem.text}"
    if expected is not None and rejudged(old, expected) is not old:  # a verdict written past the executor
        return old, "its earlier result does not hold: it says passed over prompts its own numbers fail"
    return old, None


def _notebook_problem(path: Path) -> str | None:
    """Why an executed notebook cannot stand as a reused case's evidence (a full disk may have cut it short)."""
    import nbformat

    if not path.is_file():
        return "its earlier notebook is missing"
    try:
        nbformat.read(str(path), as_version=4)
    except Exception as exc:  # nbformat raises several types (NotJSONError, ValidationError, ...)
        return f"its earlier notebook is unreadable ({type(exc).__name__})"
    return None


def _what_changed(old: CaseResult, spec: CaseSpec, fixture: str, golden: str) -> str:
    changed = [what for what, then, now in (("golden", old.golden_sha256, golden),
                                             ("fixture", old.fixture_sha256, fixture),
                                             ("model", old.model_digest, spec.model_digest)) if then != now]
    return ", ".join(changed) if changed else "descriptor entry"


def set_aside(cases_dir: Path, name: str, folder: str = rundir.SUPERSEDED) -> list[Path]:
    """Move a case's earlier files to cases/<folder>/<case>.<n>.* (superseded/ by default) before it runs
    again; ``n`` counts up past every earlier set of them, so none is ever written over."""
    present = rundir.case_files_present(cases_dir, name)
    if not present:
        return []
    dest = cases_dir / folder
    dest.mkdir(exist_ok=True)
    n = 1
    while any(dest.glob(f"{name}.{n}.*")):
        n += 1
    moved = []
    for p in present:
        target = dest / f"{name}.{n}{p.name[len(name):]}"
        os.replace(p, target)
        moved.append(target)
    return moved
