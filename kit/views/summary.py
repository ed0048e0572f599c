"""What the summary notebook shows: a run read back from the case results its executor recorded.

Every number comes from ``cases/<case>.json``, the result the executor wrote and judged (the same file
result.json and the verdict are made of), so the summary cannot show another number than the verdict stands on.
A case notebook's ``case_result`` scrap is read only for a case the executor recorded nothing for yet.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pandas as pd

from kit.core.noise.calibration import depth_of
from kit.core.noise.rule import SETTLES_FROM
from kit.core.noise.power import measured_elsewhere
from kit.core.records import contract, paths, rundir
from kit.core.records.records import BoundKind, CaseResult, GoldenMode, Status, prompt_severity
from kit.core.records.results import RunView, read_run
from kit.core.records.store import local_store
from kit.core.rules import rules
from kit.core.verdict.decode import StepMargin, case_headroom, failed_prompts, step_bound, worst_steps
from kit.core.rules.rules import bound_for

CASE_SCRAP = contract.CASE_RESULT_SCRAP


def latest_run(runs_dir: str | Path | None = None, kind: str | None = None) -> Path:
    """The newest gate run (``kind="gate"``), control (``"control"``), refresh or localize directory, or any gate
    run, control or refresh. ``runs_dir`` None is the project's runs/ (kit.core.records.paths.runs_root), not one
    beside the kernel's folder: a notebook's default must not depend on where JupyterLab started its kernel."""
    runs_dir = paths.runs_root() if runs_dir is None else Path(runs_dir)
    found = local_store(runs_dir).newest((kind,) if kind else ("gate", "control", "refresh"))
    if found is None:
        what = f"{kind} run" if kind in ("control", "localize") else "gate run"
        raise FileNotFoundError(f"no {what} under {runs_dir}; run `parity-kit {kind or 'gate'}` first")
    return runs_dir / found


def load_run(run_dir: str | Path) -> RunView:
    """A run as its executor recorded it (kit.core.records.results.read_run), every field of each case result kept; a
    case it recorded nothing for yet (a run still going, or stopped) is read from its notebook's scrap."""
    view = read_run(run_dir)
    for name in view.expected:
        if name not in view.results:
            scrapped = scrap_result(view.run_dir, name)
            if scrapped is not None:
                view.results[name], view.sources[name] = scrapped, "scrap"
    return view


def scrap_result(run_dir: Path, case: str) -> CaseResult | None:
    """The ``case_result`` scrap of a case's notebook, where it glued one; only ever a stand-in for the executor's
    result: the notebook can be run again by hand, or glue a second scrap, and the executor re-judges what the
    kernel wrote (kit.gate.executor), so the file it wrote is the run's record."""
    import scrapbook as sb

    nb_path = rundir.case_file(run_dir / rundir.CASES, case, rundir.CASE_NOTEBOOK)
    if not nb_path.is_file():
        return None
    scraps = sb.read_notebook(str(rundir.inside(nb_path, run_dir, "case notebook"))).scraps
    return CaseResult.from_dict(scraps[CASE_SCRAP].data) if CASE_SCRAP in scraps else None


@dataclass(frozen=True)
class Worst:
    """What a case's row shows as its worst: one prompt, at its first token or at one decode step, with that
    token's own error and the bound it was judged under. Error, bound and margin side by side are one
    measurement: a first token's error beside a decode step's bound reads as a failure that never happened."""

    prompt: str | None  # None: no prompt to name (nothing scored, or an exact case with no error at all)
    step: int | None  # None: the prompt's first token; n: its decode step n (1-based)
    error: float | None  # NaN: the token could not be scored
    bound: float | None  # None: an exact case, judged bit for bit

    @property
    def margin(self) -> float | None:
        """bound - error, in probability: negative past the bound."""
        return rules.margin(self.error, self.bound) if self.bound is not None and self.error is not None else None


def worst_shown(r: CaseResult) -> Worst:
    """The case's worst prompt and step (``worst_step_shown`` decides between a first token and a decode step),
    each number that of the same token; the case's bound alone where it scored no prompt."""
    step = worst_step_shown(r)
    if step is not None:
        return Worst(step.prompt, step.step, step.error, step.bound)
    worst = r.worst
    if worst is None:
        return Worst(None, None, None, r.bound)
    # An exact case whose every error is 0 has no prompt worse than another.
    named = worst.id if worst.max_probability_error or not worst.passed else None
    return Worst(named, None, worst.max_probability_error, worst.bound)


def case_table(view: RunView) -> pd.DataFrame:
    """One row per case: its status, its worst prompt and step with that token's error, bound and margin (per
    bucket and per decode step where bounds differ, the one nearest or furthest past its own bound), and what the
    case was judged by."""
    rows = []
    for name in view.expected:
        r = view.results.get(name)
        if r is None:
            rows.append({"case": name, "status": "missing"})
            continue
        worst = worst_shown(r)
        rows.append({
            "case": name, "backend": r.backend, "status": r.status, "golden": r.golden_kind,
            "worst_prompt": worst.prompt, "step": worst.step, "max_probability_error": worst.error,
            "bound": worst.bound, "margin": worst.margin,
            # The largest error / bound over the prompts and their decode steps: above 1 fails.
            "headroom": case_headroom(r),
            # The smallest fault the case catches, in units of its clean error (its power record): what "passed"
            # could have seen.
            "detects_from": (r.detectable or {}).get("detects_from"),
            "bound_from": r.bound_text, "drift": r.drift_text, "decode": r.decode_text,
            # A prompt that fails at a decode step is a failed prompt, though its first token passed.
            "failed_prompts": len(failed_prompts(r)), "prompts": r.counts()["prompts"],
            "noise_floor": r.noise_floor,  # largest spread across repeats; None when nothing was repeated
            "duration_s": round(r.duration_s, 1) if r.duration_s is not None else None,
            # Whose kind of fault a case that did not pass is (kit.core.verdict.triage), and how often it ran.
            "triage": (r.triage or {}).get("class"), "attempts": len(r.attempts) + 1,
        })
    return pd.DataFrame(rows).set_index("case")


def worst_step_shown(r: CaseResult) -> StepMargin | None:
    """The decode step the table's worst columns show, where one rather than a first token is the case's worst:
    a failing step (past its bound, or where the continuations diverged outside a near-tie) before a passing
    one or a passing prompt, else whichever is further past (or nearer) its own bound."""
    steps = [(s.over, s.ratio, s) for s in worst_steps(r).values() if s is not None]
    steps += [(True, s.ratio, s) for s in refused_divergences(r)]
    if not steps:
        return None
    failing, ratio, step = max(steps, key=lambda t: t[:2])
    worst = r.worst
    if worst is not None and (not worst.passed, prompt_severity(worst)) >= (failing, ratio):
        return None
    return step


def refused_divergences(r: CaseResult) -> list[StepMargin]:
    """Each step where a continuation diverged outside a near-tie: its error may sit inside its bound, yet it is
    where that prompt failed (none for an exact case, which has no bounds)."""
    step_bounds = (r.bound_source or {}).get("step_bounds")
    found = []
    for d in r.decode:
        n = d.diverged_at
        if d.passed or n is None or d.accepted or r.golden_kind == GoldenMode.EXACT:
            continue
        bound = step_bound(n, bound_for(d.bucket, r.bound, r.bucket_bounds), step_bounds)
        err = d.step_errors[n - 1] if len(d.step_errors) >= n else None
        if bound:
            found.append(StepMargin(d.id, d.bucket, n, math.nan if err is None else float(err), float(bound)))
    return found


def drift_table(view: RunView) -> pd.DataFrame:
    """One row per drift statistic of every case that ran the test: the run's mean, the calibrated
    mean and the interval clean runs stay in, and the p-value."""
    rows = []
    for name in view.expected:
        r = view.results.get(name)
        if r is None or not r.drift:
            continue
        for s in r.drift["statistics"]:
            inside = s["low"] <= s["value"] <= s["high"] if s["low"] is not None else s["value"] <= s["high"]
            rows.append({"case": name, "test": s["test"], "value": s["value"], "reference": s["reference"],
                         "low": s["low"], "high": s["high"], "p_value": s["p_value"],
                         "verdict": "within" if inside else "drifted"})
    return pd.DataFrame(rows).set_index(["case", "test"]) if rows else pd.DataFrame()


def depth_table(view: RunView) -> pd.DataFrame:
    """Per case that ran its drift test: how deep its record is (distinct clean samples, the test's degrees of
    freedom), the smallest rise of its mean error the test fails, and whether the record's bounds have settled."""
    rows = []
    for name in view.expected:
        r = view.results.get(name)
        depth = depth_of(r) if r is not None else None
        if depth is not None:
            rows.append({"case": name, "distinct_samples": depth.samples, "degrees_of_freedom": depth.dof,
                         "detects_mean_rise": depth.detects_rise, "settled": "yes" if depth.settled else "no"})
    return pd.DataFrame(rows).set_index("case") if rows else pd.DataFrame()


def depth_note(view: RunView) -> str:
    """On the first screen, a line for each case whose record is too thin for its bounds to have settled: HTML,
    every piece of text escaped."""
    descriptor = paths.display(view.manifest.get("descriptor") or "DESCRIPTOR")
    said = [d.thin(name, descriptor) for name in view.expected if name in view.results
            for d in [depth_of(view.results[name])] if d is not None]
    return "".join(f'<p style="color:#9a6700;margin:4px 0">&#9888; {html.escape(line)}</p>' for line in said if line)


def decode_frame(result: CaseResult) -> pd.DataFrame:
    """One row per prompt of a case's decode check: steps compared, its worst step against that step's own bound,
    where the continuations diverged and why that was accepted or not (empty when the case has none)."""
    worst = worst_steps(result)
    rows = []
    for d in result.decode:
        step = worst.get(d.id)
        rows.append({"prompt": d.id, "passed": d.passed, "compared": f"{d.compared}/{d.steps}",
                     "max_probability_error": d.max_probability_error,
                     "worst_step": step.step if step else None, "error_over_bound": step.ratio if step else None,
                     "diverged_at": d.diverged_at,
                     "tokens": f"{d.golden_token} -> {d.backend_token}" if d.diverged_at is not None else None,
                     "accepted": d.accepted, "why": d.why or None})
    return pd.DataFrame(rows).set_index("prompt") if rows else pd.DataFrame()


def decode_table(view: RunView) -> pd.DataFrame:
    """Every case's decode check (decode_frame), one row per case and prompt."""
    frames = {name: decode_frame(view.results[name]) for name in view.expected
              if name in view.results and view.results[name].decode}
    return pd.concat(frames, names=["case"]) if frames else pd.DataFrame()


def calibration_table(view: RunView) -> pd.DataFrame:
    """Per calibrated case and bucket: this run's largest error against the clean variants' largest, their
    spread and the bound the rule made of them, so a reader sees how far the run sits from measured noise."""
    rows = []
    for name in view.expected:
        r = view.results.get(name)
        if r is None or r.bound_kind is not BoundKind.CALIBRATED:
            continue
        src = r.bound_source
        for bucket, cal in src.get("buckets", {}).items():
            errors = [p.max_probability_error for p in r.prompts if str(p.bucket) == bucket]
            run = max(errors) if errors else None
            rows.append({"case": name, "bucket": int(bucket), "largest_error": run,
                         "calibrated_largest": cal["largest"], "calibrated_spread": cal["spread"],
                         "bound": cal["bound"],
                         "error_over_noise": run / cal["largest"] if run and cal["largest"] else None})
    return pd.DataFrame(rows).set_index(["case", "bucket"]) if rows else pd.DataFrame()


def power_table(view: RunView) -> pd.DataFrame:
    """Per case and fault family: the smallest magnitude caught in 80 % of the clean variants, its float32
    effect and that effect over the case's clean error, where it was measured."""
    rows = []
    for name in view.expected:
        r = view.results.get(name)
        d = r.detectable if r is not None else None
        for family, p in sorted(((d or {}).get("families") or {}).items()):
            # The case's own figure beside each family's: its hardest family's (kit.core.noise.power).
            rows.append({"case": name, "family": family, "fault": p["fault"], "magnitude": p["magnitude"],
                         "float32_effect": p["effect"], "x_clean_error": p["ratio"],
                         "not_caught_at": p["below"], "case_detects_from": (d or {}).get("detects_from"),
                         "measured_on": (d or {}).get("measured_on")})
    return pd.DataFrame(rows).set_index(["case", "family"]) if rows else pd.DataFrame()


def baseline_table(view: RunView, today: str | None = None) -> pd.DataFrame:
    """Per case, each baseline it was judged against when the run started (the manifest's ``baselines``): how it
    stands on this runtime (matches, falls back by the rule named, missing, hand-set), where and when it was
    made and how old it was, and its place in its lineage (how often its bounds moved, and which way)."""
    import datetime as dt

    rows = []
    now = dt.datetime.fromisoformat(today or view.manifest.get("started_at") or dt.datetime.now(dt.timezone.utc)
                                    .isoformat())
    for row in view.manifest.get("baselines") or []:
        made_at = row.get("made_at")
        age = (now - dt.datetime.fromisoformat(made_at)).days if made_at else None
        rows.append({"case": row["case"], "baseline": row["kind"], "standing": row["standing"], "rule": row["rule"],
                     "made on": row.get("made_on") or "", "age (days)": age,
                     "file": Path(row["file"]).name if row.get("file") else "", "lineage": row.get("lineage") or ""})
    return pd.DataFrame(rows).set_index(["case", "baseline"]) if rows else pd.DataFrame()


def prompt_frame(results: Mapping[str, CaseResult]) -> pd.DataFrame:
    """One row per scored prompt of every case, with the case and backend names."""
    rows = [{"case": name, "backend": r.backend, **p.to_dict()} for name, r in results.items() for p in r.prompts]
    return pd.DataFrame(rows)


TABLE_FORMAT = {"max_probability_error": "{:.4g}", "bound": "{:g}", "margin": "{:+.2g}", "duration_s": "{:.1f}",
                "headroom": "{:.2f}", "noise_floor": "{:.3g}"}
# Columns shown only where some case has something in them: a noise floor where a case repeated, a triage class
# and an attempt count where a case was retried, a detectable effect where one was measured.
QUIET_COLUMNS = {"noise_floor": None, "triage": None, "attempts": 1, "detects_from": None}
# The columns that are one token's: its prompt and step, its error, the bound it was judged under and the margin
# between them, under one heading.
WORST_COLUMNS = ("worst_prompt", "step", "max_probability_error", "bound", "margin")
WORST_HEADING = "the worst token, against its own bound"
HEADERS = {"worst_prompt": "prompt", "headroom": "headroom (error / bound)", "bound_from": "bounds",
           "detects_from": "detects from (x clean error)"}
# How each column's text lays out. Numbers, statuses and counts stay on one line (a number broken over two reads as
# two); text may break between words, a prompt's id anywhere (it may have no spaces or hyphens), and the longest
# texts have a preferred width, which a browser gives a table cell's column unless its longest word needs more, so
# that a 1400-pixel window holds the table (the decode check's sentence alone would take a fifth of it).
WRAPS = {"white-space": "normal"}
TEXT_LAYOUT = {"backend": {}, "status": {}, "step": WRAPS, "bound_from": WRAPS, "triage": WRAPS,
               "worst_prompt": {**WRAPS, "overflow-wrap": "anywhere", "min-width": "10ch"},
               "drift": {**WRAPS, "width": "10ch"}, "decode": {**WRAPS, "width": "13ch"},
               "detects_from": {**WRAPS, "width": "8ch", "text-align": "right"}}


def styled_case_table(view: RunView):
    """The case table as a reader wants it: few digits, a dash where a number does not apply, the worst token's
    columns under one heading, headers in words (which a browser can wrap: an underscored name is one unbreakable
    word), the bounds' source in a word (its record and rule in ``bounds_note`` below the table: in the cell they
    made the table outgrow a 1400-pixel window), and no column that is empty for every case."""
    table = case_table(view)
    empty = [c for c, nothing in QUIET_COLUMNS.items()
             if c in table and all(pd.isna(v) or v == nothing for v in table[c])]
    if "detects_from" in table and "detects_from" not in empty:
        table["detects_from"] = [detects_text(view.results.get(str(c))) for c in table.index]
    if "prompts" in table:  # one column "2/64" in place of two
        table["failed_prompts"] = [None if pd.isna(n) else f"{int(f)}/{int(n)}"
                                   for f, n in zip(table["failed_prompts"], table["prompts"])]
        empty.append("prompts")
    if "step" in table:
        table["step"] = [None if pd.isna(p) else "first token" if pd.isna(n) else f"decode {int(n)}"
                         for p, n in zip(table["worst_prompt"], table["step"])]
    if "bound_from" in table:
        table["bound_from"] = [judged_by_words(view.results.get(str(c))) for c in table.index]
    if "drift" in table:  # "passed, p = 0.19" may break after its comma only
        table["drift"] = [d.replace(" = ", "\u00a0=\u00a0") if isinstance(d, str) else d for d in table["drift"]]
    if "attempts" in table and "attempts" not in empty:  # a case run again says so beside how it ended
        table["status"] = [s if pd.isna(n) or n == 1 else f"{s}, run {int(n)}"
                           for s, n in zip(table["status"], table["attempts"])]
        empty.append("attempts")
    # An exact golden is named in the bounds' column.
    table = table.drop(columns=empty + ["golden"], errors="ignore")
    heading = {c: (WORST_HEADING if c in WORST_COLUMNS else "", HEADERS.get(c, c.replace("_", " ")))
               for c in table.columns}
    table.columns = pd.MultiIndex.from_tuples([heading[c] for c in table.columns])
    text = [heading[c] for c in TEXT_LAYOUT if c in heading and c != "detects_from"]
    styled = (table.style.format({heading[k]: v for k, v in TABLE_FORMAT.items() if k in heading}, na_rep="—",
                                 escape="html")
              .format_index(escape="html", axis=1)
              .hide(axis="index", names=True)  # the case names say what they are; their heading cost a row
              .set_properties(subset=[h for c, h in heading.items() if "white-space" not in TEXT_LAYOUT.get(c, {})],
                              **{"white-space": "nowrap"})
              .set_properties(subset=text, **{"text-align": "left"})
              .set_table_styles([{"selector": "th.col_heading.level0", "props": "text-align: center"},
                                 {"selector": "td, th", "props": "padding: 4px 5px"}]
                                + [{"selector": f"th.col_heading.level1.col{i}", "props": "text-align: left"}
                                   for i, c in enumerate(table.columns) if c in text], overwrite=False))
    if "status" in heading:  # what did not pass stands out in the verdict's colour
        css = [status_css(view.results[c].status if c in view.results else "missing") for c in table.index]
        styled = styled.apply(lambda _: css, subset=[heading["status"]])
    for column, layout in TEXT_LAYOUT.items():
        if column in heading and layout:
            styled = styled.set_properties(subset=[heading[column]], **layout)
    return styled


def status_css(status: str) -> str:
    """A status cell's style: none for a pass, else bold in the colour its verdict's banner takes."""
    from kit.views.audit import BANNER_COLORS

    color = BANNER_COLORS.get(status, BANNER_COLORS[Status.FAILED])
    return "" if status == Status.PASSED else f"color: {color}; font-weight: 600"


def judged_by_words(r: CaseResult | None) -> str | None:
    """What a case was judged by, in a word or two: its bounds' source (calibrated, hand-set), or an exact golden."""
    if r is None:
        return None
    kind = r.bound_kind
    return "exact golden" if kind is BoundKind.EXACT else kind.value


def bounds_note(view: RunView) -> str:
    """Below the case table, each case's bounds in full (their span, and the record and rule that set them): HTML,
    every piece of text escaped."""
    ran = [(name, view.results[name]) for name in view.expected if name in view.results]
    said = [f"<code>{html.escape(name)}</code> {html.escape(bounds_text(r))}" for name, r in ran
            if r.bound_kind is not BoundKind.EXACT]
    return ('<p style="color:#57606a;font-size:0.9em;margin:4px 0 12px 0">Bounds: ' + "; ".join(said) + "</p>"
            if said else "")


def bounds_text(r: CaseResult) -> str:
    """A case's bounds in a few words (``CaseResult.bound_text``), and those of its decode steps where a
    calibration measured them."""
    steps = sorted(float(b) for b in ((r.bound_source or {}).get("step_bounds") or {}).values())
    if not steps:
        return r.bound_text
    span = f"{steps[0]:g}" if steps[0] == steps[-1] else f"{steps[0]:g}-{steps[-1]:g}"
    return f"{r.bound_text}; decode steps {span}"


def detects_text(r: CaseResult | None) -> str | None:
    """"1.9x", and where the power record was measured on another class of hardware than this run's record,
    which one: the figure is then that class's, not a measurement of this host."""
    d = r.detectable if r is not None else None
    if not d or d.get("detects_from") is None:
        return None
    return f"{d['detects_from']:.2g}x{measured_elsewhere(d)}"


def failure_lines(view: RunView, per_case: int = 5) -> list[str]:
    """The first failure messages of every case, so one noisy case cannot hide another."""
    lines = []
    for name in view.expected:
        if name not in view.results:
            lines.append(f"{name}: missing (no result was recorded)")
            continue
        r = view.results[name]
        messages = r.failure_messages
        lines += messages[:per_case]
        if len(messages) > per_case:
            lines.append(f"{name}: ... and {len(messages) - per_case} more")
        if r.triage:
            lines.append(f"{name}: triage: {r.triage.get('evidence')}")
        lines += [f"{name}: attempt {a.get('attempt')} was retried: {(a.get('triage') or {}).get('evidence')}"
                  for a in r.attempts]
    return lines


def false_failure_line(view: RunView) -> str | None:
    """The run's statement of its false-failure rate, as its manifest records it (None: a run that stated none)."""
    stated = (view.manifest.get("false_failure_rate") or {}).get("statement")
    return stated[0].upper() + stated[1:] + "." if stated else None


def show_run(view: RunView, save_figures: bool = True) -> None:
    """One run's section of the summary: verdict banner, case table, plots, worst prompts,
    failures and provenance. Data from the world goes out escaped or as plain text. The plots
    also go to the run's figures/ folder, for `parity-kit report --markdown` and the zip."""
    import matplotlib.pyplot as plt
    from IPython.display import HTML, display

    from kit.views import audit, coverage, plots

    display(HTML(audit.run_banner(view)))
    display(styled_case_table(view))
    display(HTML(bounds_note(view)))
    thin = depth_note(view)
    if thin:
        display(HTML(thin))
    stated = false_failure_line(view)
    if stated:
        display(HTML(f"<p>{html.escape(stated)}</p>"))
    coverage.show_run_coverage(view.manifest)  # what the verdict cannot see: tokens and positions no prompt reaches
    prompts = prompt_frame(view.results)
    figures = {plots.HEADROOM: plots.headroom_bars(view.results),
               plots.BY_BUCKET: plots.error_by_bucket(prompts),
               plots.VS_LENGTH: plots.error_vs_length(prompts, title="max probability error per prompt")}
    if any(r.detectable for r in view.results.values()):
        figures[plots.DETECTABLE] = plots.detectable(view.results)
    for stem, fig in figures.items():
        if save_figures:
            plots.save_figure_or_say(fig, view.run_dir / rundir.FIGURES, stem)
        display(fig)
        plt.close(fig)  # shown once, here, not again when the cell ends
    baselines = baseline_table(view)
    if not baselines.empty:
        display(HTML("<h4>Baselines: what each case was judged against, and how it stands on this runtime</h4>"))
        display(baselines.style.format({"age (days)": "{:.0f}"}, na_rep="—", escape="html"))
    calibration = calibration_table(view)
    if not calibration.empty:
        display(HTML("<h4>Against calibrated noise: each bucket's largest error beside the clean variants'</h4>"))
        display(calibration.style.format("{:.4g}", na_rep="—", escape="html"))
    power = power_table(view)
    if not power.empty:
        display(HTML("<h4>Power: the smallest fault of each family each case catches in 80 % of its clean "
                     "variants</h4>"))
        display(power.style.format({"magnitude": "{:g}", "float32_effect": "{:.3g}", "x_clean_error": "{:.2g}",
                                    "not_caught_at": "{:g}", "case_detects_from": "{:.2g}"}, na_rep="—",
                                   escape="html"))
    depth = depth_table(view)
    if not depth.empty:
        display(HTML(f"<h4>Record depth: each calibrated case's clean samples, its drift test's degrees of freedom and "
                     f"the smallest rise of its mean error that test fails (bounds settle from {SETTLES_FROM} "
                     "samples)</h4>"))
        display(depth.style.format({"degrees_of_freedom": "{:.0f}", "detects_mean_rise": "{:+.1%}"}, na_rep="—",
                                   escape="html"))
    drift = drift_table(view)
    if not drift.empty:
        display(HTML("<h4>Drift: each case's mean over its prompts against its calibrated clean samples</h4>"))
        display(drift.style.format({"value": "{:+.5f}", "reference": "{:+.5f}", "low": "{:+.5f}", "high": "{:+.5f}",
                                    "p_value": "{:.2g}"}, na_rep="—", escape="html"))
    decode = decode_table(view)
    if not decode.empty:
        display(HTML("<h4>Decode: each prompt's greedy continuation against the golden's, step by step</h4>"))
        display(decode.style.format({"max_probability_error": "{:.4g}", "worst_step": "{:.0f}",
                                     "error_over_bound": "{:.2f}", "diverged_at": "{:.0f}"}, na_rep="—",
                                    escape="html"))
    display(HTML("<h4>Worst prompts: the golden's and the backend's top tokens</h4>"))
    display(audit.styled_worst_prompts(view))
    print("\n".join(failure_lines(view) or ["no failures"]))
    display(HTML(f"<h4>Provenance</h4><p>{html.escape(audit.PATHS_NOTE)}</p>"))
    display(audit.styled_provenance(view))


