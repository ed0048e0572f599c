"""What the build, qualify and summary notebooks show of a refresh's steps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kit.core.records import rundir
from kit.core.records.jsonio import read_json
from kit.core.verdict.diagnosis import ControlVerdict
from kit.refresh.build import BuildOutcome
from kit.refresh.qualify import QualifyOutcome

REFRESH_RECORD = rundir.REFRESH


def build_banner(b: BuildOutcome) -> str:
    """The build step's outcome as Markdown: its status and reason, the overlay replayed onto which upstream, and
    how far upstream moved."""
    inp = b.inputs
    head = {"built": "BUILT", "conflict": "CONFLICT", "build-failed": "BUILD FAILED", "exists": "EXISTS"}
    lines = [f"## Build: **{head.get(b.status, b.status.upper())}**", "", f"{b.reason}.", "",
             f"Fork `{inp['fork']}` ({inp['repo']}): overlay `{inp['base'][:12]}..{inp['tip'][:12]}` "
             f"({len(b.overlay)} commits) onto `{inp['upstream_ref']}` = `{inp['upstream'][:12]}`, "
             f"which is {b.upstream_moved} commits past the old base."]
    if b.tag:
        lines += ["", f"Release `{b.tag}`, version `{b.version}`, source commit `{b.replay['tip']}`."]
    for w in b.wheels:
        lines.append(f"- `{w['file']}` ({w['architecture']}): sha256 `{w['sha256']}`")
    return "\n".join(lines)


def overlay_table(b: BuildOutcome) -> pd.DataFrame:
    """Each overlay commit and what became of it on the new base."""
    applied = {a["from"]: a["to"] for a in b.replay.get("applied", [])}
    dropped = {d["from"] for d in b.replay.get("dropped", [])}
    conflict = (b.replay.get("conflict") or {}).get("sha")
    rows = []
    for c in b.overlay:
        if c["sha"] in applied:
            state, new = "applied", applied[c["sha"]][:12]
        elif c["sha"] in dropped:
            state, new = "already upstream", "—"
        elif c["sha"] == conflict:
            state, new = "CONFLICT: " + ", ".join(b.replay["conflict"]["files"]), "—"
        else:
            state, new = "not reached", "—"
        rows.append({"commit": c["sha"][:12], "subject": c["subject"], "on main-next": new, "replay": state})
    return pd.DataFrame(rows, columns=["commit", "subject", "on main-next", "replay"])


def qualify_banner(q: QualifyOutcome) -> str:
    """The qualify step's outcome as Markdown: qualified or not and why, on which hardware."""
    mark = "QUALIFIED" if q.qualified else "NOT QUALIFIED"
    hw = q.hardware or {}
    gpus = ", ".join(f"{g['name']} ({g['memory']})" for g in hw.get("gpus", [])) or "none"
    driver = f", driver {hw['driver']}" if hw.get("driver") else ""
    return (f"## Qualify `{q.tag}`: **{mark}**\n\n{q.reason}.\n\n"
            f"Hardware: {hw.get('cpu', '?')}, {hw.get('cores', '?')} cores, {hw.get('memory_gib', '?')} GiB; "
            f"GPUs: {gpus}{driver}.")


def checks_table(q: QualifyOutcome) -> pd.DataFrame:
    """Each check of the qualification, passed or not, with its detail."""
    return pd.DataFrame([{"step": c["step"], "ok": "yes" if c["ok"] else "NO", "detail": c["detail"]}
                         for c in q.checks], columns=["step", "ok", "detail"])


@dataclass
class RefreshView:
    run_dir: Path
    record: dict
    build: BuildOutcome | None
    qualify: QualifyOutcome | None

    @property
    def verdict(self) -> str:
        """The refresh's verdict, as its record states it."""
        return self.record["verdict"]

    @property
    def control_dir(self) -> Path | None:
        """The refresh's control directory, where its third step ran one (None before)."""
        path = self.run_dir / "control"
        return path if rundir.run_kind_of(path) == "control" else None


def load_refresh_section(path: str | Path) -> RefreshView | None:
    """The refresh part of a summary, or None for a gate or control directory."""
    from kit.refresh import build, qualify

    path = Path(path)
    if not (path / REFRESH_RECORD).is_file():
        return None
    b = build.load_build(path / "build") if (path / "build" / build.RECORD).is_file() else None
    q = qualify.load_qualify(path / "qualify") if (path / "qualify" / qualify.RECORD).is_file() else None
    return RefreshView(path, read_json(path / REFRESH_RECORD), b, q)


def show(view: RefreshView) -> None:
    """The refresh section of the summary: verdict, build, qualification, what a person does next."""
    from IPython.display import HTML, display

    from kit.views.audit import banner_html, pre_html, prose_html

    # Commit subjects, file names and reasons come from the fork: shown escaped, as text.
    r = view.record
    mark = "QUALIFIED" if r["verdict"] == ControlVerdict.QUALIFIED else f"NOT QUALIFIED ({r['verdict']})"
    display(HTML(banner_html(f"Refresh `{r['name']}`", r["verdict"], f"{r['reason']}.", mark=mark)))
    if view.build is not None:
        display(HTML(prose_html(build_banner(view.build))))
        display(overlay_table(view.build))
    if view.qualify is not None:
        display(HTML(prose_html(qualify_banner(view.qualify))))
        display(checks_table(view.qualify))
    if r.get("next_steps"):
        display(HTML(prose_html("## Next steps (nothing was pushed, tagged or opened)") + pre_html(r["next_steps"])))
