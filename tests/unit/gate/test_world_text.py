"""Prompt ids are data from the world: one holding an escape sequence, a bell or a right-to-left override
reaches the terminal, evidence.md and `report --markdown` escaped (as a Python string literal writes it),
never raw; one holding a lone surrogate, which UTF-8 cannot write, is refused in one line, not a traceback."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

from kit.core.records.records import CaseResult, PromptScore, Status
from kit.core.records.text import printable
from kit.gate import report
from kit.gate.session import case_line
from support import copy_model, parity_kit

HOSTILE = "evil\x1b[2J\x07\u202eid\n"
SHOWN = "evil\\x1b[2J\\x07\\u202eid\\x0a"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202e]")  # any control character but a line end


def test_printable_escapes_what_acts_on_the_display_and_keeps_the_rest():
    assert printable(HOSTILE) == SHOWN
    assert printable("café-日本-\U0001f600 tab\there") == "café-日本-\U0001f600 tab\\x09here"


def failed_on(prompt_id: str) -> CaseResult:
    score = PromptScore(id=prompt_id, bucket=128, n_tokens=100, passed=False, bound=0.075, max_probability_error=0.2,
                        top_probability_l1_error=0.2, kl_shared=0.0, first_rank_agreement=True, golden_top_token=1,
                        golden_top_probability=0.9, backend_top_token=1, backend_top_probability=0.7, winner_gap=0.0,
                        failures=[f"{prompt_id}: max probability error 0.2 > bound 0.075 (bucket 128)"])
    return CaseResult(case="hf-bf16", backend="hf", status=Status.FAILED, prompts=[score], failures=score.failures)


def test_evidence_shows_a_hostile_prompt_id_escaped():
    manifest = {"name": "t", "cases": ["hf-bf16"], "fixture_sha256": "f" * 64, "model_digest": "m" * 64,
                "goldens": {}, "kit_version": "0"}
    text = report.evidence_markdown(manifest, "failed", {"failed": 1}, 1.0, {"hf-bf16": failed_on(HOSTILE)})
    assert not RAW.search(text)
    assert ("- `hf-bf16` (hf): **failed** on 1 of 1 prompts; worst `evil\\x1b[2J\\x07\\u202eid ` (bucket 128): "
            "max probability error 0.2 > bound 0.075 (bucket 128)") in text  # Markdown's line end is a space
    assert report.md(HOSTILE) == "evil\\\\x1b\\[2J\\\\x07\\\\u202eid "  # prose: the backslashes shown as written


def test_a_case_line_shows_an_error_naming_a_hostile_prompt_escaped():
    r = CaseResult(case="hf-bf16", backend="hf", status=Status.ERROR,
                   error=f"cell 3 raised BackendMismatch: backend hf returned 2 observations: missing {HOSTILE}")
    line = case_line(r)
    assert case_line(dataclasses.replace(r, error="[bold]x")).endswith("\\[bold]x")  # text, not console markup
    assert not RAW.search(line) and "\n" not in line
    assert line.endswith(f"missing {SHOWN}")


def test_a_bad_input_line_naming_a_hostile_prompt_is_escaped(tmp_path, embedded):
    model = copy_model(embedded, tmp_path / "short-model")
    cfg = json.loads((model / "config.json").read_text())
    cfg["max_position_embeddings"] = 10
    (model / "config.json").write_text(json.dumps(cfg))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": HOSTILE, "prompt": "a prompt longer than ten tokens, " * 4}) + "\n")
    proc = parity_kit("fixture", "make", "--prompts", prompts, "--model", model, "--out", tmp_path / "out")
    assert proc.returncode == 3 and not RAW.search(proc.stderr)
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"parity-kit: bad input: prompt {SHOWN} has ")


def test_a_lone_surrogate_in_a_prompt_id_is_one_line_not_a_crash(tmp_path, embedded):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "bad\\ud800id", "prompt": "hello"}\n')  # JSON's escape of a lone surrogate
    out = tmp_path / "out"
    proc = parity_kit("fixture", "make", "--prompts", prompts, "--model", embedded.model, "--out", out)
    assert (proc.returncode, proc.stderr.splitlines()) == (3, [
        f"parity-kit: bad input: {prompts}:1:12: its id 'bad\\ud800id' holds a lone surrogate (\\ud800), which "
        "UTF-8 cannot encode"])
    assert not out.exists()

    # A fixture file that holds one (as an escape: the bytes are ASCII) and is named by its digest.
    doc = json.loads(embedded.fixture.read_text())
    doc["cases"] = doc["cases"][:2]
    doc["cases"][1]["id"] = "bad\ud800id"
    data = (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()
    fixture = tmp_path / f"{hashlib.sha256(data).hexdigest()}.json"
    fixture.write_bytes(data)
    proc = parity_kit("fixture", "verify", fixture)
    column = data.decode().index("\\ud800") + 1  # the escape the file holds it as
    assert (proc.returncode, proc.stderr.splitlines()) == (3, [
        f"parity-kit: bad input: fixture {fixture}:1:{column}: case #2: its id 'bad\\ud800id' holds a lone "
        "surrogate (\\ud800), which UTF-8 cannot encode"])
