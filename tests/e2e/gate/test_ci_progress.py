"""A gate whose output goes to a CI log (no terminal): heartbeat lines, and each bucket as its kernel finishes it."""

from __future__ import annotations

import json
import re

from kit.core.records.fixture import load_fixture
from support import parity_kit, write_descriptor


def test_piped_gate_prints_heartbeats_and_finished_buckets(tmp_path, embedded):
    fixture = load_fixture(embedded.fixture)
    by_bucket = {b: [c.id for c in fixture.prompts if c.bucket == b] for b in (128, 256)}
    ids = by_bucket[128][:2] + by_bucket[256][:1]
    case = {**embedded.doc["cases"]["hf-bf16"], "prompts": ids}
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": case})
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--case", "hf-bf16", "--out", run_dir, "--no-summary",
                      env={"PARITY_KIT_HEARTBEAT_S": "0.5"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{run_dir}\n"  # stdout still carries only the run directory
    log = proc.stderr.splitlines()
    beats = [line for line in log if re.fullmatch(r"\[ *\d+s\] running: hf-bf16 \(\d+ s\)", line)]
    assert beats, proc.stderr
    # Each bucket line comes once, in the kernel's order, before the case's verdict line.
    buckets = [(i, line) for i, line in enumerate(log) if " done (" in line]
    assert [re.sub(r"\d+\.\d s\)$", "T s)", line) for _, line in buckets] == [
        "hf-bf16: bucket 128 done (2 prompts, T s)", "hf-bf16: bucket 256 done (1 prompt, T s)"], proc.stderr
    verdict = next(i for i, line in enumerate(log) if re.match(r"\s+passed hf-bf16 \(hf\)", line))
    assert buckets[-1][0] < verdict
    # The progress file sits with the case's other logs; the case's details cover both buckets.
    assert len((run_dir / "cases" / "hf-bf16.progress.jsonl").read_text().splitlines()) == 2
    result = json.loads((run_dir / "cases" / "hf-bf16.json").read_text())
    assert [b["bucket"] for b in result["details"]["batches"]] == [128, 128, 256]

