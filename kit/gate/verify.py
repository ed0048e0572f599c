"""`parity-kit verify RUN_DIR | ZIP`: a finished gate run judged again from what it kept, with no engine.

A summary.html or an `--attach` zip on an issue shows a verdict and digests; nothing in it proved that the verdict
follows from the numbers, or that no case file was edited since. Here it is re-derived:

- every file the verdict rests on (each case's result, its evidence and its in-kernel reference) is checked
  against the digest the run's manifest sealed it with when the run finished, and their root digest (quoted in
  evidence.md and the summary) is worked out again;
- every judged case is judged again from its evidence (kit.core.caseevidence: what its engine observed, the
  golden's tops, the bounds and calibration it was judged under) by the kernel's own judge
  (kit.core.verdict.judge), and what that gives must be what the case recorded: the same failures, the same
  largest error per prompt, a status that follows from them;
- the gate's verdict is worked out again from the cases, and must be the one result.json states.

The answer is "verified: <verdict>" with the root digest, or one line per file and case that does not re-derive.
A zip is opened in a temporary folder, after every member is checked to stay inside it (no absolute names, no
``..``, no links), and removed after.
"""

from __future__ import annotations

import math
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kit.core import rundir
from kit.core.caseevidence import load_evidence
from kit.core.errors import BadInput
from kit.core.jsonio import read_json_input
from kit.core.paths import display
from kit.core.records import BORROWED, FAILED, INCONCLUSIVE, PASSED, CaseResult
from kit.core.results import RunView, gate_verdict, read_run
from kit.core.verdict.failure import texts
from kit.core.verdict.judge import Judged

JUDGED = (PASSED, FAILED, INCONCLUSIVE, BORROWED)  # the statuses a kernel's judgement decided
# What each judgement allows the case to have recorded: the executor may say more (a pass over a detectable limit
# is inconclusive, a failure under another class's bounds is borrowed), never the opposite.
ALLOWED = {True: (FAILED, BORROWED), False: (PASSED, INCONCLUSIVE)}


@dataclass
class Verified:
    """What verifying a run found: the verdict re-derived, the root digest worked out again, every problem."""

    source: str
    verdict: str | None = None
    root: str | None = None
    judged: int = 0
    files: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        if self.ok:
            return [f"verified: {self.verdict} ({self.source}: {self.judged} cases judged again from their evidence, "
                    f"{self.files} files match their digests; root digest {self.root})"]
        return [f"not verified: {self.source}: {len(self.problems)} problem(s)", *(f"  {p}" for p in self.problems)]


def verify(path: str | Path) -> Verified:
    """Verify the run directory or run zip at ``path`` (see the module). Bad input (not a run, a zip that is
    truncated or leads out of its folder, a run whose manifest seals nothing) is one line, BadInput."""
    path = Path(path)
    if path.is_file():
        with tempfile.TemporaryDirectory(prefix="parity-kit-verify-") as tmp:
            return verify_run(extract_run(path, Path(tmp)), display(path))
    if not path.is_dir():
        raise BadInput(f"{display(path)}: no such run directory or zip")
    return verify_run(path, display(path))


def extract_run(zip_path: Path, into: Path) -> Path:
    """The run folder of a run's zip, extracted into ``into`` once every member was checked to stay inside it."""
    shown = display(zip_path)
    try:
        with zipfile.ZipFile(zip_path) as z:
            members = z.infolist()
            for info in members:
                parts = PurePosixPath(info.filename).parts
                if info.filename.startswith("/") or "\\" in info.filename or ".." in parts:
                    raise BadInput(f"{shown}: member {info.filename!r} leads out of its folder; nothing extracted")
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise BadInput(f"{shown}: member {info.filename!r} is a link; a run's zip holds its own files "
                                   "only; nothing extracted")
            tops = {PurePosixPath(info.filename).parts[0] for info in members if info.filename.strip("/")}
            if len(tops) != 1:
                raise BadInput(f"{shown}: not a run's zip (`parity-kit report --attach` puts one folder at its root; "
                               f"this one has {len(tops)})")
            z.extractall(into)
    except zipfile.BadZipFile as exc:
        raise BadInput(f"{shown}: not a readable zip ({exc}): truncated, or not a zip") from None
    except (OSError, EOFError) as exc:
        raise BadInput(f"{shown}: could not be read whole ({exc}): truncated?") from None
    return into / tops.pop()


def verify_run(run_dir: Path, source: str) -> Verified:
    if rundir.kind_of(run_dir) != "gate":
        raise BadInput(f"{source}: not a gate run (no {rundir.MANIFEST}); verify a run directory or its zip")
    view = read_run(run_dir)  # the one reader: a damaged manifest or case result is one line
    sealed = view.manifest.get("files")
    if not isinstance(sealed, dict):
        raise BadInput(f"{source}: its manifest seals no files (a run of an earlier kit, or one that never finished): "
                       "nothing to verify it against")
    out = Verified(source)
    _check_files(run_dir, view, sealed, out)
    statuses = {}
    for case in view.expected:
        result = view.results.get(case)
        if result is None:
            continue  # missing: the verdict counts it so, as it did
        statuses[case] = result
        if result.status in JUDGED:
            out.judged += _check_case(run_dir, case, result, _stood_on(view.manifest, case), out.problems)
    out.verdict = gate_verdict(view.expected, statuses)
    recorded = _recorded_verdict(run_dir)
    if recorded is not None and recorded != out.verdict:
        out.problems.append(f"{rundir.RESULT}: states the verdict {recorded}, the cases give {out.verdict}")
    return out


def _check_files(run_dir: Path, view: RunView, sealed: dict, out: Verified) -> None:
    now = rundir.sealed_files(run_dir, view.expected)
    for rel, digest in sorted(sealed.items()):
        if rel not in now:
            out.problems.append(f"{rel}: sealed by the manifest, missing here")
        elif now[rel] != digest:
            out.problems.append(f"{rel}: its SHA-256 is {now[rel][:12]}, the manifest sealed {str(digest)[:12]}: "
                                "changed since the run")
    out.problems += [f"{rel}: not sealed by the manifest (added since the run)" for rel in sorted(now.keys() - sealed)]
    out.files = len(now)
    out.root = rundir.root_digest({str(k): str(v) for k, v in sealed.items()})
    if view.manifest.get("root_sha256") != out.root:
        out.problems.append(f"{rundir.MANIFEST}: its root digest {view.manifest.get('root_sha256')} is not its "
                            f"sealed files' ({out.root})")


def _stood_on(manifest: dict, case: str) -> dict[str, str]:
    """The digest of each baseline ``case`` stood on when the run started, by kind (the manifest's rows)."""
    rows = manifest.get("baselines") or []
    return {str(r.get("kind")): str(r.get("sha256")) for r in rows
            if isinstance(r, dict) and r.get("case") == case and r.get("sha256")}


def _check_case(run_dir: Path, case: str, result: CaseResult, stood_on: dict[str, str],
                problems: list[str]) -> int:
    """Judge ``case`` again from its evidence; its problems added to ``problems``; 1 when it was judged. The
    evidence must be judged against the golden and calibration record the run started on (``stood_on``)."""
    path = rundir.case_file(run_dir / rundir.CASES, case, rundir.CASE_EVIDENCE)
    shown = path.relative_to(run_dir).as_posix()
    if not path.is_file():
        problems.append(f"case {case}: recorded {result.status}, but its evidence ({shown}) is not in the run: its "
                        "verdict cannot be judged again")
        return 0
    try:
        evidence = load_evidence(path)
    except BadInput as exc:
        problems.append(f"case {case}: {exc}")
        return 0
    if evidence.spec.name != case:
        problems.append(f"case {case}: {shown} is the evidence of case {evidence.spec.name}")
        return 0
    used = {"calibration": (evidence.spec.calibration or {}).get("sha256"),
            "golden": evidence.golden_sha256 if evidence.spec.reference is None else None}
    for kind, digest in stood_on.items():
        what = "calibration" if kind == "calibration" else "golden" if kind.endswith("golden") else None
        if what is not None and used[what] is not None and used[what] != digest:
            problems.append(f"case {case}: its evidence was judged against {what} {str(used[what])[:12]}, but the run "
                            f"started on {digest[:12]} (its manifest's baselines)")
    problems += [f"case {case}: {p}" for p in disagreements(result, evidence.judged())]
    return 1


def disagreements(result: CaseResult, judged: Judged) -> list[str]:
    """Where a recorded case result does not follow from its judgement again: its failures (the kernel's; the
    executor's re-judged ones are its own), each prompt's largest error, and its status."""
    out = []
    kernel = [f for f in result.typed_failures if not f.rejudged]
    if texts(kernel) != texts(judged.failures):
        again = texts(judged.failures)
        out.append(f"recorded {len(kernel)} failure(s), its evidence gives {len(again)}"
                   + (f" (first: {again[0]})" if again else ""))
    recorded = {p.id: p.max_probability_error for p in result.prompts}
    for score in judged.scores:
        was = recorded.get(score.id)
        if was is None or not _same(was, score.max_probability_error):
            out.append(f"prompt {score.id}: recorded max probability error {was}, its evidence gives "
                       f"{score.max_probability_error}")
            break  # the first says it: every later one would repeat the same finding
    failed = judged.failed or any(f.rejudged for f in result.typed_failures)
    if result.status not in ALLOWED[failed]:
        out.append(f"recorded {result.status}, its evidence judges it {'failed' if failed else 'passed'}")
    return out


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _recorded_verdict(run_dir: Path) -> str | None:
    path = run_dir / rundir.RESULT
    if not path.is_file():
        return None
    doc = read_json_input(path, display(path))
    return doc.get("verdict") if isinstance(doc, dict) else None
