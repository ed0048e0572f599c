"""vLLM's offline engine through its own decode path (scheduler, paged KV cache, decode kernels): the tiny
model's bucket-128 prompts continued 8 greedy steps in bfloat16 pass against the float32 continuation, in one
gate run (the engine start dominates)."""

from __future__ import annotations

import json

from support import parity_kit, write_descriptor

CASE = {"backend": "vllm", "golden": "decode-semantic", "bound": 0.125, "mode": "offline", "dtype": "bfloat16",
        "max_model_len": 1024, "buckets": [128], "decode": 8}


def test_vllm_offline_decode_passes_against_the_float32_continuation(tmp_path, embedded):
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", write_descriptor(tmp_path, embedded, cases={"vllm-decode": CASE}), "--out", run_dir,
                      "--no-summary")
    assert proc.returncode == 0, proc.stderr
    case = json.loads((run_dir / "result.json").read_text())["cases"]["vllm-decode"]
    assert case["status"] == "passed" and case["failures"] == []
    assert case["release"]["mode"] == "offline"
    assert len(case["decode"]) == 16
    for d in case["decode"]:
        assert d["passed"] and d["steps"] == 8
        if d["diverged_at"] is None:
            assert d["compared"] == 8
        else:  # bfloat16 may take the other side of a near-tie, and the comparison ends there
            assert d["accepted"] and d["compared"] == d["diverged_at"] and d["why"].startswith("inside a near-tie")
    assert sum(d["compared"] for d in case["decode"]) > 16  # the continuations were compared past the first token
