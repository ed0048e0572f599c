"""`parity-kit calibrate` of a vLLM case, end to end in a fresh folder: its variants in two kernels (two launches)
make one record. vLLM's CPU worker names each engine's process group afresh in the process it runs in
(VLLM_DIST_IDENT), so a runtime key read after an engine started differed between any two samples; the key a
record names holds what decides the numbers, and this one is written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kit.core.noise.calibration import load_record
from kit.core.host.runtime import numeric_fingerprint
from support import parity_kit, write_descriptor

pytestmark = pytest.mark.e2e

# The embedded vllm-pp1 on one bucket (16 prompts): the four engine starts dominate, not the scoring.
SMALL = {"backend": "vllm", "golden": "semantic", "bound": 0.125, "mode": "offline", "dtype": "bfloat16",
         "max_model_len": 1024, "buckets": [128]}
# A value one launch draws for itself: a UUID, with or without its dashes, or a long hex digest.
DRAWN = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}|[0-9a-f]{16,}", re.I)


def test_a_vllm_case_calibrated_over_two_launches_writes_one_record(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"small": SMALL})
    proc = parity_kit("calibrate", desc, "--case", "small", "--out", tmp_path / "cal", "--to", tmp_path / "records",
                      timeout=1200)
    assert proc.returncode == 0, proc.stderr
    record = load_record(Path(proc.stdout.strip()))  # refuses a record whose name is not its SHA-256
    assert [(s.variant, s.launch) for s in record.samples] == [
        ("as-set", 1), ("compiled", 1), ("two-stages", 1), ("as-set", 2)]
    # Two kernels, each with an engine of its own, scored the first and the second launch.
    assert "as-set (launch 2)" in (tmp_path / "cal" / "small.launch2.ipynb").read_text()
    assert "as-set (launch 2)" not in (tmp_path / "cal" / "small.ipynb").read_text()
    # Every sample names the same runtime as the record, and no value any launch drew for itself.
    lines = (tmp_path / "cal" / "small.samples.jsonl").read_text().splitlines()
    runtimes = [json.loads(line)["runtime"] for line in lines]
    assert len(runtimes) == 4 and all(r == runtimes[0] for r in runtimes)
    env = record.fingerprint["runtime"]["env"]
    assert record.fingerprint["runtime"] == numeric_fingerprint(runtimes[0])
    assert "VLLM_DIST_IDENT" not in env and not [k for k, v in env.items() if DRAWN.search(v)], env
    # The engine's own version is the release's, which the record names beside its runtime.
    assert record.fingerprint["release"]["backend"] == "vllm" and record.fingerprint["release"]["vllm"]
