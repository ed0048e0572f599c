"""The run's artifacts for people: result.json, evidence.md, summary.ipynb and summary.html."""

from __future__ import annotations

import html
import math
import re
import shlex
from pathlib import Path
from typing import Mapping, Sequence

from kit.core.records import paths, rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import atomic_write_bytes, read_input_bytes, write_json
from kit.core.verdict.nextsteps import next_steps, one_command
from kit.core.noise.calibration import depth_of
from kit.core.noise.power import family_lines, headline
from kit.core.records.records import CaseResult, Status, prompt_severity
from kit.core.records.results import counts_sentence
from kit.core.verdict import failures_of
from kit.core.records.text import printable
from kit.run.notebook import Rendered, run_and_render

SUMMARY_NOTEBOOK = paths.NOTEBOOKS / rundir.SUMMARY_NOTEBOOK


# Markdown punctuation that could open a link, an image, code, raw HTML, an entity, emphasis or a
# table cell. An underscore between letters or digits (paths, identifiers) never opens emphasis,
# so it stays as it is and a path still reads as a path in the raw text.
_MD_SPECIAL = re.compile(r"[\\`*\[\]<|~&]|(?<![^\W_])_|_(?![^\W_])")
# @user and @org/team notify people; #12 links (and notes itself on) an issue.
_NOTIFIES = re.compile(r"@(?=\w)|#(?=\d)")
_NEWLINES = re.compile(r"\r\n|[\r\n\u2028\u2029]")


# How evidence.md labels the run's root digest; kit.gate.verify finds the quoted digest by the same label.
ROOT_DIGEST_LABEL = "Root digest: "

def md(text: object, code: bool = False) -> str:
    """Text from the world (prompt ids, case names, messages, release names, commit subjects) as
    Markdown shows it literally, on one line, in prose, a list or a table cell alike: it mentions
    no one, opens no link, image or HTML and splits no cell, and writes no control character raw (an escape
    sequence, a bell, a right-to-left override: kit.core.records.text). ``code`` sets it as inline code; text
    holding ``|`` stays escaped prose instead, as a table would split a code span there."""
    text = printable(_NEWLINES.sub(" ", str(text)))
    if code and "|" not in text:
        return _code_span(text)
    return _NOTIFIES.sub(lambda m: m.group() + "\u200b", _MD_SPECIAL.sub(lambda m: "\\" + m.group(), text))


def _code_span(text: str) -> str:
    """``text`` as inline code, whatever backticks it holds (a fence longer than any run of them inside)."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def reproduce_line(command: Sequence[str]) -> str:
    """evidence.md's "Reproduce" line: the command shell-quoted (``shlex.join``), so that a release or folder name
    holding a space or a shell character pastes back as the same arguments. As inline code, never in a table, so
    ``|`` stays in it; a control character (a newline included) is escaped, and such a command is shown, not
    pasted."""
    argv = [str(c) for c in command] if isinstance(command, (list, tuple)) else [str(command)]
    return f"Reproduce: {_code_span(printable(shlex.join(argv)))}"


def _md_backticked(text: str) -> str:
    """A sentence of ours that sets world names in backticks (the diagnosis's reasons): each
    name as inline code, the rest as text, every part through md()."""
    return "".join(md(part, code=bool(i % 2)) if part else "" for i, part in enumerate(text.split("`")))


def result_document(name: str, verdict: str, counts: dict, duration_s: float,
                    expected: Sequence[str], results: Mapping[str, CaseResult]) -> dict:
    """result.json's document: the run's verdict and counts, every case's result, and the cases that left none."""
    return {
        "name": name, "verdict": verdict, "counts": counts, "duration_s": duration_s,
        "cases": {n: results[n].to_dict() for n in expected if n in results},
        "missing": [n for n in expected if n not in results],
    }


def write_result(run_dir: Path, doc: dict) -> Path:
    """Write result.json into the run directory, atomically."""
    return write_json(run_dir / rundir.RESULT, doc)


def write_gate_result(run_dir: Path, manifest: dict, verdict: str, counts: dict, duration_s: float,
                      expected: Sequence[str], results: Mapping[str, CaseResult]) -> Path:
    """A gate run's result.json: its verdict, counts and case results, and the false-failure rate its manifest
    states."""
    return write_result(run_dir, {**result_document(manifest["name"], verdict, counts, duration_s, expected, results),
                                  **false_failure_part(manifest)})


def evidence_markdown(manifest: dict, verdict: str, counts: dict, duration_s: float,
                      results: Mapping[str, CaseResult], trend: str | None = None, run_dir: Path | None = None) -> str:
    """A paragraph fit for an issue comment: verdict, counts, what to do next, the worst case, digests, command."""
    lines = [f"**Parity gate {md(manifest['name'], code=True)}: {verdict}.** {counts_sentence(counts, duration_s)}.",
             ""]
    lines += next_steps_markdown(manifest, results, run_dir)
    for name in manifest["cases"]:
        r = results.get(name)
        if r is None:
            # A resume's unselected case may have a result that no longer holds: recorded, but not counted.
            why = "not run again, and no earlier result of it holds" if name in (manifest.get("kept") or {}) \
                else "no result was recorded"
            lines.append(f"- {md(name, code=True)}: missing ({why})")
        elif r.status in (Status.ERROR, Status.TIMEOUT):
            lines.append(f"- {md(name, code=True)} ({md(r.backend)}): **{r.status}**: {md(r.error)}")
        elif r.status == Status.NO_BASELINE:
            lines.append(f"- {md(name, code=True)} ({md(r.backend)}): **no baseline**, not judged: {md(r.error)}")
        elif r.status == Status.INCONCLUSIVE:
            lines.append(f"- {md(name, code=True)} ({md(r.backend)}): **inconclusive**, within its bounds but "
                         f"{md(r.error)}")
        elif r.status == Status.BORROWED:
            lines.append(f"- {md(name, code=True)} ({md(r.backend)}): **failed under borrowed bounds**: {md(r.error)}")
            lines += [f"  - {md(line)}" for line in r.failures[:5]]
        elif r.status == Status.FAILED and not r.counts()["failed"] and any(not d.passed for d in r.decode):
            lines.append(f"- {md(name, code=True)} ({md(r.backend)}): **failed** its decode check; every one of its "
                         f"{r.counts()['prompts']} prompts passes on the first token")
        elif r.status == Status.FAILED:
            w = r.worst
            assert w is not None  # a failed verdict covers the case's prompts (kit.core.verdict.coverage)
            lines.append(f"- {md(name, code=True)} ({md(r.backend)}): **failed** on {r.counts()['failed']} of "
                         f"{r.counts()['prompts']} prompts; worst {md(w.id, code=True)} (bucket {w.bucket}): "
                         f"{md(_worst_reason(w))}")
        if r is not None and r.decode and r.status == Status.FAILED:
            lines.append(f"  - decode: {md(r.decode_text)}" + _decode_failure(r))
        if r is not None and r.triage:
            lines.append(f"  - triage: {md(r.triage.get('evidence', ''))}")
        if r is not None and r.attempts:
            lines += [f"  - attempt {a.get('attempt')} was retried: {md(a.get('status'))}, "
                      f"{md((a.get('triage') or {}).get('evidence') or a.get('error'))}; its files in "
                      f"{md(', '.join(a.get('files') or []) or 'none', code=True)}" for a in r.attempts]
        if r is not None and r.status != Status.PASSED:
            lines += [f"  - note: {md(note)}" for note in r.notes]
        if r is not None and r.detectable and r.status in (Status.PASSED, Status.INCONCLUSIVE):
            lines.append(f"  - {md(name, code=True)} {md(headline(r.detectable))}: "
                         f"{md('; '.join(family_lines(r.detectable)))}")
    if all(name in results and results[name].status == Status.PASSED for name in manifest["cases"]):
        worst = max((r for r in results.values() if r.prompts), default=None,
                    key=lambda r: r.max_probability_error or 0)
        if worst is not None:
            w = worst.worst
            assert w is not None  # chosen among the results with prompts
            bound = f"bound {w.bound:g}" if w.bound is not None else "exact"
            lines.append(f"Largest error: {md(worst.case, code=True)} on {md(w.id, code=True)}: max probability error "
                         f"{w.max_probability_error:.3g} ({bound}).")
    if manifest.get("retried"):  # the verdict of these cases is their second (or later) attempt's
        lines += [f"Retried after an infrastructure failure: {md(n, code=True)} ({md(why)})."
                  for n, why in manifest["retried"].items()]
    if trend:  # a step up in some case's error that this run completed (kit.gate.trend)
        lines.append(md(trend))
    if manifest.get("reused"):  # a resumed run: say which verdicts were not computed by this command
        names = ", ".join(md(n, code=True) for n in manifest["reused"])
        lines.append(f"Reused from an earlier run into this directory, inputs unchanged: {names}.")
    if manifest.get("kept"):  # resumed with --case: the cases it did not run still count
        lines += [f"Not run again: {md(n, code=True)}: {md(why)}."  # its reason names --case itself
                  for n, why in manifest["kept"].items()]
    if manifest.get("notebooks"):  # code from the descriptor, not the kit's notebooks: name it by digest
        lines += [f"Custom notebook of {md(n, code=True)}: {md(nb['path'], code=True)} (sha256 "
                  f"{md(nb['sha256'], code=True)})." for n, nb in manifest["notebooks"].items()]
    lines += false_failure_lines(manifest)
    lines += depth_lines(manifest, results)
    lines += ["", _digests_line(manifest),
              reproduce_line(manifest.get("command") or ["parity-kit", "gate"])]
    if manifest.get("root_sha256"):  # what `parity-kit verify` checks a copy of the run against
        lines.append(f"{ROOT_DIGEST_LABEL}{md(manifest['root_sha256'], code=True)} (`parity-kit verify` re-judges "
                     "every case of a copy of this run, or its zip, with no engine).")
    return "\n".join([*lines, ""])


def depth_lines(manifest: dict, results: Mapping[str, CaseResult]) -> list[str]:
    """How deep each calibrated case's record is (kit.core.noise.calibration.depth_of), and a warning for each record
    too thin for its bounds to have settled, with the command that deepens it."""
    descriptor = paths.display(manifest.get("descriptor") or "DESCRIPTOR")
    depths = {name: d for name in manifest["cases"] if name in results
              for d in [depth_of(results[name])] if d is not None}
    if not depths:
        return []
    lines = ["Record depth: " + "; ".join(f"{md(n, code=True)} {md(d.text())}" for n, d in depths.items()) + "."]
    return lines + [f"Thin record: {md(line)}." for n, d in depths.items() if (line := d.thin(n, descriptor))]


def next_steps_markdown(manifest: dict, results: Mapping[str, CaseResult], run_dir: Path | None) -> list[str]:
    """What did not pass, of which kind, and the command that moves each on (kit.core.verdict.nextsteps); nothing for a
    passed run."""
    descriptor = paths.display(manifest.get("descriptor") or "DESCRIPTOR")
    steps = next_steps(manifest["cases"], results, descriptor, paths.display(run_dir) if run_dir else "RUN_DIR")
    if not steps:
        return []
    lines = ["Next:"] + [f"- {md(s.case, code=True)}: **{md(s.kind)}**"
                         + (f": {md(s.command, code=True)}" if s.command else "") for s in steps]
    together = one_command(steps, descriptor)
    if together:
        lines.append(f"- every missing baseline at once: {md(together, code=True)}")
    return [*lines, ""]


def false_failure_part(manifest: dict) -> dict:
    """result.json's statement of the gate's false-failure rate, as the manifest records it from the plan
    (kit.descriptor.falsefailure); nothing for a manifest of a kit that stated none."""
    stated = manifest.get("false_failure_rate")
    return {"false_failure_rate": stated} if stated else {}


def false_failure_lines(manifest: dict) -> list[str]:
    """evidence.md's line of the gate's false-failure rate (none where the manifest states none)."""
    stated = (manifest.get("false_failure_rate") or {}).get("statement")
    return [f"{md(stated[0].upper() + stated[1:])}."] if stated else []


def _digests_line(manifest: dict) -> str:
    goldens = ", ".join(f"{md(k)} {md(v['sha256'][:12], code=True)}" for k, v in manifest.get("goldens", {}).items())
    return (f"Fixture {md(manifest['fixture_sha256'][:16], code=True)} · model "
            f"{md(manifest['model_digest'][:16], code=True)} · goldens {goldens} · kit {md(manifest['kit_version'])}")


def _decode_failure(r: CaseResult) -> str:
    failed = [d for d in r.decode if not d.passed]
    if not failed:
        return ""
    return (f"; failed on {len(failed)} of {len(r.decode)} prompts, first "
            f"{md(failed[0].failures[0] if failed[0].failures else failed[0].id)}")


def decode_markdown(view) -> list[str]:
    """The decode checks of a run, one row per prompt that diverged or failed (none when no case decodes)."""
    rows = [(name, d) for name in view.expected if name in view.results for d in view.results[name].decode]
    if not rows:
        return []
    lines = ["| case | steps compared | diverged | prompts diverged or failed |", "| --- | ---: | ---: | --- |"]
    for name in view.expected:
        r = view.results.get(name)
        if r is None or not r.decode:
            continue
        notable = [d for d in r.decode if d.diverged_at is not None or not d.passed]
        where = "; ".join(
            f"{md(d.id, code=True)} step {d.diverged_at}: {d.golden_token} -> {d.backend_token}, "
            f"{'accepted' if d.accepted else 'not accepted'} ({md(d.why)})" if d.diverged_at is not None
            else f"{md(d.id, code=True)}: {md(d.failures[0] if d.failures else 'failed')}" for d in notable)
        lines.append(f"| {md(name, code=True)} | {sum(d.compared for d in r.decode)}/{sum(d.steps for d in r.decode)} "
                     f"| {sum(d.diverged_at is not None for d in r.decode)} | {where or '—'} |")
    return lines


def _worst_reason(score) -> str:
    failures = failures_of(score)
    if failures:
        return failures[0].clause
    return f"max probability error {score.max_probability_error:.3g}"


def write_evidence(run_dir: Path, text: str) -> Path:
    """Write evidence.md into the run directory, atomically."""
    return atomic_write_bytes(run_dir / rundir.EVIDENCE, text.encode("utf-8"))


def write_gate_evidence(run_dir: Path, manifest: dict, verdict: str, counts: dict, duration_s: float,
                        results: Mapping[str, CaseResult], trend: str | None = None) -> Path:
    """A gate run's evidence.md (``evidence_markdown``)."""
    return write_evidence(run_dir, evidence_markdown(manifest, verdict, counts, duration_s, results, trend, run_dir))


def build_summary(run_dir: Path, kernel: str = paths.MAIN_KERNEL, timeout_s: float = 300) -> Rendered:
    """Execute the summary notebook over the run (a gate run, a control or a refresh directory) and render it to
    HTML, also when a cell failed, so the reader sees where. It runs once the verdict and every record are on
    disk, so whatever fails in it (a plot, the kernel, a missing piece of nbconvert) is the outcome's one line,
    never an exception that would turn a finished verdict into an internal error. While it runs, the directory
    holds ``summary.pending``: a run stopped meanwhile leaves it, and `report --attach` says so."""
    owe_summary(run_dir, "it was stopped while its summary was being built")
    try:
        built = run_and_render(SUMMARY_NOTEBOOK, run_dir / rundir.SUMMARY_NOTEBOOK, {"run_dir": str(run_dir)},
                               timeout_s, rundir.kernel_log(run_dir, "summary"), kernel)
    except Exception:  # a failure is said by its caller; only a stop leaves the mark
        (run_dir / rundir.SUMMARY_PENDING).unlink(missing_ok=True)
        raise
    (run_dir / rundir.SUMMARY_PENDING).unlink(missing_ok=True)
    return built


def owe_summary(run_dir: Path, why: str) -> None:
    """Mark the run's summary as owed, saying why (read back only to be shown)."""
    atomic_write_bytes(run_dir / rundir.SUMMARY_PENDING, f"{why}\n".encode())


def summary_later(run_dir: Path) -> str:
    """The command that builds a directory's summary again (once the notebook stack is mended)."""
    return f"parity-kit report {shlex.quote(paths.display(run_dir))} --summary"


def summary_failure(run_dir: Path, error: str) -> str:
    """The one line a failed summary is: what failed, that the verdict stands, and how to build it later."""
    return (f"summary not built in full: {error}; the verdict and its records are written and stand; "
            f"build it later with `{summary_later(run_dir)}`")


def control_evidence(control: dict, diagnosis, views: Sequence) -> str:
    """evidence.md of a control run: a title a pin PR or a blocker issue can take as it is,
    the verdict in one sentence, each run's counts, the worst case per failing backend,
    what to repair first, releases, digests and the command that reproduces it all."""
    from kit.core.verdict.diagnosis import HEADLINES, ControlVerdict

    d = diagnosis
    named = {v.release: v for v in views}
    cur, cand = named.get(d.current), named.get(d.candidate)
    if d.verdict == ControlVerdict.QUALIFIED:
        title = (f"# Qualified: {md(control['name'])} — candidate {md(d.candidate, code=True)} passes every case, "
                 "and so does the control")
    else:
        cases = d.candidate_failures or d.control_failures
        title = f"# Refresh blocked: {md(control['name'])} — {HEADLINES[d.verdict]}"
        title += f" ({', '.join(map(md, cases))})" if cases and not d.incomplete else ""
    lines = [title, "", f"**{_md_backticked(d.reason[0].upper() + d.reason[1:])}.**", "",
             "| run | release | result |", "| --- | --- | --- |"]
    for role, view in (("control (today's pin)", cur), ("candidate", cand)):
        if view is not None:
            duration = view.manifest.get("duration_s") or 0.0
            lines.append(f"| {role} | {md(view.release, code=True)} | {view.verdict}: "
                         f"{counts_sentence(view.counts, duration)} |")
    lines.append("")
    for label, view in ((d.current, cur), (d.candidate, cand)):
        for line in _worst_per_backend(label, view):
            lines.append(line)
    lines += [f"- {_md_backticked(line)}" for line in d.incomplete]
    # each case's paired effect (kit.core.verdict.paired): the candidate's error against the pin's, per prompt
    if d.rows:
        lines += ["", "The candidate against the pin, prompt by prompt:", ""]
        lines += [f"- {_md_backticked(line)}" for line in d.case_lines]
    if d.verdict in (ControlVerdict.BLOCKER, ControlVerdict.BOTH_BROKEN):
        lines += ["", _repair_first(d, cur)]
    lines += ["", "Releases:", "", "| release | backend | kernel | version | source commit | wheels |",
              "| --- | --- | --- | --- | --- | --- |"]
    for view in (cur, cand):
        rel = (view.manifest.get("release") or {}) if view is not None else {}
        for backend, built in (rel.get("backends") or {}).items():
            wheels = ", ".join(f"{md(n)} {md(h[:12], code=True)}"
                               for n, h in built.get("wheels", {}).items()) or "—"
            lines.append(f"| {md(rel['name'], code=True)} | {md(backend)} | {md(built['kernel'], code=True)} | "
                         f"{md(built.get('version') or '—')} | {md(built.get('source_commit') or '—')} | {wheels} |")
    if cur is not None:
        lines += ["", _digests_line(cur.manifest)]
    lines += [reproduce_line(control.get("command") or ["parity-kit", "control"]), ""]
    return "\n".join(lines)


def _worst_per_backend(label: str, view) -> list[str]:
    if view is None:
        return []
    failed = [r for r in view.results.values() if r.status == Status.FAILED and r.worst is not None]
    lines = []
    for backend in dict.fromkeys(r.backend for r in failed):
        r = max((r for r in failed if r.backend == backend), key=lambda r: prompt_severity(r.worst))
        w = r.worst
        bound = f"bound {w.bound:g}" if w.bound is not None else "exact golden"
        err = w.max_probability_error
        err_text = f"{err:.3g}" if err is not None and err == err else "not finite"
        lines.append(f"- {md(label, code=True)}, {md(backend)}: worst case {md(r.case, code=True)} "
                     f"({r.counts()['failed']} of {r.counts()['prompts']} prompts failed), prompt "
                     f"{md(w.id, code=True)} (bucket {w.bucket}): "
                     f"max probability error {err_text}, {bound}: {md(_worst_reason(w))}")
    return lines


def _repair_first(d, cur) -> str:
    from kit.core.verdict.diagnosis import ControlVerdict, sameness

    goldens = sorted({Path(cur.results[c].golden_path).name for c in d.control_failures
                      if cur is not None and c in cur.results and cur.results[c].golden_path})
    backends = sorted({r.backend for r in d.rows if r.case in d.control_failures and r.backend})
    if d.verdict == ControlVerdict.BLOCKER and d.candidate_failures:
        head = (f"The control ({md(d.current, code=True)}) reproduced the candidate's failure with {sameness(d)}, "
                "so the candidate is not at fault.")
    else:
        head = f"The control ({md(d.current, code=True)}) fails on its own."
    named = ", ".join(md(g, code=True) for g in goldens) or "its golden"
    return (f"{head} Repair first: the golden ({named}; "
            f"`parity-kit golden regen` writes a reviewed replacement) or the oracle "
            f"({', '.join(map(md, backends))} in {md(d.current, code=True)}), then run the control again.")


def markdown_report(run_dir: str | Path) -> str:
    """evidence.md plus, per run, a compact case table and the summary's figures (linked by paths
    relative to ``run_dir``, so they show once the folder is uploaded next to the comment). A damaged record
    (or one an older kit wrote without what this one reads) is refused in one line naming its file."""
    from kit.core.records.results import RunDir, read_run

    run_dir = Path(run_dir)
    written = RunDir.local(run_dir).read_bytes(rundir.EVIDENCE)
    evidence = utf8(written, run_dir / rundir.EVIDENCE) if written is not None else ""
    if (run_dir / rundir.CONTROL).is_file():
        views = [read_run(folder) for folder in rundir.control_run_dirs(run_dir)]
    else:
        views = [read_run(run_dir)]
    parts = [evidence.rstrip()]
    for view in views:
        # Inside an HTML block Markdown is not read: the release name is HTML-escaped, as code.
        title = f"Cases against <code>{html.escape(view.release)}</code>" if view.release else "Cases"
        parts += ["", f"<details open><summary>{title}</summary>", "", compact_case_table(view), ""]
        decode = decode_markdown(view)
        if decode:
            parts += ["Decode checks (greedy continuations against the golden's, step by step):", "", *decode, ""]
        parts += [*figure_links(view.run_dir, run_dir), "</details>"]
    return "\n".join(parts) + "\n"


def read_text_input(path: Path) -> str:
    """A text file of a run (evidence.md) as UTF-8, or one line saying where it is not."""
    return utf8(read_input_bytes(path, paths.display(path)), path)


def utf8(data: bytes, path: Path) -> str:
    """A text file's bytes (read from ``path``) as UTF-8, or one line saying where they are not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{paths.display(path)} is not UTF-8 (byte {exc.start})") from None


def figure_links(view_dir: Path, base: Path) -> list[str]:
    """An image per PNG in ``view_dir/figures`` with a link to its SVG, paths relative to ``base``;
    none when the summary was not built (--no-summary)."""
    from urllib.parse import quote

    lines = []
    for png in sorted((view_dir / rundir.FIGURES).glob("*.png")):
        rel = quote(png.relative_to(base).as_posix())
        title = png.stem.replace("-", " ")
        svg = f" ([SVG]({rel[:-4]}.svg))" if png.with_suffix(".svg").is_file() else ""
        lines += [f"![{title}]({rel}){svg}", ""]
    return lines


def compact_case_table(view) -> str:
    """The case table of `report --markdown`, one row a case: status, error against its bound and where the bound
    came from, headroom, drift, failed and worst prompts."""
    lines = ["| case | backend | status | max error | bound (from) | headroom | drift | failed prompts "
             "| worst prompt |",
             "| --- | --- | --- | ---: | --- | ---: | --- | ---: | --- |"]
    for name in view.expected:
        r = view.results.get(name)
        if r is None:
            lines.append(f"| {md(name, code=True)} | | missing | | | | | | |")
            continue
        err = r.max_probability_error
        missing = any(p.missing_tokens for p in r.prompts)  # the error of such a prompt is not a number
        err_text = "—" if err is None else f"{err:.3g}" if math.isfinite(err) else (
            "golden tokens missing" if missing else "not finite")
        bound = md(r.bound_text)
        room = f"{r.headroom:.2f}" if r.headroom is not None else "—"
        w = r.worst
        worst = md(w.id, code=True) if w is not None and (not w.passed or err) else "—"
        failed = f"{r.counts()['failed']}/{r.counts()['prompts']}" if r.prompts else "—"
        mark = {Status.PASSED: "✅ passed", Status.FAILED: "❌ failed"}.get(r.status, f"⚠️ {r.status}")
        lines.append(f"| {md(name, code=True)} | {md(r.backend)} | {mark} | {err_text} | {bound} | {room} | "
                     f"{md(r.drift_text)} | {failed} | {worst} |")
    return "\n".join(lines)


def attach_zip(run_dir: str | Path, out_dir: str | Path) -> Path:
    """One zip to attach to an issue or PR: summary HTML and figures, executed notebooks, results,
    evidence, what each case was judged from (so that `parity-kit verify` judges the zip again), and the run's
    signature where it has one (kit.gate.attest)."""
    import zipfile

    import os
    import tempfile

    from kit.core.errors import BadInput
    from kit.core.records.jsonio import FILE_MODE

    run_dir = Path(run_dir).resolve()
    wanted = attachable(run_dir)
    target = attach_target(run_dir, out_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 would keep an attachment from the teammates it is for
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for p in wanted:
                z.write(p, f"{run_dir.name}/{p.relative_to(run_dir).as_posix()}")
        os.link(tmp, target)  # fails, rather than replaces, where a zip appeared since the check
    except FileExistsError:
        raise BadInput(_zip_exists(target)) from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def attach_target(run_dir: str | Path, out_dir: str | Path) -> Path:
    """Where ``attach_zip`` writes the zip of ``run_dir``: ``out_dir/<run>.zip``, refused (one line) where a file
    is there already: another run of that name's zip, or this one's, which may be an issue's attachment."""
    from kit.core.errors import BadInput

    target = Path(out_dir) / f"{Path(run_dir).resolve().name}.zip"
    if target.exists() or target.is_symlink():
        raise BadInput(_zip_exists(target))
    return target


def _zip_exists(target: Path) -> str:
    return (f"--attach: {paths.display(target)} exists; a zip is never written over (remove it, or attach into "
            "another folder)")


def attachable(run_dir: str | Path) -> list[Path]:
    """The files of a run (or control) directory that its zip carries; refuses, in one line and before anything
    is written, a run with no summary or with a link that leads out of the folder."""
    from kit.core.errors import BadInput

    run_dir = Path(run_dir).resolve()
    wanted = [p for p in sorted(run_dir.rglob("*")) if p.is_file() and (
        p.suffix in (".ipynb", ".html") or p.name in (rundir.RESULT, rundir.EVIDENCE, rundir.MANIFEST,
                                                       rundir.CONTROL, rundir.DIAGNOSIS, rundir.ATTESTATION)
        or (p.parent.name == rundir.FIGURES and p.suffix in (".png", ".svg"))
        # What `parity-kit verify` judges a zip from: each case's result, evidence and reference.
        or (p.parent.name == rundir.CASES and p.name.endswith(rundir.SEALED)))]
    if not any(p.name == rundir.SUMMARY_HTML for p in wanted):
        raise BadInput(f"{run_dir} has no summary.html ({_why_no_summary(run_dir)}): `{summary_later(run_dir)}` "
                       "builds it")
    for p in wanted:
        check_inside(p, run_dir)
    return wanted


def _why_no_summary(run_dir: Path) -> str:
    """Why a run has no summary page, from what it left: the mark of a summary owed (a stopped run), the notebook
    without its page (a summary that failed), or neither (left out with --no-summary)."""
    pending = run_dir / rundir.SUMMARY_PENDING
    if pending.exists() or pending.is_symlink():
        return _first_line(pending) or "it was stopped before its summary was built"
    if (run_dir / rundir.SUMMARY_NOTEBOOK).is_file():
        return "its summary failed before its page was rendered"
    return "it was run with --no-summary"


def _first_line(path: Path) -> str | None:
    """The first line of a small file the kit wrote, escaped; None for whatever else was put there (a device, a
    folder, a link: never followed, never read past 400 bytes)."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with open(path, "rb") as f:
            lines = f.read(400).decode(errors="replace").strip().splitlines()
    except OSError:
        return None
    return printable(lines[0]) if lines else None


def check_inside(path: Path, run_dir: Path) -> None:
    """Refuse a file of the run that is a link to one outside it. Refused, not skipped with a warning: the zip is
    an audit artifact that stands for this run, and a link swapped in for a result or notebook (or one that
    would carry a private file along to a public issue) must stop the person attaching it, not pass as a
    zip that silently lacks the file."""
    from kit.core.errors import BadInput

    if (target := paths.real_outside(path, run_dir)) is not None:
        raise BadInput(f"{path} leads through a link to {target}, outside the run directory {run_dir}; "
                       "a zip carries only the run's own files (replace the link with the file, or remove it)")
