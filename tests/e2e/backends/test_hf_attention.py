"""sdpa_repeat_kv computes what transformers' own attention computes, with grouped-query attention too."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from kit.backends.hf import attention as hf_attention


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_sdpa_repeat_kv_equals_eager_attention(tmp_path, kv_heads):
    hf_attention.register()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=kv_heads, head_dim=16)
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    ids = torch.randint(0, 97, (2, 40))
    mask = torch.ones_like(ids)
    mask[1, :7] = 0  # one left-padded row: the masked path as well as the causal one
    logits = {}
    for impl in ("eager", hf_attention.NAME):
        model = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.float32, attn_implementation=impl).eval()
        with torch.inference_mode():
            logits[impl] = (model(input_ids=ids[:1]).logits[0, -1],
                            model(input_ids=ids, attention_mask=mask).logits[1, -1])
    for a, b in zip(logits["eager"], logits[hf_attention.NAME]):
        assert torch.allclose(a, b, atol=1e-5, rtol=0), (a - b).abs().max()
