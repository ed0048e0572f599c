"""What bisect.json must hold before a resume continues it or a report shows it.

The record is rewritten after every step, so it is what a killed or interrupted bisect leaves behind, and what
a person may edit or a kit of another version may have written. A resume that took it on its word would fail
steps later, with a traceback and perhaps half a step written; checked first, a record that is not whole is
refused in one line naming the file and the first key that is wrong, and nothing in the folder is touched.
The steps and states are checked against their own classes' annotations (kit.core.records.resultcheck), so the check
follows them as they change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kit.bisect.inputs import State
from kit.bisect.step import StepRecord
from kit.core.records import rundir
from kit.core.records.recordcheck import Wrong, listing, mapping, text
from kit.core.records.records import known_fields
from kit.core.records.resultcheck import check_fields, read_checked

# What every kit version's record holds; the rest (build_command, first_bad, ...) is read with a default.
REQUIRED = ("name", "case", "inputs", "steps", "verdict", "reason")
INPUTS = ("repo", "fork", "descriptor", "base_label", "states", "store")


def load_bisect_record(folder: str | Path) -> dict:
    """``folder``'s bisect.json, checked whole, or one line naming the file and what is wrong in it."""
    path = Path(folder) / rundir.BISECT
    doc = read_checked(path, check_bisect_record, version_key="kit_version")
    doc.setdefault("failing_prompts", None)
    # A step an older kit wrote without a later field reads with that field's default, as a new step starts.
    doc["steps"] = [{**StepRecord(**known_fields(StepRecord, s)).to_dict(), **s} for s in doc["steps"]]
    return doc


def check_bisect_record(doc: Any) -> None:
    """Raises Wrong at the first value of ``doc`` that a bisect record cannot hold."""
    mapping(doc, "")
    _require(doc, "", REQUIRED)
    for key in ("name", "case", "verdict"):
        text(doc[key], key)
    if not isinstance(doc["reason"], str):
        raise Wrong("reason", "expected a string", doc["reason"])
    n = _check_inputs(doc["inputs"])
    prompts = doc.get("failing_prompts")
    if prompts is not None:
        for i, prompt in enumerate(listing(prompts, "failing_prompts")):
            text(prompt, f"failing_prompts[{i}]")
    for i, step in enumerate(listing(doc["steps"], "steps")):
        _check_step(step, f"steps[{i}]", n)
    if doc.get("first_bad") is not None:
        check_fields(State, doc["first_bad"], "first_bad")


def _check_inputs(value: Any) -> int:
    """The inputs' states, numbered 0..n in order with n at least 1 (one overlay commit); returns n."""
    inputs = mapping(value, "inputs")
    _require(inputs, "inputs", INPUTS)
    for key in ("repo", "fork", "descriptor", "base_label", "store"):
        text(inputs[key], f"inputs.{key}")
    states = listing(inputs["states"], "inputs.states")
    if len(states) < 2:
        raise Wrong("inputs.states", f"expected the base and at least one commit, got {len(states)} state(s)")
    for i, state in enumerate(states):
        check_fields(State, state, f"inputs.states[{i}]")
        if state["index"] != i:
            raise Wrong(f"inputs.states[{i}].index", f"expected {i}", state["index"])
    return len(states) - 1


def _check_step(value: Any, key: str, n: int) -> None:
    check_fields(StepRecord, value, key)
    if not 0 <= value["index"] <= n:
        raise Wrong(f"{key}.index", f"expected a state of 0..{n}", value["index"])


def _require(doc: dict, key: str, keys: tuple[str, ...]) -> None:
    missing = next((k for k in keys if k not in doc), None)
    if missing is not None:
        raise Wrong(f"{key}.{missing}" if key else missing, "missing")
