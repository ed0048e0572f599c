"""The summary states the run's false-failure rate in the line its manifest records (kit.views.summary)."""

from __future__ import annotations

from pathlib import Path

from kit.core.records.results import RunView
from kit.views.summary import false_failure_line


def test_the_summary_states_the_manifests_line_and_nothing_for_an_earlier_run():
    stated = {"statement": "false-failure rate: at most 0.4 % for the gate (drift tests: 0.1 % for each of 4 cases, "
                           "Bonferroni; the default)"}
    view = RunView(Path("run"), {"false_failure_rate": stated}, {}, {})
    assert false_failure_line(view) == ("False-failure rate: at most 0.4 % for the gate (drift tests: 0.1 % for each "
                                        "of 4 cases, Bonferroni; the default).")
    assert false_failure_line(RunView(Path("run"), {}, {}, {})) is None
