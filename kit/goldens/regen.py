"""`parity-kit golden regen`: a reviewed replacement for a stale golden.

The new golden is made by the reference backend, compared with the old one
(which cases moved, by how much, which winners changed), and checked by running
the descriptor's cases against it. It is placed beside the old golden, never
over it, and only when at least two backends agree with it within their bounds:
one backend alone cannot tell a repaired golden from its own bug. A calibrated case's record names the golden
its noise was measured against, so the case is calibrated again against the new golden on this host first
(kit.goldens.recalibrate) and checked with that record; the new record is placed beside the old one with the
golden, and the records of other classes of hardware are named as to be re-made on their hosts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kit.core.records import paths, rundir
from kit.core.errors import BadInput
from kit.core.baselines.golden import PromptDiff, diff_goldens, golden_filename, load_golden, write_golden
from kit.core.records.jsonio import atomic_write_bytes
from kit.core.records.records import Status
from kit.descriptor.load import golden_kind, load_descriptor, with_golden, with_records
from kit.descriptor.plan import calibration_lists, outline
from kit.gate.executor import RunRequest
from kit.gate.session import gate_once
from kit.goldens.make import GoldenRequest, make_golden_document
from kit.goldens.recalibrate import Recalibrated, place, recalibrate, stale_cases
from kit.run import lifecycle, output
from kit.run.output import MARKUP, NOTICE
from kit.core.records.records import GoldenMode

log = logging.getLogger(__name__)

MIN_AGREEING_BACKENDS = 2
MOVED = 1e-6  # below this a case did not move (float32 noise of the reference itself)


@dataclass
class RegenOutcome:
    work_dir: Path
    new_golden: Path  # the candidate golden, kept in the work directory in every outcome
    old_golden: Path
    diff: list[PromptDiff]
    backends: dict[str, list[str]]  # backend -> its cases that did not pass against the new golden
    placed: Path | None = None
    notes: list[str] = field(default_factory=list)
    recalibrated: dict[str, Recalibrated] = field(default_factory=dict)  # case -> its records after the regen

    @property
    def agreeing(self) -> list[str]:
        """The backends whose cases pass against the new golden: two are needed before it is placed."""
        return sorted(b for b, failing in self.backends.items() if not failing)

    @property
    def accepted(self) -> bool:
        """Whether the new golden was placed beside the old one for review."""
        return self.placed is not None


def regen_golden(descriptor: str | Path, kind: str = GoldenMode.SEMANTIC, release: str | None = None,
                 out: str | Path | None = None, jobs: int | None = None,
                 command: Sequence[str] | None = None) -> RegenOutcome:
    """Remake a stale semantic golden with the reference backend, diff it with the old one, and run the
    descriptor's cases that use it against the new one; it is placed beside the old golden only when those
    cases pass on at least MIN_AGREEING_BACKENDS backends. The regen directory keeps the new golden, the diff
    and the checking gate run whatever the outcome. Never over the old golden and never on one backend's word:
    a golden that one backend alone agrees with could be that backend's bug, and a reviewer compares the two
    files before the descriptor names the new one."""
    output.ensure()
    desc = load_descriptor(descriptor)
    stated = outline(desc)
    if golden_kind(kind) != GoldenMode.SEMANTIC:
        raise BadInput(f"golden regen makes semantic goldens only: an exact golden ({kind}) belongs to one "
                       "native backend and runtime; remake it there with `parity-kit golden make --kind exact`")
    if kind not in stated.goldens:
        raise BadInput(f"{paths.display(stated.path)}: no [goldens] entry {kind!r} to regenerate "
                       f"(have: {', '.join(stated.goldens)})")
    cases = [name for name, c in stated.cases.items() if c.golden == kind]
    if not cases:
        raise BadInput(f"{paths.display(stated.path)}: no case uses the {kind} golden; nothing could check a new one")
    old = load_golden(stated.goldens[kind].files[0])  # a semantic entry names one file
    command = list(command or ["parity-kit", "golden", "regen", str(descriptor)])
    work_dir = lifecycle.claim(out or rundir.new_run_dir("regen", stated.name), "regen directory",
                               "golden regeneration", command)
    with lifecycle.owned(work_dir, command, "golden regeneration"):
        log.log(NOTICE, f"making a new {kind} golden from {paths.display(stated.model.path)} "
                        f"(hf float32, top-{old.top_k}) -> {work_dir}", extra=MARKUP)
        # A decode golden is remade with continuations as long as the old one's, so its cases still find them.
        doc, fixture = make_golden_document(GoldenRequest(stated.model.path, stated.fixture, GoldenMode.SEMANTIC,
                                                          old.top_k,
                                                          command, decode=old.decode_steps))
        name = golden_filename(fixture, stated.model.path.name, doc["model_digest"], GoldenMode.SEMANTIC,
                               decode_steps=old.decode_steps)
        new_path = write_golden(work_dir / name, doc)
        new = load_golden(new_path)
        diff = diff_goldens(old, new)

        checked = with_golden(desc, kind, new_path)
        recalibrated = recalibrate(checked, stale_cases(calibration_lists(desc, cases), new.sha256), work_dir, command)
        checked = with_records(checked, {n: r.record for n, r in recalibrated.items() if r.record is not None})
        unmeasured = [n for n, r in recalibrated.items() if r.record is None]  # no bound to check them with
        checking = [n for n in cases if n not in unmeasured]
        backends: dict[str, list[str]] = {}
        for n in unmeasured:
            backends.setdefault(stated.cases[n].backend, []).append(n)
        if checking:
            log.log(NOTICE, f"checking it with {len(checking)} cases: {', '.join(checking)}", extra=MARKUP)
            run = gate_once(RunRequest(checked, work_dir / "check", checking, release), command, jobs, summary=False)
            for spec in run.specs:
                r = run.results.get(spec.name)
                backends.setdefault(spec.backend, [])
                if r is None or r.status != Status.PASSED:
                    backends[spec.backend].append(spec.name)

        outcome = RegenOutcome(work_dir, new_path, old.path, diff, backends, recalibrated=recalibrated)
        if len(outcome.agreeing) >= MIN_AGREEING_BACKENDS:
            outcome.placed = write_golden(_beside(old.path, name), doc)
            for measured in recalibrated.values():
                if measured.record is not None:
                    place(measured)
        atomic_write_bytes(work_dir / rundir.REGEN_REPORT, regen_report(outcome).encode("utf-8"))
    return outcome


def _beside(old: Path, name: str) -> Path:
    target = old.parent / name
    if target.exists():  # the same model and fixture: a regenerated golden gets its own name
        target = old.parent / f"{Path(name).stem}-regen-{time.strftime('%Y%m%d-%H%M%S')}.json"
    return target


def regen_report(o: RegenOutcome) -> str:
    """The regen's outcome for people, as Markdown: accepted or refused and why, which backends agree with the
    new golden, and how far its cases moved."""
    moved = sorted((r for r in o.diff if r.max_probability_delta > MOVED or r.winner_changed),
                   key=lambda r: -r.max_probability_delta)
    winners = [r for r in o.diff if r.winner_changed]
    largest = max(o.diff, key=lambda r: r.max_probability_delta, default=None)
    if o.placed is not None:  # accepted
        head = (f"**Accepted for review:** {len(o.agreeing)} backends agree with the new golden within their "
                f"bounds ({', '.join(o.agreeing)}). Written to `{paths.display(o.placed)}`, beside "
                f"`{o.old_golden.name}`; point the descriptor's golden at it once reviewed.")
    else:
        need = f"at least {MIN_AGREEING_BACKENDS} backends must agree with it"
        head = (f"**Refused:** {need}; {len(o.agreeing)} did ({', '.join(o.agreeing) or 'none'}). "
                f"The candidate golden stays at `{paths.display(o.new_golden)}` and nothing was placed.")
    lines = ["# Golden regeneration", "", head, "",
             f"Old `{o.old_golden.name}` -> new `{o.new_golden.name}`: {len(moved)} of {len(o.diff)} cases moved",
             f"(largest {largest.max_probability_delta:.4g} on `{largest.id}`), {len(winners)} winners changed."
             if largest else "", "", "| backend | agrees | cases that did not pass |", "| --- | --- | --- |"]
    lines += [f"| {b} | {'yes' if not failing else 'no'} | {', '.join(failing) or '—'} |"
              for b, failing in sorted(o.backends.items())]
    if moved:
        lines += ["", "| case | max probability move | winner |", "| --- | --- | --- |"]
        lines += [f"| `{r.id}` | {r.max_probability_delta:.4g} | "
                  f"{f'{r.winner_before} -> {r.winner_after}' if r.winner_changed else 'same'} |" for r in moved[:20]]
        if len(moved) > 20:
            lines.append(f"| ... {len(moved) - 20} more | | |")
    return "\n".join(lines + calibration_lines(o)) + "\n"


def calibration_lines(o: RegenOutcome) -> list[str]:
    """The report's account of the calibrated cases: the record each was checked with, where it was placed,
    and the records still to be re-made on other hosts, which the descriptor must list before it is used there."""
    if not o.recalibrated:
        return []
    lines = ["", "## Calibrations", "", "Each calibrated case was measured again against the new golden on this host "
             "and checked with that record; its old records name the old golden and cannot judge the new one.", "",
             "| case | new record | placed | still to re-make |", "| --- | --- | --- | --- |"]
    for name, r in sorted(o.recalibrated.items()):
        new = f"`{r.record.name}`" if r.record else f"not measured: {r.error}"
        placed = f"`{paths.display(r.placed)}`" if r.placed else "—"
        lines.append(f"| {name} | {new} | {placed} | {', '.join(r.elsewhere) or '—'} |")
    if any(r.elsewhere for r in o.recalibrated.values()):
        lines += ["", "On a host of each class still to re-make, once the descriptor names the new golden: "
                  "`parity-kit calibrate DESCRIPTOR --case NAME`, and list that record beside this host's."]
    return lines
