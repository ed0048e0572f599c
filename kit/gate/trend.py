"""At the end of a gate run: did this run complete a step up in some case's error, while it still passes?

A bound is crossed long after the release that moved the error: a case that goes from 0.068 to 0.085 under a
bound of 0.1 passes, and keeps passing while it creeps on. The history (kit.history) finds such a step over the
runs kept beside this one; this module asks it once per run and words the answer for the evidence and the
summary ("passed, but levanter's error stepped up ... at release R"). It is said once, by the run that makes the
step significant, not by every run after it.

The history is read only where runs are kept together: the folder that holds this run must be the default
folder of runs (where `parity-kit gate` puts them without --out). A run written elsewhere with --out has no
history beside it that this run can speak for, and a folder a user names (a home directory) is not walked.
Nothing here may cost the run its verdict: whatever goes wrong is one logged line and no trend.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kit.core.errors import BadInput
from kit.core.records import paths, rundir
from kit.core.records.results import RunDir
from kit.core.records.jsonio import write_json

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stepped:
    """A case and bucket whose error this run showed to have stepped up (in words, with its run and release)."""

    case: str
    bucket: int
    flag: str

    def to_dict(self) -> dict:
        """A flagged step as trend.json keeps it."""
        return {"case": self.case, "bucket": self.bucket, "flag": self.flag}

    @property
    def sentence(self) -> str:
        """The flag in words for the run's evidence: the case, what stepped, and in which bucket."""
        return f"{self.case}'s {self.flag} (bucket {self.bucket})"


def kept_together(run_dir: Path) -> bool:
    """Whether ``run_dir`` sits in a default folder of runs (the working directory's runs/, or the checkout's)."""
    parent = run_dir.resolve().parent
    return parent in {Path("runs").resolve(), paths.runs_root().resolve()}


def steps_completed(run_dir: Path, name: str) -> list[Stepped]:
    """The steps up that ``run_dir`` (a finished gate run of descriptor ``name``) completes, from the history of
    the runs beside it; none where it is not kept with other runs, or the history cannot be read."""
    if not kept_together(run_dir):
        return []
    from kit.history import index, queries
    from kit.history.steps import flag_rows
    from kit.core.records.store import open_store

    try:
        with index.reading(open_store(str(run_dir.resolve().parent))) as (_, con):
            rows = flag_rows(queries.margins(con, queries.Selection(name)))
    except Exception as exc:  # a history is a comment on the verdict, never a reason to lose it
        log.warning(f"the history beside {paths.display(run_dir)} could not be read ({exc}); no trend in this run's "
                    "evidence")
        return []
    here = run_dir.name
    return [Stepped(r.case, r.bucket, r.flag) for r in rows if r.new_step and r.flag and r.last_run == here]


def record_steps(run_dir: Path, name: str, passed: bool, read_history: bool = True) -> str | None:
    """The steps up that a finished run completes (none without ``read_history``: an interrupted run's), written
    into it for the summary; the evidence's sentence about them, if any."""
    steps = steps_completed(run_dir, name) if read_history else []
    write_steps(run_dir, steps)
    return evidence_line(steps, passed)


def write_steps(run_dir: Path, steps: list[Stepped]) -> None:
    """The steps into the run directory (for the summary); none written where there are none."""
    if steps:
        write_json(run_dir / rundir.TREND, {"steps": [s.to_dict() for s in steps]})


def read_steps(run_dir: Path) -> list[Stepped]:
    """The steps a run recorded (none when it recorded none, or the file is not as written)."""
    run, path = RunDir.local(run_dir), Path(run_dir) / rundir.TREND
    if not run.has(rundir.TREND):
        return []
    try:
        steps = run.read_json(rundir.TREND)["steps"]
        return [Stepped(str(s["case"]), int(s["bucket"]), str(s["flag"])) for s in steps]
    except (BadInput, ValueError, KeyError, TypeError) as exc:
        log.warning(f"{paths.display(path)}: not read ({exc})")
        return []


def evidence_line(steps: list[Stepped], verdict_passed: bool) -> str | None:
    """The evidence's sentence about the steps: 'Passed, but ...' when the run passed."""
    if not steps:
        return None
    from kit.history.steps import FALSE_ALARM

    said = "; ".join(s.sentence for s in steps)
    lead = "Passed, but" if verdict_passed else "Also:"
    return (f"{lead} {said}: a step found by the change-point test over this descriptor's runs (false-alarm rate "
            f"{FALSE_ALARM:.0%} per series; parity-kit history shows the series).")
