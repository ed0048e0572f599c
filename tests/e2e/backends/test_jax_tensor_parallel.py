"""The jax backend with the model split over two devices (tensor_parallel = 2), on CPU: the case's kernel
splits the host into two XLA devices, which runs the same partitioned program and collectives a GPU pair
would.

In float32 the split only reorders two sums per block (each device's partial sum of the o and down
projections, then their all-reduce): on the tiny model the sharded case moves probabilities by at most
7.9e-7 against the case on one device (64 prompts; 2.7e-6 against the golden, where one device gives
1.95e-6). TOLERANCE is ten times that; a head given to the wrong device, or a partial sum left out of the
all-reduce, moves them by 1e-2 or more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from support import ROOT, parity_kit, write_descriptor

sys.path.insert(0, str(ROOT / "benchmarks"))
import tp_agreement  # noqa: E402

TOLERANCE = 1e-5
F32 = {"backend": "jax", "golden": "semantic", "bound": 1e-4, "dtype": "float32", "buckets": [128, 1024]}


def test_a_case_split_over_two_devices_passes_its_golden_and_agrees_with_one_device(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"jax-f32": F32, "jax-f32-tp2": {**F32, "tensor_parallel": 2}})
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == 0, proc.stderr
    cases = json.loads((run_dir / "result.json").read_text())["cases"]
    assert [cases[c]["status"] for c in ("jax-f32", "jax-f32-tp2")] == ["passed", "passed"]
    assert cases["jax-f32-tp2"]["release"]["tensor_parallel"] == 2
    assert cases["jax-f32-tp2"]["release"]["devices"] == ["cpu:0", "cpu:1"]
    assert "tensor_parallel" not in cases["jax-f32"]["release"]

    rows = tp_agreement.compare(cases["jax-f32"], cases["jax-f32-tp2"])
    assert len(rows) == 32 and all(r.same_top_token and r.shared_tokens == 5 for r in rows)
    assert tp_agreement.summary(rows)["all"]["max_difference"] < TOLERANCE
    # The script prints the same comparison from the run folder.
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tp_agreement.py"), str(run_dir),
                           "--single", "jax-f32", "--sharded", "jax-f32-tp2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("jax-f32-tp2 against jax-f32: largest probability difference ")
    assert done.stdout.splitlines()[1].startswith("jax-f32-tp2: passed, tensor_parallel 2, no GPU of its own")


def test_each_weight_lies_where_the_megatron_split_puts_it():
    import jax
    from jax.sharding import PartitionSpec as P

    from kit.backends.jax.sharding import TensorParallel

    tp = TensorParallel.over(jax.devices("cpu")[:1], vocab=768)
    assert [tp.param(f"layers.{k}").spec for k in ("wq", "wk", "wv", "w_gate", "w_up")] == [P(None, "tp", None)] * 5
    assert [tp.param(f"layers.{k}").spec for k in ("wo", "w_down")] == [P(None, None, "tp")] * 2
    assert [tp.param(k).spec for k in ("layers.attn_norm", "layers.mlp_norm", "embed", "norm")] == [P()] * 4
    assert tp.param("lm_head").spec == P("tp", None)


def test_the_split_costs_one_all_reduce_after_attention_and_one_after_the_mlp(embedded):
    """The compiled layer of a two-way split holds exactly two all-reduces, and the logits one all-gather (the
    LM head is split by vocabulary): what kit/backends/jax/sharding.py says it does."""
    script = textwrap.dedent(f"""
        import re, numpy as np, jax
        from kit.backends.jax.runtime import JaxBackend
        b = JaxBackend({str(embedded.model)!r}, dtype="bfloat16", tensor_parallel=2)
        put = lambda a: jax.device_put(a, b.tp.replicated())
        hlo = b._program(128, "xla").lower(b.params, put(np.zeros((1, 128), np.int32)),
                                             put(np.array([5], np.int32))).compile().as_text()
        print({{op: len(re.findall(r"= \\S+ " + op + r"(?:-start)?\\(", hlo))
               for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")}})
        print({{k: tuple(v.sharding.spec) for k, v in b.params["layers"].items()}})
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    collectives, specs = done.stdout.strip().splitlines()[-2:]
    assert collectives == ("{'all-reduce': 2, 'all-gather': 1, 'reduce-scatter': 0, 'all-to-all': 0, "
                           "'collective-permute': 0}")
    split_out, split_in = (None, "tp", None), (None, None, "tp")  # of [layers, out, in]
    assert specs == str({"attn_norm": (), "wq": split_out, "wk": split_out, "wv": split_out, "wo": split_in,
                         "mlp_norm": (), "w_gate": split_out, "w_up": split_out, "w_down": split_in})


GROUPED = """
import json, math, sys
from pathlib import Path
import numpy as np
from safetensors.numpy import save_file
from kit.backends.jax.runtime import JaxBackend
from kit.core.records.fixture import Prompt

folder, config = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
config.update(num_attention_heads=4, num_key_value_heads=2)
(folder / "config.json").write_text(json.dumps(config))
rng = np.random.default_rng(0)
hidden, mlp, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
shapes = {"self_attn.q_proj": (128, hidden), "self_attn.k_proj": (64, hidden), "self_attn.v_proj": (64, hidden),
          "self_attn.o_proj": (hidden, 128), "mlp.gate_proj": (mlp, hidden), "mlp.up_proj": (mlp, hidden),
          "mlp.down_proj": (hidden, mlp)}
tensors = {"model.embed_tokens.weight": rng.normal(0, 1, (vocab, hidden)), "model.norm.weight": np.ones(hidden),
           "lm_head.weight": rng.normal(0, 0.05, (vocab, hidden))}
for i in range(config["num_hidden_layers"]):
    tensors |= {f"model.layers.{i}.{k}.weight": rng.normal(0, 0.05, s) for k, s in shapes.items()}
    tensors |= {f"model.layers.{i}.{k}.weight": np.ones(hidden)
                for k in ("input_layernorm", "post_attention_layernorm")}
save_file({k: v.astype(np.float32) for k, v in tensors.items()}, str(folder / "model.safetensors"))
prompts = [Prompt(f"p{n}", b, "", tuple(int(t) for t in rng.integers(3, vocab, n))) for n, b in ((300, 512),)]
for attention in ("xla", "chunked"):
    one = JaxBackend(str(folder), attention=attention).observe(prompts, 10)
    two = JaxBackend(str(folder), attention=attention, tensor_parallel=2).observe(prompts, 10)
    assert all(a.top_logprobs[0][0] == b.top_logprobs[0][0] for a, b in zip(one, two))
    print(attention, max(abs(math.exp(lp) - math.exp(dict(b.top_logprobs)[t])) for a, b in zip(one, two)
                         for t, lp in a.top_logprobs[:5]))
"""


def test_grouped_query_heads_stay_with_the_key_value_heads_that_serve_them(tmp_path, embedded):
    """The GPU model has 16 query heads over 8 key/value heads; the tiny one has no groups. A random float32
    model of 4 query heads over 2 key/value heads, split two ways: each device's query heads must read its own
    key/value head, with XLA's attention (which groups the heads) and the chunked one (which repeats them).
    Measured on 100-, 250- and 700-token prompts: at most 2.4e-9 from one device in float32 (2.6e-5 in
    bfloat16)."""
    done = subprocess.run([sys.executable, "-c", GROUPED, str(tmp_path), str(embedded.model / "config.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()[-2:]
    assert [line.split()[0] for line in lines] == ["xla", "chunked"]
    assert all(float(line.split()[1]) < 1e-6 for line in lines), lines


def test_a_kernel_that_sees_fewer_devices_than_the_split_refuses_the_case_naming_it(embedded):
    """A device count set before the kernel started is kept; a case that needs more devices than that says so."""
    script = (f"from kit.backends.jax.runtime import JaxBackend\n"
              f"JaxBackend({str(embedded.model)!r}, tensor_parallel=2, case='jax-tp2')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"})
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "kit.core.errors.BadInput: case jax-tp2: tensor_parallel = 2 needs 2 cpu devices; this kernel sees 1 "
        "(cpu:0)")


def test_a_split_that_does_not_divide_the_heads_is_refused_before_anything_runs(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"jax-tp3": {**F32, "tensor_parallel": 3}})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3
    line = desc.read_text().splitlines().index("[cases.jax-tp3]") + 1
    assert proc.stderr.strip() == (
        f"parity-kit: bad input: {desc}:{line}: case jax-tp3: tensor_parallel = 3 does not divide the model's 4 "
        "attention heads and 4 key/value heads (each device holds whole heads)")
    assert not (tmp_path / "run").exists()


def test_a_gpu_case_that_splits_over_more_gpus_than_it_asks_for_is_refused(tmp_path, embedded):
    case = {**F32, "platform": "gpu", "tensor_parallel": 2, "resources": {"num_gpus": 1}}
    desc = write_descriptor(tmp_path, embedded, cases={"jax-gpu-tp2": case})
    proc = parity_kit("gate", desc, "--out", tmp_path / "run")
    assert proc.returncode == 3
    line = desc.read_text().splitlines().index("[cases.jax-gpu-tp2]") + 1
    assert proc.stderr.strip() == (
        f"parity-kit: bad input: {desc}:{line}: cases.jax-gpu-tp2: tensor_parallel = 2 splits the model over more GPUs "
        "than resources.num_gpus = 1 "
        "gives the case (ask for 2)")
    assert not (tmp_path / "run").exists()
