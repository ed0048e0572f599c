"""Resume a gate run: reuse every finished case whose inputs are unchanged, rerun the rest.

A case result is reusable when it finished (passed or failed: a verdict, not an
accident), its inputs digest matches what the case would be run with now
(descriptor entry, fixture, golden, model; see ``CaseSpec.inputs_digest``), and
the kernel that would run it holds the same release as the kernel that did. An
earlier result that is not reused is moved to ``cases/superseded/``, never
overwritten, so the audit trail keeps every attempt.
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
from kit.core.records import FAILED, PASSED, CaseResult
from kit.core.results import load_case_result
from kit.core.spec import CaseSpec

SUPERSEDED = "superseded"
# Everything a case leaves in cases/; they move together when the case is rerun.
CASE_FILES = (".json", ".ipynb", ".kernel.log", ".attempts.jsonl")


@dataclass
class Plan:
    reused: dict[str, CaseResult] = field(default_factory=dict)
    rerun: dict[str, str] = field(default_factory=dict)  # case -> why it runs again


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


def plan(cases_dir: Path, specs: Sequence[CaseSpec], fixture_sha256: str, golden_sha256: dict[str, str],
         fingerprints_now: dict[str, str | None], fingerprints_then: dict[str, str | None]) -> Plan:
    """``golden_sha256`` maps each golden file the cases use to its digest: the file, not the entry's kind,
    since two exact entries (or one entry on two runtimes) name different files."""
    out = Plan()
    for spec in specs:
        reason = _why_rerun(cases_dir, spec, fixture_sha256, golden_sha256[spec.golden_path],
                            fingerprints_now.get(spec.kernel), fingerprints_then.get(spec.kernel))
        if isinstance(reason, CaseResult):
            out.reused[spec.name] = reason
        else:
            out.rerun[spec.name] = reason
    return out


def _why_rerun(cases_dir: Path, spec: CaseSpec, fixture: str, golden: str, fp_now: str | None,
               fp_then: str | None) -> CaseResult | str:
    path = cases_dir / f"{spec.name}.json"
    if not path.is_file():
        return "no earlier result"
    try:
        old = load_case_result(path)
    except (OSError, ValueError, TypeError) as exc:
        return f"its earlier result is unreadable ({type(exc).__name__})"
    if old.status not in (PASSED, FAILED):
        return f"its earlier attempt ended with {old.status}"
    if not (cases_dir / f"{spec.name}.ipynb").is_file():
        return "its earlier notebook is missing"
    if old.inputs_digest != spec.inputs_digest(fixture, golden):
        return "its inputs changed: " + _what_changed(old, spec, fixture, golden)
    if fp_now is None or fp_now != fp_then:
        return f"the release in kernel {spec.kernel!r} changed (or was not recorded)"
    return old


def _what_changed(old: CaseResult, spec: CaseSpec, fixture: str, golden: str) -> str:
    changed = [what for what, then, now in (("golden", old.golden_sha256, golden),
                                             ("fixture", old.fixture_sha256, fixture),
                                             ("model", old.model_digest, spec.model_digest)) if then != now]
    return ", ".join(changed) if changed else "descriptor entry"


def set_aside(cases_dir: Path, name: str) -> list[Path]:
    """Move a case's earlier files to cases/superseded/<case>.<n>.* before it runs again."""
    present = [cases_dir / f"{name}{ext}" for ext in CASE_FILES if (cases_dir / f"{name}{ext}").exists()]
    present += sorted(cases_dir.glob(f"{name}.attempt[0-9]*.ipynb"))
    if not present:
        return []
    dest = cases_dir / SUPERSEDED
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
