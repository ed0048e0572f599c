"""The bisect's summary section from its record: the answer first, then one row per step."""

from __future__ import annotations

from kit.bisect.summary import summary_markdown


def test_summary_names_the_commit_and_every_step():
    bad, replayed = "a" * 40, "b" * 40
    record = {"name": "test", "case": "toy", "verdict": "first-bad-commit",
              "reason": f"first bad commit: {bad} fork: fast path",
              "first_bad": {"index": 1, "commit": bad, "built_from": replayed, "subject": "fork: fast path"},
              "failing_prompts": ["p1", "p2"],
              "inputs": {"fork": "tinyengine", "repo": "/src/tinyengine", "states": [{}, {}], "base_label": "the base",
                         "store": "/releases", "scope": "overlay"},
              "steps": [{"index": 1, "commit": bad, "subject": "fork: fast path", "verdict": "bad",
                         "cached_build": True,
                         "wall_s": 12.34, "reason": "toy fails on 2 of 2 prompt(s)",
                         "paths": {"step": f"/runs/b/steps/01-{replayed[:12]}"}}]}
    text = summary_markdown(record)
    assert text.startswith("## Bisect `test`, case `toy`: **FIRST BAD COMMIT FOUND**\n\n"
                           f"first bad commit: {bad} fork: fast path.\n")
    assert f"Replayed onto the new base as `{replayed}`." in text
    assert "The tip's 2 failing prompt(s) ran at every other step: `p1`, `p2`." in text
    assert (f"| 1 | 1/1 | `{bad[:12]}` | fork: fast path | **bad** | cached | 12.3 | toy fails on 2 of 2 prompt(s) | "
            f"`steps/01-{replayed[:12]}` |") in text
