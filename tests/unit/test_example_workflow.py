"""The example CI workflow is safe to copy: no expression is pasted into a shell script, and a pull
request's descriptors, goldens and fixtures (code, like a Makefile) run only after a maintainer's label."""

from __future__ import annotations

import re

import yaml

from support import ROOT


def workflow() -> dict:
    return yaml.safe_load((ROOT / "examples" / "parity-gate.yml").read_text())


def test_no_expression_is_interpolated_into_a_run_script():
    steps = workflow()["jobs"]["gate"]["steps"]
    scripts = [step["run"] for step in steps if "run" in step]
    assert scripts and all("${{" not in script for script in scripts), scripts


def test_pull_requests_run_only_with_the_approval_label():
    flow = workflow()
    # PyYAML reads the key `on` as the boolean True.
    triggers = flow.get("on", flow.get(True))
    assert "labeled" in triggers["pull_request"]["types"]
    assert flow["jobs"]["gate"]["if"] == ("github.event_name != 'pull_request' || "
                                          "contains(github.event.pull_request.labels.*.name, 'parity-gate-approved')")


def strings(node) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in strings(value)]
    return [node] if isinstance(node, str) else []


def test_every_hashfiles_pattern_matches_files_of_the_repository():
    # A pattern that matches nothing adds nothing to the key: the cached environments would be
    # restored unchanged after the very files they are built from changed.
    calls = [args for text in strings(workflow()) for args in re.findall(r"hashFiles\(([^)]*)\)", text)]
    patterns = [p for args in calls for p in re.findall(r"'([^']*)'", args)]
    assert calls and patterns
    matched = {p: {f.relative_to(ROOT).as_posix() for f in ROOT.glob(p) if f.is_file()} for p in patterns}
    assert [p for p, files in matched.items() if not files] == []
    # The files scripts/ensure-env.sh and ensure-levanter-env.sh install the two environments from.
    assert {"pyproject.toml", "env/constraints.txt", "env/levanter-constraints.txt"} <= set().union(*matched.values())
