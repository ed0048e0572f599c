"""What the control and summary notebooks show of a control run, read back from scraps."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from kit.control.run import control_runs, is_control_dir
from kit.core.records import contract, rundir
from kit.core.verdict.diagnosis import HEADLINES, Diagnosis, diagnose
from kit.core.records.results import RunView
from kit.views.summary import load_run

DIAGNOSIS_SCRAP = contract.DIAGNOSIS_SCRAP


@dataclass(frozen=True)
class ControlView:
    control_dir: Path
    current: RunView
    candidate: RunView
    diagnosis: Diagnosis

    @property
    def runs(self) -> list[RunView]:
        """The control's two runs, pin first."""
        return [self.current, self.candidate]


def load_control(control_dir: str | Path) -> ControlView:
    """Both runs from their case notebooks' scraps, diagnosed here, so every number has one source."""
    current, candidate = (load_run(p) for p in control_runs(control_dir))
    return ControlView(Path(control_dir), current, candidate, diagnose(current, candidate))


def load_control_section(path: str | Path) -> ControlView | None:
    """The control part of a summary: the diagnosis the control notebook glued, or None for a gate run."""
    import scrapbook as sb

    if not is_control_dir(path):
        return None
    view = load_control(path)
    executed = Path(path) / rundir.CONTROL_NOTEBOOK
    if executed.is_file():
        scraps = sb.read_notebook(str(executed)).scraps
        if DIAGNOSIS_SCRAP in scraps:
            view = replace(view, diagnosis=Diagnosis.from_dict(scraps[DIAGNOSIS_SCRAP].data))
    return view


def banner(view: ControlView) -> str:
    """The diagnosis as a verdict banner (HTML, every piece of text escaped)."""
    from kit.views.audit import banner_html

    d = view.diagnosis
    return banner_html(f"Control: today's pin `{d.current}` against candidate `{d.candidate}`",
                       d.verdict, f"{d.reason[0].upper()}{d.reason[1:]}.", mark=HEADLINES[d.verdict].upper())


def comparison_table(view: ControlView) -> pd.DataFrame:
    """The control's table, one row a case: both runs' status and error, the bound, the change against the noise,
    and the paired comparison."""
    rows = [{"case": r.case, "backend": r.backend, "control": r.control_status, "candidate": r.candidate_status,
             "control_error": r.control_error, "candidate_error": r.candidate_error, "bound": r.bound,
             "delta": r.delta, "noise_floor": r.noise_floor or None,
             "same_metrics": {True: "yes", False: "no"}.get(r.same_metrics, "—"),
             # The candidate's error against the pin's prompt by prompt, effect and interval (kit.core.verdict.paired).
             "paired": r.paired_text}
            for r in view.diagnosis.rows]
    return pd.DataFrame(rows).set_index("case")


def styled_comparison_table(view: ControlView):
    """The control's table formatted for its notebook, the world's text made inert."""
    fmt = {"control_error": "{:.4g}", "candidate_error": "{:.4g}", "bound": "{:g}", "delta": "{:+.3g}",
           "noise_floor": "{:.2g}"}
    return comparison_table(view).style.format(fmt, na_rep="—", escape="html")


def show(view: ControlView) -> None:
    """The control section of the summary: banner, side-by-side table, both errors against the bound."""
    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    from kit.views import plots

    display(HTML(banner(view)))
    display(styled_comparison_table(view))
    fig = plots.control_vs_bound(view.diagnosis.rows)
    display(fig)
    plt.close(fig)  # shown once, here, not again when the cell ends
