"""The jax backend's tensor_parallel option without a second device and without jax: which splits are refused
and why, how a CPU split asks XLA for devices, and how benchmarks/tp_agreement.py compares two cases' results.
Where each weight lies on the mesh needs jax itself (tests/e2e/backends/test_jax_tensor_parallel.py)."""

from __future__ import annotations

import json
import math
import sys

import pytest
from pydantic import ValidationError

from kit.backends.jax import runtime
from kit.backends.jax.options import JaxOptions
from kit.backends.jax.sharding import tensor_parallel_problem
from kit.descriptor.schema import case_schemas
from support import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import tp_agreement  # noqa: E402

pytestmark = pytest.mark.unit


def test_the_split_must_divide_query_and_key_value_heads():
    assert tensor_parallel_problem(2, 16, 8) is None  # the GPU model: 16 heads, 8 key/value heads
    assert tensor_parallel_problem(8, 16, 8) is None
    assert tensor_parallel_problem(16, 16, 8) == (
        "tensor_parallel = 16 does not divide the model's 16 attention heads and 8 key/value heads "
        "(each device holds whole heads)")
    assert tensor_parallel_problem(3, 4, 4).startswith("tensor_parallel = 3 does not divide")


def test_the_model_folder_decides_whether_a_split_fits(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 32, "num_key_value_heads": 4}))
    assert JaxOptions.model_problem({"tensor_parallel": 4}, tmp_path) is None
    assert JaxOptions.model_problem({"tensor_parallel": 8}, tmp_path) == (
        "tensor_parallel = 8 does not divide the model's 32 attention heads and 4 key/value heads "
        "(each device holds whole heads)")
    assert JaxOptions.model_problem({"tensor_parallel": 1}, tmp_path / "absent") is None


def test_a_gpu_case_may_not_split_over_more_gpus_than_it_asks_for():
    schema = case_schemas()["jax"]
    base = {"backend": "jax", "golden": "semantic", "bound": 0.1, "platform": "gpu", "tensor_parallel": 2}
    assert schema.model_validate({**base, "resources": {"num_gpus": 2}}).tensor_parallel == 2
    assert schema.model_validate(base).resources.num_gpus == 0  # none asked for: the kernel sees the node's GPUs
    assert schema.model_validate({**base, "platform": "cpu", "resources": {"num_gpus": 1}}).tensor_parallel == 2
    with pytest.raises(ValidationError, match=r"tensor_parallel = 2 splits the model over more GPUs than "
                                              r"resources.num_gpus = 1 gives the case \(ask for 2\)"):
        schema.model_validate({**base, "resources": {"num_gpus": 1}})
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        JaxOptions(tensor_parallel=0)
    assert JaxOptions().tensor_parallel == 1


def test_a_cpu_split_asks_xla_for_that_many_host_devices_unless_a_count_is_set(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    runtime.split_host(2)
    assert runtime.os.environ["XLA_FLAGS"] == ("--xla_cpu_multi_thread_eigen=false "
                                               "--xla_force_host_platform_device_count=2")
    runtime.split_host(4)  # a count already there is kept: it was set before JAX started, or by the user
    assert runtime.os.environ["XLA_FLAGS"].endswith("count=2")
    monkeypatch.delenv("XLA_FLAGS")
    runtime.split_host(2)
    assert runtime.os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"


def prompt(pid, bucket, top, error):
    return {"id": pid, "bucket": bucket, "n_tokens": bucket - 1, "backend_top": [[t, math.log(p)] for t, p in top],
            "backend_top_token": top[0][0], "max_probability_error": error}


def test_agreement_compares_the_top_tokens_both_cases_kept():
    single = {"prompts": [prompt("a", 256, [(1, 0.5), (2, 0.3), (3, 0.1)], 0.01),
                          prompt("b", 1024, [(7, 0.6), (8, 0.2)], 0.02), prompt("only-here", 256, [(1, 1.0)], 0)]}
    sharded = {"prompts": [prompt("b", 1024, [(8, 0.45), (7, 0.4)], 0.05),
                           prompt("a", 256, [(1, 0.52), (2, 0.3), (4, 0.1)], 0.012)]}
    rows = tp_agreement.compare(single, sharded)
    assert [r.id for r in rows] == ["a", "b"]
    a, b = rows
    assert (a.shared_tokens, a.same_top_token) == (2, True) and a.max_difference == pytest.approx(0.02)
    assert a.mean_difference == pytest.approx(0.01)
    assert (b.same_top_token, b.max_difference, b.sharded_error) == (False, pytest.approx(0.25), 0.05)
    s = tp_agreement.summary(rows)
    assert s["all"]["worst_prompt"] == "b" and s["all"]["top_token_changed"] == 1
    assert s["all"]["mean_max_difference"] == pytest.approx(0.135)
    assert s["buckets"]["256"]["max_difference"] == pytest.approx(0.02)


def test_agreement_refuses_a_run_without_the_cases(tmp_path, capsys):
    cases = {"jax-bf16": {"prompts": [prompt("a", 256, [(1, .5)], 0)]}}
    (tmp_path / "result.json").write_text(json.dumps({"cases": cases}))
    assert tp_agreement.main([str(tmp_path)]) == 3
    assert capsys.readouterr().err == (f"error: {tmp_path / 'result.json'}: case jax-bf16-tp2 has no scored prompts "
                                       "(cases: jax-bf16)\n")
