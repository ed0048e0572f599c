"""What a bisect's summary shows: the answer, then every step (commit, verdict, wheels, time, where).

The bisect writes it as summary.md beside its record (kit.bisect.run), and `parity-kit report` prints it with the
evidence line; it reads nothing but the record, so it lives with the command that writes the record."""

from __future__ import annotations

from pathlib import Path

from kit.bisect.search import INCOMPLETE, Answer
from kit.core.records import rundir

HEADS = {Answer.FIRST_BAD: "FIRST BAD COMMIT FOUND", Answer.FAILS_AT_BASE: "NO BAD COMMIT IN THE RANGE",
         Answer.PASSES_AT_TIP: "NOTHING TO BISECT", INCOMPLETE: "INCOMPLETE"}


def summary_markdown(record: dict) -> str:
    """The bisect's outcome for people, as Markdown: its verdict and reason, the first bad commit where found,
    and every state tried."""
    inp = record["inputs"]
    states = inp["states"]
    head = HEADS.get(record["verdict"], record["verdict"])
    lines = [f"## Bisect `{record['name']}`, case `{record['case']}`: **{head}**", "", f"{record['reason']}.", ""]
    if record.get("first_bad"):
        fb = record["first_bad"]
        if fb["built_from"] != fb["commit"]:
            lines += [f"Replayed onto the new base as `{fb['built_from']}`.", ""]
    prompts = record.get("failing_prompts") or []
    shown = ", ".join(f"`{p}`" for p in prompts[:8]) + (" ..." if len(prompts) > 8 else "")
    lines += [f"Fork `{inp['fork']}` ({inp['repo']}): {len(states) - 1} {inp.get('scope', 'overlay')} commit(s) "
              f"over {inp['base_label']}; releases in {inp['store']}. The tip's {len(prompts)} failing prompt(s) "
              "ran at every other step" + (f": {shown}." if prompts else "."),
              "", "| step | state | commit | subject | verdict | wheels | wall s | reason | step folder |",
              "|---|---|---|---|---|---|---|---|---|"]
    for i, s in enumerate(record["steps"], 1):
        folder = Path(s["paths"].get("step", "")).name
        lines.append(f"| {i} | {s['index']}/{len(states) - 1} | `{s['commit'][:12]}` | {s['subject']} | "
                     f"**{s['verdict']}** | {'cached' if s['cached_build'] else 'built'} | {s['wall_s']:.1f} | "
                     f"{s['reason']} | `steps/{folder}` |")
    return "\n".join(lines) + "\n"


def markdown_report(folder: str | Path) -> str:
    """A bisect directory for an issue comment: its evidence line and summary, as the bisect wrote them. A bisect
    stopped before it wrote them (a kill) is shown from its record, which holds every finished step; a record or
    text that is damaged is refused in one line naming the file."""
    from kit.bisect.record import load_bisect_record
    from kit.core.records.results import RunDir
    from kit.gate.report import utf8

    folder = Path(folder)
    run = RunDir.local(folder)
    if not run.has(rundir.SUMMARY_MARKDOWN):
        return summary_markdown(load_bisect_record(folder))
    parts = [utf8(data, folder / name).rstrip() for name in (rundir.EVIDENCE, rundir.SUMMARY_MARKDOWN)
             if (data := run.read_bytes(name)) is not None]
    return "\n\n".join(parts) + "\n"
