"""A release changes how its engine runs, never how its cases are judged: its options merge over the cases',
so a `prompts`, `drift` or `bound` there would judge the candidate on two prompts with the drift test off
while today's pin is judged on 64, and a control would call it qualified. Refused at load, at its key."""

from __future__ import annotations

import pytest

from support import parity_kit, releases, write_descriptor


def candidate_with(options: dict) -> dict:
    rel = releases()
    rel["candidate"]["backends"]["hf"]["options"] = options
    return rel


def line_of(path, key: str) -> int:
    """The line of a key of the candidate's hf options: under their table, or a table of its own."""
    lines = path.read_text().splitlines()
    table = "[releases.candidate.backends.hf.options]"
    start = lines.index(table) if table in lines else 0
    return next(n for n, text in enumerate(lines, 1) if n > start and (
        text.startswith(f"{key} =") or text == f"[releases.candidate.backends.hf.options.{key}]"))


@pytest.mark.parametrize("key, value", [
    ("prompts", ["chat-sharegpt-00", "chat-sharegpt-01"]),
    ("drift", False),
    ("buckets", [128]),
    ("bound", 0.5),
    ("calibration", "x.json"),
    ("golden", "semantic"),
    ("repeats", 2),
    ("decode", 8),
    ("top_n", 1),
    ("notebook", "parity.ipynb"),
])
@pytest.mark.parametrize("command", [["check", "--release", "candidate"], ["control"]])
def test_a_release_option_that_changes_how_a_case_is_judged_is_refused_at_its_line(tmp_path, embedded, key, value,
                                                                                   command):
    desc = write_descriptor(tmp_path, embedded, releases=candidate_with({"dtype": "float32", key: value}))
    out = tmp_path / "out"
    proc = parity_kit(command[0], desc, *command[1:], *(["--out", out] if command[0] == "control" else []))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"parity-kit: bad input: {desc}:{line_of(desc, key)}: releases.candidate.backends.hf.options.{key}: a release "
        f"may change how the engine runs, never how its cases are judged; {key} is a case key (set it on the case, "
        "where it holds for every release)"]
    assert not out.exists()


@pytest.mark.parametrize("key, value", [("resources", {"num_gpus": 1}), ("kernel", "other"), ("retries", 3)])
def test_a_case_key_the_release_would_silently_drop_is_refused_too(tmp_path, embedded, key, value):
    desc = write_descriptor(tmp_path, embedded, releases=candidate_with({key: value}))
    proc = parity_kit("check", desc, "--release", "candidate")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"parity-kit: bad input: {desc}:{line_of(desc, key)}: releases.candidate.backends.hf.options.{key}: not an "
        f"engine option of hf; a release sets its engine's options (and timeout_s), and {key} is the case's own"]


def test_engine_options_and_a_timeout_are_a_release_s_to_set(tmp_path, embedded):
    cases = {"hf-bf16": embedded.doc["cases"]["hf-bf16"]}
    desc = write_descriptor(tmp_path, embedded, cases=cases,
                            releases=candidate_with({"batch_size": 4, "timeout_s": 900.0}))
    proc = parity_kit("check", desc, "--release", "candidate")
    assert proc.returncode == 0, proc.stderr
