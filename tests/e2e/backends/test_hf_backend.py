"""The hf backend: last-position logits only, and the same numbers as a plain full forward."""

from __future__ import annotations

import math

import torch
from transformers import AutoModelForCausalLM

from kit.backends.hf.runtime import HfBackend
from kit.core.records.fixture import load_fixture


def test_observation_equals_last_row_of_a_full_forward(embedded):
    fixture = load_fixture(embedded.fixture)
    cases = [fixture.prompts[0], max(fixture.prompts, key=lambda c: c.n_tokens)]
    observed = HfBackend(str(embedded.model), dtype="float32").observe(cases, top_n=10)
    model = AutoModelForCausalLM.from_pretrained(embedded.model, dtype=torch.float32, attn_implementation="eager")
    for case, obs in zip(cases, observed):
        with torch.inference_mode():
            full = model(input_ids=torch.tensor([case.prompt_token_ids])).logits[0]
        assert full.shape[0] == case.n_tokens
        ref = torch.log_softmax(full[-1].float(), -1)
        values, indices = torch.topk(ref, 10)
        assert [t for t, _ in obs.top_logprobs] == indices.tolist()
        assert max(abs(math.exp(a) - math.exp(b)) for (_, a), b in zip(obs.top_logprobs, values.tolist())) < 1e-6
        assert obs.n_tokens == case.n_tokens


def test_only_the_last_position_is_projected_to_the_vocabulary(embedded):
    fixture = load_fixture(embedded.fixture)
    backend = HfBackend(str(embedded.model), dtype="float32")
    shapes = []
    backend.model.lm_head.register_forward_hook(lambda m, i, o: shapes.append(tuple(o.shape)))
    longest = max(fixture.prompts, key=lambda c: c.n_tokens)
    backend.observe([longest], top_n=5)
    assert shapes == [(1, 1, backend.model.config.vocab_size)]


def test_bfloat16_stays_close_to_float32(embedded):
    fixture = load_fixture(embedded.fixture)
    cases = fixture.prompts[:4]
    f32 = HfBackend(str(embedded.model), dtype="float32").observe(cases, top_n=5)
    b16 = HfBackend(str(embedded.model), dtype="bfloat16").observe(cases, top_n=64)
    for a, b in zip(f32, b16):
        bd = dict(b.top_logprobs)
        assert max(abs(torch.tensor(lp).exp() - torch.tensor(bd[t]).exp()) for t, lp in a.top_logprobs) < 0.075


def test_compiled_layers_give_the_same_top_k(embedded):
    fixture = load_fixture(embedded.fixture)
    by_length = sorted(fixture.prompts, key=lambda c: c.n_tokens)
    cases = [by_length[0], by_length[len(by_length) // 2]]  # two lengths: one graph must serve both
    eager = HfBackend(str(embedded.model), dtype="float32").observe(cases, top_n=10)
    backend = HfBackend(str(embedded.model), dtype="float32", compile=True)
    # Dynamo's own count of the graphs it captured: the first length captures the layers' graph,
    # the second reuses it (dynamic shapes), so compiling really ran and one graph serves both.
    stats = torch._dynamo.utils.counters["stats"]
    before = stats["unique_graphs"]
    compiled = backend.observe(cases[:1], top_n=10)
    captured = stats["unique_graphs"] - before
    compiled += backend.observe(cases[1:], top_n=10)
    assert captured > 0 and stats["unique_graphs"] - before == captured
    assert backend.details()["compile"] is True
    assert backend.release()["compile"] == "torch.compile per layer"
    layers = backend.model.get_decoder().layers
    assert all(layer._compiled_call_impl is not None for layer in layers)
    for a, b in zip(eager, compiled):
        assert [t for t, _ in a.top_logprobs] == [t for t, _ in b.top_logprobs]
        assert max(abs(math.exp(x) - math.exp(y)) for (_, x), (_, y) in zip(a.top_logprobs, b.top_logprobs)) < 1e-5


def test_sdpa_kernel_preference_reaches_the_repeated_kv_attention_too():
    """The calibration's sdpa-efficient variant on a GPU runs sdpa_repeat_kv (the efficient kernel takes no
    grouped-query heads): its kernel preference must be applied there as under plain sdpa."""
    from types import SimpleNamespace

    def enabled(attn_implementation, sdpa_backend):
        context = HfBackend._sdpa_context(SimpleNamespace(attn_implementation=attn_implementation,
                                                          sdpa_backend=sdpa_backend))
        with context:
            cuda = torch.backends.cuda
            return {"flash": cuda.flash_sdp_enabled(), "efficient": cuda.mem_efficient_sdp_enabled(),
                    "cudnn": cuda.cudnn_sdp_enabled(), "math": cuda.math_sdp_enabled()}

    # The preferred kernel, then its fallbacks for what it refuses (a mask): efficient, then math.
    only_efficient = {"flash": False, "efficient": True, "cudnn": False, "math": True}
    assert enabled("sdpa_repeat_kv", "efficient") == only_efficient == enabled("sdpa", "efficient")
    assert enabled("sdpa_repeat_kv", "flash") == {"flash": True, "efficient": True, "cudnn": False, "math": True}
    # No preference: torch's own choice, every kernel left on.
    assert enabled("sdpa_repeat_kv", "auto") == enabled("eager", "efficient") == {
        "flash": True, "efficient": True, "cudnn": True, "math": True}
