"""vLLM through its own decode path (scheduler, paged KV cache, decode kernels), offline and as its OpenAI
server: the tiny model's bucket-128 prompts continued 8 greedy steps in bfloat16 pass against the float32
continuation, both modes side by side in one gate run (the engine starts dominate)."""

from __future__ import annotations

import json

import pytest

from support import parity_kit, write_descriptor

CASE = {"backend": "vllm", "golden": "decode-semantic", "bound": 0.125, "mode": "offline", "dtype": "bfloat16",
        "max_model_len": 1024, "buckets": [128], "decode": 8}
MODES = ("offline", "server")


@pytest.fixture(scope="module")
def decode_run(tmp_path_factory, embedded):
    tmp = tmp_path_factory.mktemp("vllm-decode")
    cases = {f"vllm-{mode}-decode": {**CASE, "mode": mode} for mode in MODES}
    proc = parity_kit("gate", write_descriptor(tmp, embedded, cases=cases), "--out", tmp / "run", "--no-summary",
                      "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp / "run" / "result.json").read_text())["cases"]


@pytest.mark.parametrize("mode", MODES)
def test_vllm_decode_passes_against_the_float32_continuation(decode_run, mode):
    case = decode_run[f"vllm-{mode}-decode"]
    assert case["status"] == "passed" and case["failures"] == []
    assert case["release"]["mode"] == mode
    assert len(case["decode"]) == 16
    for d in case["decode"]:
        assert d["passed"] and d["steps"] == 8
        if d["diverged_at"] is None:
            assert d["compared"] == 8
        else:  # bfloat16 may take the other side of a near-tie, and the comparison ends there
            assert d["accepted"] and d["compared"] == d["diverged_at"] and d["why"].startswith("inside a near-tie")
    assert sum(d["compared"] for d in case["decode"]) > 16  # the continuations were compared past the first token


def test_both_modes_choose_the_same_continuations(decode_run):
    """The server is the offline engine behind HTTP: the same greedy tokens, step for step."""
    offline, server = (decode_run[f"vllm-{mode}-decode"]["decode"] for mode in MODES)
    assert [(d["id"], d["compared"], d["diverged_at"], d["backend_token"]) for d in offline] == \
        [(d["id"], d["compared"], d["diverged_at"], d["backend_token"]) for d in server]
