"""`parity-kit verify RUN_DIR | ZIP`: a finished gate run judged again from what its engines observed, with no
engine, against the repository's own descriptor, goldens and records (docs/verify.md says what that proves).

Anyone who can edit a run can seal it again with the kit's own sealing (kit.core.records.rundir), so nothing a run says
about how it was judged is taken from it:

- the seal: every sealed file (each case's result, evidence and in-kernel reference, and the manifest itself, less
  its seal) against its digest, their root digest against the one the manifest states, the one ``evidence.md``
  and the summary quote, and the one given with ``--root`` (quoted where the run was first reported);
- the cases: the manifest's are the descriptor's (or those the run's commands selected with ``--case``), each
  once; no other case left files in the run, and the manifest's kernels and baselines name the same cases;
- the resolution: the repository's descriptor (its digest the manifest's; never one from the run) resolved for the
  hardware each case's own result records (kit.gate.verify.claims), the manifest's release, kernels, fixture,
  model and the digest of every baseline it records held to it;
- each case judged again from its observations alone (kit.gate.verify.rederive), and the run's verdict from those cases,
  which result.json must state;
- what people read: evidence.md and result.json written again from the verdict and the sealed results, the
  summary's title and banners (kit.gate.verify.readable);
- the signature, where the run has one: by a trusted key, over this root digest and verdict
  (kit.gate.verify.signature).

Nothing of the run is read before every entry of it is held to being a bounded regular file or folder
(kit.gate.verify.safeio), and every name from it is printed escaped. A run of some of the descriptor's cases says
which its command left out (and is refused with ``require_all``).

The answer is "verified: <verdict>" with the root digest, or one line per problem naming the file and the field.
A zip is opened in a fresh temporary folder (kit.gate.verify.runzip) and removed after.
"""

from __future__ import annotations

import functools
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from kit.core.records import paths, rundir
from kit.core.baselines.baselinekind import CALIBRATION, GoldenKind, of_case
from kit.core.noise.calibration import first_difference
from kit.core.errors import BadInput
from kit.core.records.fixture import load_fixture
from kit.core.records.jsonio import sha256_file
from kit.core.records.paths import display
from kit.core.records.recordcheck import Wrong, listing, mapping, text
from kit.core.records.records import BoundKind, CaseResult
from kit.core.records.results import RunDir, RunView, gate_verdict, read_run
from kit.descriptor.host import RecordedHost, recorded_hardware
from kit.descriptor.load import LoadedDescriptor, for_host, load_descriptor
from kit.descriptor.plan import Plan, outline, resolve
from kit.gate.report import ROOT_DIGEST_LABEL
from kit.gate.verify.claims import BoundHost, Claim, bind, facts_of
from kit.gate.verify.readable import check_readable
from kit.gate.verify.rederive import Rederive, said
from kit.gate.verify.runzip import extract_run
from kit.gate.verify.safeio import check_tree, escaped, read_limited
from kit.gate.verify.signature import UNSIGNED_OK, Policy, judge_signature

# How evidence.md quotes the root digest (kit.gate.report.evidence_markdown, by its label).
QUOTED_ROOT = re.compile("^" + re.escape(ROOT_DIGEST_LABEL) + r"`([^`]*)`", re.MULTILINE)
SUMMARIES = (rundir.SUMMARY_HTML, rundir.SUMMARY_NOTEBOOK)


@dataclass(frozen=True)
class Verified:
    """What verifying a run found: the verdict re-derived, the root digest worked out again, every problem. Built
    once, when the checks are done: each check adds its problems to a list of ``verify_run``'s own."""

    source: str
    verdict: str | None = None
    root: str | None = None
    judged: int = 0
    files: int = 0
    descriptor: str | None = None
    problems: tuple[str, ...] = ()
    signed: str | None = None  # who signed the run, in words (kit.gate.verify.signature); None: not judged
    defined: int = 0  # the cases the descriptor defines
    left_out: tuple[str, ...] = ()  # those the run's commands left out with --case
    judged_for: tuple[str, ...] = ()  # per case: the hardware it was judged for, its bounds, its drift test
    notes: tuple[str, ...] = ()  # what the reader should know of how it was verified (a descriptor named elsewhere)

    @property
    def ok(self) -> bool:
        """Whether every case judged again matched and every file its digest."""
        return not self.problems

    def lines(self) -> list[str]:
        """What `verify` prints: when verified, a line with the verdict, one per case saying what it was judged for
        and who signed the run; else a line per problem (what is wrong with its signature among them) under a count;
        every name from the run escaped (kit.gate.verify.safeio)."""
        if self.ok:
            lines = [f"verified: {self.verdict}{self.partial} ({self.source}: {self.judged} cases judged again from "
                     f"their evidence against {self.descriptor}, {self.files} files match their digests; root "
                     f"digest {self.root})", *(f"  {line}" for line in (*self.judged_for, *self.notes)),
                     *([f"signature: {self.signed}"] if self.signed is not None else [])]
        else:
            lines = [f"not verified: {self.source}: {len(self.problems)} problem(s)",
                     *(f"  {p}" for p in (*self.problems, *self.notes))]
        return [escaped(line) for line in lines]

    @property
    def partial(self) -> str:
        """", 4 of 5 cases (left out by its command: X)" for a run of some of the descriptor's cases."""
        if not self.left_out:
            return ""
        return (f", {self.defined - len(self.left_out)} of {self.defined} cases (left out by its command: "
                f"{', '.join(self.left_out)})")


def verify(path: str | Path, descriptor: str | Path | None = None, root: str | None = None,
           require_all: bool = False, signatures: Policy = UNSIGNED_OK) -> Verified:
    """Verify the run directory or run zip at ``path`` (see the module) against ``descriptor`` (None: the
    repository's copy of the one its manifest names), and its root digest against ``root`` when given; with
    ``require_all``, a run of only some of the descriptor's cases is not verified; its signature is judged by
    ``signatures``. Bad input (not a run, a damaged
    zip, a run whose manifest seals nothing, no descriptor) is one line, BadInput, its names escaped."""
    path = Path(path)
    try:
        if path.is_file() and not path.is_symlink() and stat.S_ISREG(path.stat().st_mode):
            with tempfile.TemporaryDirectory(prefix="parity-kit-verify-") as tmp:
                return verify_run(extract_run(path, Path(tmp)), display(path), descriptor, root, require_all,
                                  signatures)
        if not path.is_dir():
            raise BadInput(f"{display(path)}: no such run directory or zip")
        return verify_run(path, display(path), descriptor, root, require_all, signatures)
    except BadInput as exc:
        raise BadInput(escaped(exc)) from None


def verify_run(run_dir: Path, source: str, descriptor: str | Path | None = None, root: str | None = None,
               require_all: bool = False, signatures: Policy = UNSIGNED_OK) -> Verified:
    """Verify the gate run in ``run_dir`` (``source``: how to name it)."""
    check_tree(run_dir, source)  # before anything of it is read: no pipe, device or link out; every file bounded
    if rundir.run_kind_of(run_dir) != "gate":
        raise BadInput(f"{source}: not a gate run (no {rundir.MANIFEST}); verify a run directory or its zip")
    rundir.inside(run_dir / rundir.MANIFEST, run_dir, "manifest")
    view = read_run(run_dir)  # the one reader: a damaged manifest or case result is one line
    sealed = view.manifest.get("files")
    if not isinstance(sealed, dict):
        raise BadInput(f"{source}: its manifest seals no files (a run of an earlier kit, or one that never finished): "
                       "nothing to verify it against")
    check_shape(view.manifest, f"{source}/{rundir.MANIFEST}")
    problems: list[str] = []
    files, digest = _check_seal(run_dir, view, sealed, problems)
    _check_quotes(run_dir, digest, root, problems)
    desc, notes = _descriptor(view.manifest, descriptor, source, run_dir)
    found = functools.partial(Verified, source, root=digest, files=files, descriptor=display(desc.path),
                              notes=tuple(notes))
    stated = view.manifest.get("descriptor_sha256")
    if sha256_file(desc.path) != stated:
        problems.append(f"{rundir.MANIFEST}: descriptor_sha256 is {said(stated)}, {display(desc.path)}'s is "
                        f"{sha256_file(desc.path)}: the run was not made with this descriptor")
        return found(problems=tuple(problems))
    cases, left_out = _check_cases(run_dir, view, desc, problems)
    defined = len(outline(desc).cases)
    found = functools.partial(found, defined=defined, left_out=tuple(left_out))
    if left_out and require_all:
        problems.append(f"{rundir.MANIFEST}: command: leaves out {', '.join(left_out)} of the descriptor's "
                        f"{defined} cases; --require-all asks for every one")
    try:
        recorded = recorded_hardware(view.manifest.get("hardware"), cases)
    except Wrong as wrong:
        raise BadInput(f"{source}/{rundir.MANIFEST}: {wrong.text}") from None
    plan, host = _bound_plan(desc, recorded, cases, view, problems)
    if plan is None:
        return found(problems=tuple(problems))
    _check_plan(view.manifest, plan, host, problems)
    statuses, judged = _judge_again(run_dir, view, plan, host, problems)
    verdict = gate_verdict(view.expected, statuses)
    _check_result(run_dir, verdict, statuses, problems)
    check_readable(run_dir, view.manifest, verdict, view.expected, view.results, problems)
    signed = judge_signature(run_dir, digest, verdict, desc.path, signatures)
    return found(verdict=verdict, judged=judged, problems=(*problems, *signed.problems), signed=signed.said,
                 judged_for=tuple(judged_for(plan, host.claims, statuses)))


def _judge_again(run_dir: Path, view: RunView, plan: Plan, host: RecordedHost,
                 problems: list[str]) -> tuple[dict[str, CaseResult], int]:
    """Every case of the plan judged again (kit.gate.verify.rederive), its problems added to ``problems``; each case's
    result as judged again, where it could be, and how many cases were judged."""
    again = Rederive(run_dir, host)
    statuses: dict[str, CaseResult] = {}
    judged = 0
    for name, case in plan.cases.items():
        found = again.case(case.spec, view.results.get(name))
        problems += found.problems
        judged += found.judged
        if found.result is not None:
            statuses[name] = found.result
    return statuses, judged


def check_shape(manifest: dict, shown: str) -> None:
    """What verify reads of a manifest beyond what every reader checks (kit.core.records.resultcheck), each of its type;
    BadInput naming the first key that is not."""
    try:
        for rel, digest in mapping(manifest["files"], "files").items():
            text(digest, f"files.{rel}")
        for key in ("descriptor", "descriptor_sha256"):
            text(manifest.get(key), key)
        for case, kernel in mapping(manifest.get("kernels"), "kernels").items():
            text(kernel, f"kernels.{case}")
        for i, row in enumerate(listing(manifest.get("baselines"), "baselines")):
            row = mapping(row, f"baselines[{i}]")
            for key in ("case", "kind"):
                text(row.get(key), f"baselines[{i}].{key}")
            if row.get("sha256") is not None:
                text(row["sha256"], f"baselines[{i}].sha256")
        commands = [("command", manifest.get("command"))] + [
            (f"history[{i}].command", mapping(h, f"history[{i}]").get("command"))
            for i, h in enumerate(listing(manifest.get("history") or [], "history"))]
        for key, command in commands:
            for j, word in enumerate(listing(command, key) if command is not None else []):
                if not isinstance(word, str):
                    raise Wrong(f"{key}[{j}]", "expected a string", word)
    except Wrong as wrong:
        raise BadInput(f"{shown}: {wrong.text}") from None


def _check_seal(run_dir: Path, view: RunView, sealed: dict, problems: list[str]) -> tuple[int, str]:
    """Every sealed file against its digest, the manifest's own included, and the root digest worked out again:
    how many files the run holds, and that root digest."""
    now = {**rundir.sealed_files(run_dir, _names(view.expected)),
           rundir.MANIFEST: rundir.manifest_digest(view.manifest)}
    if rundir.MANIFEST not in sealed:
        problems.append(f"{rundir.MANIFEST}: files: seals no digest of the manifest itself (a run of an earlier "
                        "kit): what it names of the run could be changed unseen")
    for rel, digest in sorted(sealed.items()):
        if rel not in now:
            problems.append(f"{rel}: sealed by the manifest, missing here")
        elif now[rel] != digest:
            what = "its content less its seal" if rel == rundir.MANIFEST else "its"
            problems.append(f"{rel}: {what} SHA-256 is {now[rel][:12]}, the manifest sealed {str(digest)[:12]}: "
                            "changed since the run")
    problems += [f"{rel}: not sealed by the manifest (added since the run)"
                 for rel in sorted(now.keys() - sealed.keys() - {rundir.MANIFEST})]
    root = rundir.root_digest({str(k): str(v) for k, v in sealed.items()})
    if view.manifest.get("root_sha256") != root:
        problems.append(f"{rundir.MANIFEST}: its root digest {said(view.manifest.get('root_sha256'))} is not its "
                        f"sealed files' ({root})")
    return len(now), root


def _check_quotes(run_dir: Path, root: str | None, given: str | None, problems: list[str]) -> None:
    """The root digest as evidence.md and the summary quote it, and as the reader was given it (``given``)."""
    evidence = _read(run_dir, rundir.EVIDENCE)
    quoted = QUOTED_ROOT.findall(evidence.decode("utf-8", "replace") if evidence is not None else "")
    if evidence is None:
        problems.append(f"{rundir.EVIDENCE}: missing: the root digest it quotes cannot be compared")
    elif set(quoted) != {root}:
        problems.append(f"{rundir.EVIDENCE}: quotes the root digest {', '.join(quoted) or 'nowhere'}; the run's "
                        f"is {root}")
    for name in SUMMARIES:
        data = _read(run_dir, name)
        if data is not None and (root is None or root.encode() not in data):
            problems.append(f"{name}: does not quote the run's root digest {root}")
    if given is not None and given != root:
        problems.append(f"--root {given}: the run's root digest is {root}: this is not the run that was reported")


def _read(run_dir: Path, name: str) -> bytes | None:
    """The bytes of a file of the run (None: absent); a link that leads out of it, or anything but a regular file
    within the size limit, is refused (kit.gate.verify.safeio)."""
    return read_limited(run_dir, name)


def _descriptor(manifest: dict, given: str | Path | None, source: str,
                run_dir: Path) -> tuple[LoadedDescriptor, list[str]]:
    """The descriptor to resolve the run's cases with, and a note when the run named another: ``given``, else the
    one the manifest names by its path inside the repository verify runs from (``repository``), else the
    repository's descriptor of that name (an embedded descriptor by its name, where the kit is installed
    elsewhere). Never one inside the run: a run cannot bring the yardstick it is measured with."""
    if given is not None:
        return load_descriptor(given), []
    named = manifest.get("descriptor")
    if not isinstance(named, str) or not named:
        raise BadInput(f"{source}: its manifest names no descriptor: name the repository's copy with --descriptor")
    repo, run = repository(), run_dir.resolve()
    stated = Path(named) if Path(named).is_absolute() else repo / named
    if _within(stated, repo) and not _within(stated, run) and stated.is_file():
        return load_descriptor(stated), []
    for candidate in (repo / paths.DESCRIPTORS.name / stated.name, paths.DESCRIPTORS / stated.name):
        if candidate.is_file() and not _within(candidate, run):
            return load_descriptor(candidate), [
                f"note: the run names the descriptor {named}, {_outside(stated, repo, run)}: judged against this "
                f"repository's {display(candidate)}"]
    raise BadInput(f"{source}: its descriptor {said(named)} is {_outside(stated, repo, run)}, and the repository "
                   f"has no descriptor of its name: name the repository's copy with --descriptor")


def repository() -> Path:
    """The repository verify runs from: the nearest folder holding ``.git`` at or above the working directory,
    else the working directory itself."""
    here = Path.cwd().resolve()
    return next((p for p in (here, *here.parents) if (p / ".git").exists()), here)


def _within(path: Path, folder: Path) -> bool:
    real = path.resolve()
    return real == folder or folder in real.parents


def _outside(stated: Path, repo: Path, run: Path) -> str:
    if _within(stated, run):
        return "inside the run itself"
    return f"outside this repository ({repo})" if not _within(stated, repo) else "not in this repository"


def _bound_plan(desc: LoadedDescriptor, recorded: RecordedHost, cases: list[str], view: RunView,
                problems: list[str]) -> tuple[Plan | None, BoundHost]:
    """The descriptor resolved for the hardware each case's result binds it to (kit.gate.verify.claims), and that
    hardware: resolved first for the classes claimed (their runtime keys held to the results' facts), which gives
    each case's options; then, where the facts refute a claim, again for the class they give."""
    claimed = BoundHost(recorded.cases, {}, {n: facts_of(view.results.get(n)) for n in cases})
    tried: list[str] = []
    plan = _plan(desc, claimed, cases, view.manifest, tried)
    if plan is None:
        problems += tried + claimed.problems
        return None, claimed
    host, bound = bind(recorded, {n: c.spec.options for n, c in plan.cases.items()}, view.results)
    problems += bound
    if host.cases == claimed.cases:
        problems += tried + claimed.problems
        return plan, host
    plan = _plan(desc, host, cases, view.manifest, problems)
    problems += host.problems
    return plan, host


def judged_for(plan: Plan, claims: dict[str, Claim], statuses: dict[str, CaseResult]) -> list[str]:
    """Per case, what the verified line says of how it was judged: the class or card, where its bounds came from,
    and whether its drift test ran."""
    out = []
    for name in plan.cases:
        claim = claims.get(name)
        result = statuses.get(name)
        where = f"{claim.name} ({claim.facts or 'its result records no runtime'})" if claim else "?"
        out.append(f"{name}: judged for {where}; {_bounds(claim, result)}; {_drift(result)}")
    return out


def _bounds(claim: Claim | None, result: CaseResult | None) -> str:
    if result is None:
        return "no result"
    source = result.bound_source or {}
    kind = result.bound_kind
    if kind is BoundKind.EXACT:  # an exact golden's case, whatever its result recorded
        return "exact, no bounds"
    if kind is BoundKind.CALIBRATED:
        measured = ((source.get("measured_on") or {}).get("accelerator") or {}).get("name")
        record = str(source.get("record") or "")[:12]
        if claim is not None and measured not in (None, claim.name):
            return f"bounds borrowed from {measured}'s record {record}"
        return f"its own calibrated bounds (record {record})"
    return f"its own {kind.value} bounds"


def _drift(result: CaseResult | None) -> str:
    if result is None:
        return "no drift test"
    if result.drift is not None:
        return "drift test ran"
    if result.drift_skipped:
        return f"drift test left out ({result.drift_off or 'skipped'})"
    return "no drift test"


def _names(value: Any) -> list[str]:
    """The case names a manifest lists, once each (the checked manifest holds names only)."""
    return list(dict.fromkeys(value))


def _check_cases(run_dir: Path, view: RunView, desc: LoadedDescriptor,
                 problems: list[str]) -> tuple[list[str], list[str]]:
    """The manifest's cases against the descriptor's and the run's commands' ``--case``, and against what else in
    the run names cases; the cases to judge (the manifest's that the descriptor defines), and the descriptor's
    that the run's commands left out."""
    m = view.manifest
    listed = view.expected
    asked = selected_cases([*(h.get("command") for h in m.get("history") or [] if isinstance(h, dict)),
                            m.get("command")])
    defined = outline(desc).cases
    wanted = [n for n in defined if asked is None or n in asked]
    shown = " ".join(map(str, m.get("command") or [])) or "none"
    for name in dict.fromkeys(n for n in listed if listed.count(n) > 1):
        problems.append(f"{rundir.MANIFEST}: cases: lists {name} {listed.count(name)} times")
    for name in wanted:
        if name not in listed:
            problems.append(f"{rundir.MANIFEST}: cases: lacks {name}, which the descriptor defines and the run's "
                            f"command ({shown}) does not leave out")
    for name in _names(listed):
        if name not in wanted:
            why = "the descriptor does not define" if name not in defined else "the run's command does not select"
            problems.append(f"{rundir.MANIFEST}: cases: lists {name}, which {why}")
    cases = [n for n in _names(listed) if n in defined]
    named = {"kernels": set(m["kernels"]), "baselines": {r["case"] for r in m["baselines"]}}
    for key, names in named.items():
        for name in sorted(map(str, names - set(listed))):
            problems.append(f"{rundir.MANIFEST}: {key}: names case {name}, which its cases do not list")
    problems += [f"{rundir.CASES}/{f}: a file of no case the manifest lists"
                 for f in stray_files(run_dir / rundir.CASES, listed)]
    return cases, [n for n in defined if n not in wanted]


def selected_cases(commands: Sequence[Any]) -> set[str] | None:
    """The cases the commands that ran into a directory asked for with ``--case`` (a resumed run adds its own to
    the first's); None, every case of the descriptor, once any of them asked for none."""
    asked: set[str] = set()
    for command in commands:
        words = [str(w) for w in command] if isinstance(command, list) else []
        named = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--case"]
        named += [w.split("=", 1)[1] for w in words if w.startswith("--case=")]
        if not named:
            return None
        asked.update(named)
    return asked


def stray_files(cases_dir: Path, listed: Sequence[str]) -> list[str]:
    """The files of ``cases_dir`` (and its retried and superseded folders) that no listed case left: a case's
    files are named ``<case>.<suffix>``."""
    if not cases_dir.is_dir():
        return []
    prefixes = tuple(f"{n}." for n in listed)
    found = []
    for folder in (cases_dir, cases_dir / rundir.RETRIED, cases_dir / rundir.SUPERSEDED):
        if folder.is_dir():
            found += [p.relative_to(cases_dir).as_posix() for p in sorted(folder.iterdir())
                      if not p.is_dir() and not p.name.startswith(prefixes)]
    return found


def _plan(desc: LoadedDescriptor, host: RecordedHost, cases: list[str], manifest: dict,
          problems: list[str]) -> Plan | None:
    """The descriptor resolved for the recorded hardware and release; None (with the problem) when it does not
    resolve."""
    release = (manifest.get("release") or {}).get("name")
    if not cases:
        problems.append(f"{rundir.MANIFEST}: cases: none the descriptor defines: nothing to judge")
        return None
    try:
        return resolve(for_host(desc, host), cases, release)
    except BadInput as exc:
        problems.append(f"{display(desc.path)}: does not resolve the run's cases on the hardware it recorded: {exc}")
        return None


def _check_plan(manifest: dict, plan: Plan, host: RecordedHost, problems: list[str]) -> None:
    """What the manifest states of the run's inputs, held to the plan: release, kernels, fixture, model, the digest
    of every baseline each case stands on, and one device's hardware alike for every case that computes on it."""
    stated = {"release": manifest.get("release"), "fixture_sha256": manifest.get("fixture_sha256"),
              "model_digest": manifest.get("model_digest"),
              "kernels": {n: manifest.get("kernels", {}).get(n) for n in plan.cases}}
    derived = {"release": plan.release.identity() if plan.release is not None else None,
               "fixture_sha256": load_fixture(plan.fixture).sha256, "model_digest": plan.model.digest,
               "kernels": {n: c.spec.kernel for n, c in plan.cases.items()}}
    for key in stated:
        differs = first_difference(stated[key], derived[key], key)
        if differs:
            problems.append(f"{rundir.MANIFEST}: {differs[0]} is {said(differs[1])}; the descriptor gives "
                            f"{said(differs[2])}")
    problems += _baseline_problems(manifest.get("baselines"), plan)
    devices: dict[str, tuple[str, dict]] = {}
    for name, case in plan.cases.items():
        device = str(case.spec.options.get("device", "cpu"))
        seen = devices.setdefault(device, (name, host.accelerator(name, case.spec.options)))
        if seen[1] != host.accelerator(name, case.spec.options):
            problems.append(f"{rundir.MANIFEST}: hardware.{name}.accelerator is "
                            f"{said(host.accelerator(name, case.spec.options))}; case {seen[0]} on the same "
                            f"device ({device}) recorded {said(seen[1])}")


def _baseline_problems(rows: Any, plan: Plan) -> list[str]:
    """The digest of every golden and calibration record each case stands on, as the manifest's ``baselines``
    records it when the run starts, against the plan's; a digest left out is a problem, not a check skipped."""
    recorded = {(r["case"], r["kind"]): r.get("sha256") for r in rows}  # its shape checked (``check_shape``)
    hashed: dict[str, str] = {}  # a golden several cases share is hashed once: a GPU golden takes hundreds of MB
    problems = []
    for name, case in plan.cases.items():
        spec = case.spec
        for kind in of_case(spec):
            if kind is CALIBRATION:
                digest = (spec.calibration or {}).get("sha256")
            elif isinstance(kind, GoldenKind) and spec.golden_path:
                if spec.golden_path not in hashed:
                    hashed[spec.golden_path] = sha256_file(spec.golden_path)
                digest = hashed[spec.golden_path]
            else:
                continue
            if recorded.get((name, kind.name)) != digest:
                problems.append(f"{rundir.MANIFEST}: baselines: case {name}'s {kind.name} is "
                                f"{said(recorded.get((name, kind.name), 'absent'))}; the descriptor resolves {digest}")
    return problems


def _check_result(run_dir: Path, verdict: str, statuses: dict[str, CaseResult], problems: list[str]) -> None:
    """result.json's verdict and each case's status there, against the cases judged again."""
    recorded = RunDir.local(run_dir).recorded()
    if recorded is None:
        problems.append(f"{rundir.RESULT}: missing: the verdict the run stated cannot be compared")
        return
    if recorded.verdict != verdict:
        problems.append(f"{rundir.RESULT}: states the verdict {said(recorded.verdict)}, the cases give "
                        f"{verdict}")
    for name, result in statuses.items():
        status = recorded.statuses.get(name)
        if status != result.status:
            problems.append(f"{rundir.RESULT}: cases.{name}.status is {said(status)}, the case gives "
                            f"{result.status}")
