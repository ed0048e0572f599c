"""The fixture's coverage, shown: a table for `parity-kit fixture report`, a short note for the summary.

A gate's verdict covers the tokens its prompts contain and the positions they reach, no more. Both
views lead with what the prompts never exercise, because that is where a fault passes unseen.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kit.core.records import paths
from kit.core.errors import BadInput
from kit.core.records.fixture import load_fixture
from kit.core.records.jsonio import write_json
from kit.core.noise.vocabcoverage import VocabCoverage, fixture_coverage

BLIND = "a fault on these tokens cannot be seen"


def _pct(share: float | None) -> str:
    return "—" if share is None else f"{share:.1%}"


def print_report(cov: VocabCoverage, fixture_name: str, console=None) -> None:
    """The report as tables on the terminal (rich). Sentences are not wrapped by rich, so that a line
    a reader greps for stays one line."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(highlight=False)
    console.print(Text(f"fixture {fixture_name}: {cov.prompts} prompts, {cov.tokens} tokens"), soft_wrap=True)
    if cov.vocab_source:
        console.print(Text(f"vocabulary: {cov.vocab_size} tokens ({cov.vocab_source})"), soft_wrap=True)
    console.print(Text(cov.headline()), soft_wrap=True)
    console.print(Text(cov.positions_line()), soft_wrap=True)
    buckets = Table(title="per bucket", title_justify="left")
    for col in ("bucket", "prompts", "tokens", "distinct", "of vocab", "longest"):
        buckets.add_column(col, justify="right")
    for b in cov.buckets:
        buckets.add_row(*map(str, (b.bucket, b.prompts, b.tokens, b.distinct)), _pct(b.share), str(b.max_tokens))
    console.print(buckets)
    if not cov.classes:
        console.print(Text("token classes: give --model (a folder with tokenizer.json) to classify the vocabulary"),
                      soft_wrap=True)
        return
    classes = Table(title="token classes (every vocabulary id in one)", title_justify="left")
    classes.add_column("class")
    for col in ("in vocab", "seen", "share", "occurrences"):
        classes.add_column(col, justify="right")
    classes.add_column("never seen, e.g.", overflow="fold")
    for c in cov.classes:
        classes.add_row(Text(c.name + (" !" if c.blind else "")), str(c.vocab), str(c.seen), _pct(c.share),
                        str(c.occurrences), Text(" ".join(c.unseen_examples[:3])))
    console.print(classes)
    for c in cov.blind_classes:
        line = f"! {c.name}: {c.description}; none of its {c.vocab} tokens is in any prompt: {BLIND}"
        console.print(Text(line), soft_wrap=True)


def check_json_target(path: str | Path) -> None:
    """Refuse a --json file that could not be written, before the report is shown."""
    paths.check_dir_target(Path(path).parent, "--json")
    if Path(path).is_dir():
        raise BadInput(f"--json {path} is a directory; give a file name")


def write_report_json(cov: VocabCoverage, path: str | Path) -> Path:
    """The report as JSON, for a machine: what `fixture report --json -` prints, in a file."""
    return write_json(path, cov.to_dict())


def run_coverage(manifest: dict) -> VocabCoverage | str:
    """The coverage of a gate run's fixture over its model, or one line saying why there is none."""
    fixture, model = manifest.get("fixture"), manifest.get("model")
    if not fixture:
        return "coverage: the run's manifest names no fixture"
    model_dir = Path(model) if model and Path(model).is_dir() else None
    try:
        return fixture_coverage(load_fixture(fixture), model_dir)
    except BadInput as exc:
        return f"coverage: not shown: {exc}"


def class_frame(cov: VocabCoverage) -> pd.DataFrame:
    """Per token class of the vocabulary: how many tokens it holds, how many the prompts contain, and examples of
    those they never do."""
    rows = [{"class": c.name, "in vocab": c.vocab, "seen": c.seen, "share": c.share,
             "never seen, e.g.": " ".join(c.unseen_examples[:3])} for c in cov.classes if c.vocab]
    return pd.DataFrame(rows).set_index("class") if rows else pd.DataFrame()


def coverage_html(cov: VocabCoverage) -> str:
    """The note's text as HTML, every piece from the world escaped."""
    from html import escape

    blind = "".join(f"<br><b>{escape(c.name)}</b> ({c.vocab} tokens, {escape(c.description)}): "
                    f"no prompt holds one; {BLIND}." for c in cov.blind_classes)
    return (f"<h4>Coverage of the fixture</h4><p>{escape(cov.headline())}.<br>{escape(cov.positions_line())}."
            f"{blind}</p>")


def show_run_coverage(manifest: dict) -> None:
    """The summary's coverage note: the share exercised, the positions, and the blind classes called out."""
    from IPython.display import HTML, display

    cov = run_coverage(manifest)
    if isinstance(cov, str):
        print(cov)
        return
    display(HTML(coverage_html(cov)))
    if cov.classes:
        display(class_frame(cov).style.format({"share": "{:.1%}"}, na_rep="—", escape="html"))
