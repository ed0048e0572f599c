"""The parts of the summary a reviewer who did not run the gate needs: the verdict in one
sentence, the worst prompts with both sides' top tokens, and where every input came from.

Prompt and token text is data from the world (datasets, tool calls): it is escaped
here, once, and only ever shown as text.
"""

from __future__ import annotations

import html
import math
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kit.core.records import paths
from kit.core.rules import rules
from kit.core.verdict.decode import failed_prompts, worst_decode_step
from kit.core.records.fixture import load_fixture
from kit.core.baselines.golden import load_golden
from kit.core.records.records import CaseResult, PromptScore, Status, prompt_severity
from kit.core.verdict.nextsteps import NextStep, next_steps, one_command
from kit.core.records.results import RunView, Verdict, counts_sentence
from kit.gate.trend import read_steps

BANNER_COLORS = {"passed": "#1a7f37", "qualified": "#1a7f37", "failed": "#cf222e", "regression": "#cf222e",
                 "incomplete": "#9a6700", "baseline-blocker": "#8250df", "both-broken": "#8250df",
                 "no-baseline": "#0969da", "inconclusive": "#9a6700", "borrowed-bounds": "#9a6700"}


def gate_reason(view: RunView) -> str:
    """The gate's verdict in one sentence, naming the cases that decide it."""
    failed = [n for n in view.expected if n in view.results and view.results[n].status == Status.FAILED]
    unfinished = [n for n in view.expected if n not in view.results or view.results[n].status in (Status.ERROR,
                                                                                                  Status.TIMEOUT)]
    if view.verdict == Verdict.PASSED:
        steps = read_steps(view.run_dir)
        but = ", but " + "; ".join(s.sentence for s in steps) if steps else ""
        return f"all {len(view.expected)} cases are within their bounds{but}"
    if failed:
        parts = []
        for name in failed:
            r = view.results[name]
            parts.append(f"`{name}` fails {len(failed_prompts(r))} of {r.counts()['prompts']} prompts"
                         + decode_clause(r))
        return "; ".join(parts)
    borrowed = [n for n in view.expected if n in view.results and view.results[n].status == Status.BORROWED]
    if borrowed and not unfinished:  # over bounds this host did not measure, by no more than classes differ
        return "no case failed its own bounds, but " + "; ".join(
            f"`{n}` {view.results[n].error}" for n in borrowed)
    inconclusive = [n for n in view.expected if n in view.results and view.results[n].status == Status.INCONCLUSIVE]
    if inconclusive and not unfinished:  # nothing failed or is missing, but "passed" would claim too much
        return "every case is within its bounds, but " + "; ".join(
            f"`{n}` is inconclusive: {view.results[n].error}" for n in inconclusive)
    if not unfinished:  # nothing failed or is missing: the rest passed, some exact case could not be judged
        unjudged = [n for n in view.expected if view.results[n].status == Status.NO_BASELINE]
        return ("every case that ran is within its bounds; no baseline for this runtime: "
                + ", ".join(f"`{n}`" for n in unjudged))
    words = []
    for name in unfinished:
        r = view.results.get(name)
        how = "is missing" if r is None else "timed out" if r.status == Status.TIMEOUT else "errored"
        words.append(f"`{name}` {how}")
    return "the gate did not finish: " + "; ".join(words)


def decode_clause(r: CaseResult) -> str:
    """What failed in a case's decode check, for its banner sentence: the worst step past its own bound and by how
    much (its margin as a share of that bound), else the first continuation that failed and how; empty when the
    decode check passed (or the case has none). Read from the numbers, never from the failure lines."""
    step = worst_decode_step(r)
    if step is not None and step.over:
        # Its margin in units of its bound: the margin of its ratio (rules.ratio) to 1, where the bound is.
        said = (f"{step.error:.4g} > {step.bound:g}, margin {rules.margin(step.ratio, 1.0):+.0%}"
                if math.isfinite(step.error) else f"not scorable (bound {step.bound:g})")
        return f" (decode step {step.step} of `{step.prompt}`: {said})"
    failed = next((d for d in r.decode if not d.passed), None)
    if failed is None:
        return ""
    if failed.diverged_at is not None and not failed.accepted:
        return f" (decode step {failed.diverged_at} of `{failed.id}`: the continuations diverged outside a near-tie)"
    return f" (the decode check of `{failed.id}`: {failed.compared} of {failed.steps} steps compared)"


def banner_html(title: str, verdict: str, reason: str, detail: str = "", mark: str | None = None) -> str:
    """A coloured verdict banner; every piece of text is escaped, `code` spans excepted."""
    color = BANNER_COLORS.get(verdict, "#cf222e")
    return (f'<div style="border-left:6px solid {color};padding:8px 14px;margin:6px 0;background:#f6f8fa">'
            f'<div style="font-size:1.3em;font-weight:600">{text_html(title)}: '
            f'<span style="color:{color}">{html.escape(mark or verdict.upper())}</span></div>'
            f'<div>{text_html(reason)}</div>'
            + (f'<div style="color:#57606a">{text_html(detail)}</div>' if detail else "") + "</div>")


def text_html(text: str) -> str:
    """Escape everything, then turn `backticked` spans into code (they hold names, not markup)."""
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(text))


@dataclass
class Decoder:
    """Token ids to text with the fixture's tokenizer, when the model folder is at hand."""

    tokenizer: object | None

    @classmethod
    def for_model(cls, model_dir: str | Path | None) -> "Decoder":
        """A decoder with the model folder's tokenizer, or without one where it cannot be read: a summary
        must render without the model folder."""
        try:
            from tokenizers import Tokenizer

            return cls(Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json")))
        except Exception:  # a summary must render without the model folder; ids alone still say a lot
            return cls(None)

    def token(self, token_id: int) -> str:
        """A token id's text as the tokenizer decodes it (``?`` without a tokenizer)."""
        if self.tokenizer is None:
            return "?"
        return self.tokenizer.decode([int(token_id)], skip_special_tokens=False)


def worst_prompts(view: RunView, limit: int = 5) -> list[tuple[str, PromptScore]]:
    """The prompts furthest past (or closest to) their bounds, failing ones first, over every case."""
    pool = [(name, p) for name, r in view.results.items() for p in r.prompts]
    return sorted(pool, key=lambda item: (not item[1].passed, prompt_severity(item[1])), reverse=True)[:limit]


def worst_prompt_table(view: RunView, limit: int = 5, top: int = 5) -> pd.DataFrame:
    """Each worst prompt with the golden's and the backend's top tokens side by side (text and id)."""
    prompts = _prompt_texts(view)
    decoder = Decoder.for_model(view.manifest.get("model"))
    rows = []
    for case, p in worst_prompts(view, limit):
        prompt = prompts.get(p.id, "")
        rows.append({
            "case": case, "prompt": p.id, "bucket": p.bucket, "passed": p.passed,
            "max_probability_error": p.max_probability_error, "bound": p.bound,
            "prompt_end": _visible(prompt[-80:]),
            "golden_top": _tokens(p.golden_top[:top], decoder),
            "backend_top": _tokens(p.backend_top[:top], decoder),
        })
    return pd.DataFrame(rows)


# Headings over left-aligned text columns read best left-aligned too.
LEFT_HEADINGS = [{"selector": "th.col_heading", "props": "text-align: left"}]


def styled_worst_prompts(view: RunView, limit: int = 5):
    """The worst prompts' table for the summary, the world's text made inert and long prompts wrapped to fit the
    page."""
    frame = worst_prompt_table(view, limit)
    if frame.empty:
        return frame
    # escape="html" makes the world's text inert; white-space:pre keeps one token per line, while the
    # prompt's end wraps anywhere (it may have no spaces) so that the table fits a page.
    mono = {"font-family": "monospace", "text-align": "left"}
    return (frame.style.format({"max_probability_error": "{:.4g}", "bound": "{:g}"}, na_rep="—", escape="html")
            .set_properties(subset=["golden_top", "backend_top"], **{"white-space": "pre", **mono})
            .set_properties(subset=["prompt_end"], **{"white-space": "pre-wrap", "overflow-wrap": "anywhere",
                                                      "min-width": "16ch", "max-width": "28ch", **mono})
            .set_table_styles(LEFT_HEADINGS, overwrite=False)
            .hide(axis="index"))


def _tokens(pairs, decoder: Decoder) -> str:
    import math

    lines = []
    for token_id, logprob in pairs:
        prob = math.exp(logprob) if logprob is not None and logprob == logprob else float("nan")
        lines.append(f"{int(token_id):>6} {_visible(decoder.token(token_id))!s:<12} {prob:.3f}")
    return "\n".join(lines)


def _visible(text: str) -> str:
    """Whitespace a reader must see (a newline, a tab) as escapes; everything else as it is."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def _prompt_texts(view: RunView) -> dict[str, str]:
    """Each fixture case's prompt text by id; empty when the fixture moved (the table then shows none)."""
    path = view.manifest.get("fixture")
    try:
        return {c.id: c.prompt for c in load_fixture(path).prompts} if path else {}
    except Exception:  # a moved fixture leaves the table without prompt text, not the summary broken
        return {}


PATHS_NOTE = ("Files are named relative to the repository (its checkout, or the installed kit's data) where they are "
              "inside it, else relative to this run's folder.")


def page_path(path: str | Path, run_dir: Path | None) -> str:
    """A file as the page names it: relative to the repository (kit.core.records.paths.DATA_ROOT) where it is inside it,
    else to the run's folder (``..`` where it is outside that too), never a machine's absolute path; the manifest
    keeps the path as the run was given it."""
    where = Path(os.path.abspath(path))  # not resolved: a link is named as it was given
    for root in (paths.DATA_ROOT, run_dir):
        if root is not None and where.is_relative_to(os.path.abspath(root)):
            return where.relative_to(os.path.abspath(root)).as_posix()
    return Path(os.path.relpath(where, os.path.abspath(run_dir))).as_posix() if run_dir is not None else where.name


def page_command(argv: list[str], run_dir: Path | None) -> str:
    """A recorded command line with each absolute path in it (a word, or an ``--option=`` value) as ``page_path``
    names it."""
    def word(w: str) -> str:
        option, eq, value = w.partition("=") if w.startswith("-") else ("", "", w)
        return f"{option}{eq}{page_path(value, run_dir)}" if os.path.isabs(value) else w

    return shlex.join(word(w) for w in argv)


def provenance_table(view: RunView) -> pd.DataFrame:
    """Where every input came from: digests, goldens and who made them, releases, kernels, host, command; every
    file named as ``page_path`` names it."""
    m = view.manifest

    def named(path: str | None) -> str | None:
        return page_path(path, view.run_dir) if path else path

    rows = [("descriptor", named(m.get("descriptor")), m.get("descriptor_sha256")),
            ("fixture", named(m.get("fixture")), m.get("fixture_sha256")),
            ("model", named(m.get("model")), m.get("model_digest"))]
    for kind, g in (m.get("goldens") or {}).items():
        made = _golden_provenance(g.get("path"))
        rows.append((f"golden ({kind})", f"{named(g.get('path'))}{made}", g.get("sha256")))
    release = m.get("release") or {}
    for backend, built in (release.get("backends") or {}).items():
        what = " ".join(x for x in (built.get("version"), built.get("source_commit")) if x)
        rows.append((f"release {release.get('name')}: {backend}", f"kernel {built.get('kernel')} {what}".strip(),
                     ", ".join(f"{n} {h[:12]}" for n, h in (built.get("wheels") or {}).items()) or None))
    for name, kernel in (m.get("kernels") or {}).items():
        engine = (view.results.get(name).release if name in view.results else {}) or {}
        versions = ", ".join(f"{k} {v}" for k, v in engine.items() if k not in ("backend",) and v)
        gpus = gpu_labels(view.results[name].devices) if name in view.results else ""
        rows.append((f"case {name}", f"kernel {kernel}" + (f": {versions}" if versions else "")
                     + (f" · on {gpus}" if gpus else ""), None))
    rows += [("host", f"{m.get('host')} · {m.get('platform')}", None),
             ("kit", m.get("kit_version"), None),
             ("command", page_command(m.get("command") or [], view.run_dir), None),
             ("started / finished", f"{m.get('started_at')} / {m.get('finished_at')}", None)]
    node = m.get("gpus")
    if node:  # listed when a case asked for GPUs: what the local executor could hand out, and whence
        listed = node.get("gpus") or []
        busy = [g for g in listed if g.get("busy")]
        rows.insert(-3, ("GPUs", f"{len(listed)} from {node.get('source')}: {gpu_labels(listed) or node.get('problem')}"
                         + (f"; filled by another process: {gpu_labels(busy)}" if busy else ""), None))
    if m.get("root_sha256"):  # what a copy of the run is checked against (`parity-kit verify`)
        rows.append(("root digest", f"{len(m.get('files') or {})} sealed files: each case's result, evidence and "
                     "reference, and the manifest; `parity-kit verify` judges a copy or the zip again",
                     m["root_sha256"]))
    return pd.DataFrame(rows, columns=["what", "value", "digest"])


def gpu_labels(gpus: list[dict]) -> str:
    """``GPU 0 (NVIDIA H200), GPU 1 (NVIDIA H200)`` from the GPU records of a case result or manifest."""
    return ", ".join(f"GPU {g.get('index')} ({g.get('name')})" for g in gpus)


def styled_provenance(view: RunView):
    """The provenance table for the summary. Paths, commands and 64-digit digests have few or no spaces: they
    wrap anywhere to fit the page."""
    return (provenance_table(view).style.format(na_rep="—", escape="html").hide(axis="index")
            .set_properties(subset=["value", "digest"], **{"text-align": "left", "font-family": "monospace",
                                                           "overflow-wrap": "anywhere"})
            .set_properties(subset=["digest"], **{"min-width": "20ch", "max-width": "34ch"})
            .set_table_styles(LEFT_HEADINGS, overwrite=False))


def _golden_provenance(path: str | None) -> str:
    if not path:
        return ""
    try:
        p = load_golden(path).provenance
    except Exception:
        return ""
    return f" (made by {p.get('backend')} {p.get('dtype')} on {p.get('hardware')} at {p.get('created_at')})"


def run_banner(view: RunView) -> str:
    """The verdict, the sentence that explains it, and below it what to do next: every case that did not pass,
    the kind of thing that happened to it and the one command that moves it on (kit.core.verdict.nextsteps), so the
    first screen of the page answers what the bottom of it explains."""
    duration = view.manifest.get("duration_s") or sum(r.duration_s or 0 for r in view.results.values())
    release = f" against release `{view.release}`" if view.release else ""
    title = f"Gate `{view.manifest.get('name', '?')}`{release}"
    return (banner_html(title, view.verdict, gate_reason(view), counts_sentence(view.counts, duration))
            + next_steps_html(view))


def page_title(name: str | None, verdict: str | None, kind: str) -> str:
    """A page's title, what a browser's tab shows: what it is about, its verdict and what kind of page it is
    ("tiny-cpu: passed — parity gate")."""
    about = f"{name or '?'}: {verdict}" if verdict else name or "?"
    return f"{about} — {kind}"


def glue_title(name: str | None, verdict: str | None, kind: str) -> str:
    """Glue the page's title (``page_title``) where the HTML's rendering reads it (kit.run.notebook.TITLE_SCRAP);
    returns it."""
    import scrapbook as sb

    from kit.run.notebook import TITLE_SCRAP

    title = page_title(name, verdict, kind)
    sb.glue(TITLE_SCRAP, title, encoder="text")  # the form kit.run.notebook.glued_text reads
    return title


def run_steps(view: RunView) -> tuple[list[NextStep], str | None]:
    """The run's next steps, with its descriptor and directory as a reader's commands name them, and the one
    `baseline make` that covers several missing baselines (None where it is not needed)."""
    descriptor = paths.display(view.manifest.get("descriptor") or "DESCRIPTOR")
    steps = next_steps(view.expected, view.results, descriptor, paths.display(view.run_dir))
    return steps, one_command(steps, descriptor)


def next_steps_html(view: RunView) -> str:
    """A table of what did not pass: case, kind, why, next command; empty for a passed run."""
    steps, together = run_steps(view)
    if not steps:
        return ""
    left = ' style="text-align:left"'  # words read from the left; a notebook page right-aligns every cell
    rows = "".join(f"<tr><td{left}><code>{html.escape(s.case)}</code></td>"
                   f"<td{left}><strong>{html.escape(s.kind)}</strong></td><td{left}>{text_html(_short(s.why))}</td>"
                   f"<td{left}>{'<code>' + html.escape(s.command) + '</code>' if s.command else '—'}</td></tr>"
                   for s in steps)
    also = (f"<p>One command makes every missing baseline of this descriptor here: <code>{html.escape(together)}"
            "</code></p>") if together else ""
    heads = "".join(f"<th{left}>{h}</th>" for h in ("case", "what happened", "why", "next"))
    return (f'<table style="margin:4px 0 10px 0"><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody></table>'
            f"{also}")


def _short(text: str, limit: int = 240) -> str:
    """A reason cut to what a table cell holds (the full text stays in the failures below)."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"



def prose_html(text: str) -> str:
    """A few lines of our own Markdown (headings, **bold**, `code`, paragraphs) that may quote the
    world's text (commit subjects, reasons): escaped first, then only those marks are honoured."""
    blocks = []
    for block in text.strip().split("\n\n"):
        level = len(block) - len(block.lstrip("#"))
        body = text_html(block.lstrip("#").strip())
        body = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", body).replace("\n", "<br>")
        blocks.append(f"<h{level + 1}>{body}</h{level + 1}>" if level else f"<p>{body}</p>")
    return "\n".join(blocks)


def pre_html(lines) -> str:
    """Lines as preformatted HTML, escaped: text from the world shown, never interpreted."""
    return f"<pre>{html.escape(chr(10).join(lines))}</pre>"
