"""The run's artifacts for people: result.json, evidence.md, summary.ipynb and summary.html."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

from kit import paths
from kit.jsonio import atomic_write_bytes, write_json
from kit.kernels import run_notebook
from kit.records import ERROR, FAILED, PASSED, TIMEOUT, CaseResult
from kit.results import counts_sentence

SUMMARY_NOTEBOOK = paths.NOTEBOOKS / "summary.ipynb"


def result_document(name: str, verdict: str, counts: dict, duration_s: float,
                    expected: Sequence[str], results: dict[str, CaseResult]) -> dict:
    return {
        "name": name, "verdict": verdict, "counts": counts, "duration_s": duration_s,
        "cases": {n: results[n].to_dict() for n in expected if n in results},
        "missing": [n for n in expected if n not in results],
    }


def write_result(run_dir: Path, doc: dict) -> Path:
    return write_json(run_dir / "result.json", doc)


def evidence_markdown(manifest: dict, verdict: str, counts: dict, duration_s: float,
                      results: dict[str, CaseResult]) -> str:
    """A paragraph fit for an issue comment: verdict, counts, the worst case, digests, command."""
    lines = [f"**Parity gate `{manifest['name']}`: {verdict}.** {counts_sentence(counts, duration_s)}.", ""]
    for name in manifest["cases"]:
        r = results.get(name)
        if r is None:
            lines.append(f"- `{name}`: missing (no result was recorded)")
        elif r.status in (ERROR, TIMEOUT):
            lines.append(f"- `{name}` ({r.backend}): **{r.status}**: {r.error}")
        elif r.status == FAILED:
            w = r.worst
            lines.append(f"- `{name}` ({r.backend}): **failed** on {r.counts()['failed']} of "
                         f"{r.counts()['prompts']} prompts; worst `{w.id}` (bucket {w.bucket}): "
                         f"{_worst_reason(w)}")
        if r is not None and r.status != PASSED:
            lines += [f"  - note: {note}" for note in r.notes]
    if all(name in results and results[name].status == PASSED for name in manifest["cases"]):
        worst = max((r for r in results.values() if r.prompts), default=None,
                    key=lambda r: r.max_probability_error or 0)
        if worst is not None:
            w = worst.worst
            bound = f"bound {w.bound:g}" if w.bound is not None else "exact"
            lines.append(f"Largest error: `{worst.case}` on `{w.id}`: max probability error "
                         f"{w.max_probability_error:.3g} ({bound}).")
    if manifest.get("reused"):  # a resumed run: say which verdicts were not computed by this command
        names = ", ".join(f"`{n}`" for n in manifest["reused"])
        lines.append(f"Reused from an earlier run into this directory, inputs unchanged: {names}.")
    goldens = ", ".join(f"{k} `{v['sha256'][:12]}`" for k, v in manifest.get("goldens", {}).items())
    lines += ["", f"Fixture `{manifest['fixture_sha256'][:16]}` · model `{manifest['model_digest'][:16]}` · "
                  f"goldens {goldens} · kit {manifest['kit_version']}",
              f"Reproduce: `{' '.join(manifest.get('command') or ['parity-kit', 'gate'])}`", ""]
    return "\n".join(lines)


def _worst_reason(score) -> str:
    if score.failures:
        return score.failures[0].split(": ", 1)[-1]
    return f"max probability error {score.max_probability_error:.3g}"


def write_evidence(run_dir: Path, text: str) -> Path:
    return atomic_write_bytes(run_dir / "evidence.md", text.encode("utf-8"))


def build_summary(run_dir: Path, kernel: str = paths.MAIN_KERNEL, timeout_s: float = 300) -> str | None:
    """Execute the summary notebook over the run and render it to HTML (also when a cell failed,
    so the reader sees where). Returns the failure, if any, as one line."""
    out = run_dir / "summary.ipynb"
    outcome = run_notebook(SUMMARY_NOTEBOOK, out, {"run_dir": str(run_dir)}, kernel, timeout_s,
                           run_dir / "summary.kernel.log")
    if out.is_file():
        render_html(out)
    return outcome.error or ("timed out" if outcome.timed_out else None)


def render_html(notebook: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    with warnings.catch_warnings():
        # Scraps are stored as outputs of their own mimetype, which HTML rightly leaves out.
        warnings.filterwarnings("ignore", message=".*is not able to be represented", category=UserWarning)
        body, _ = exporter.from_notebook_node(nbformat.read(str(notebook), as_version=4))
    return atomic_write_bytes(notebook.with_suffix(".html"), body.encode("utf-8"))
