"""The example CI workflow is safe to copy: no expression is pasted into a shell script, and a pull
request's descriptors, goldens and fixtures (code, like a Makefile) run only after a maintainer's label."""

from __future__ import annotations

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
