"""``sdpa_repeat_kv``: torch SDPA with key/value heads repeated up front, registered with transformers.

transformers' own ``sdpa`` hands grouped-query attention to torch as ``enable_gqa=True``
when there is no mask. torch's memory-efficient kernel does not take that flag and flash
attention has no float32 kernel, so a float32 forward with GQA falls to the math kernel,
which materializes [heads, seq, seq] scores: 64 GiB at 32K tokens. Repeating the key/value
heads first costs [heads, seq, head_dim] per layer and lets the memory-efficient kernel
serve float32 at any length. The mask is transformers' own SDPA mask.
"""

from __future__ import annotations

from enum import StrEnum


class AttnImplementation(StrEnum):
    """The attention an hf case runs, as its ``attn_implementation`` option spells it: transformers' own sdpa or
    eager, or this module's."""

    SDPA = "sdpa"
    EAGER = "eager"
    SDPA_REPEAT_KV = "sdpa_repeat_kv"


NAME = AttnImplementation.SDPA_REPEAT_KV.value  # the word transformers registers it under


def sdpa_repeat_kv(module, query, key, value, attention_mask, scaling=None, dropout=0.0, is_causal=None,
                   **kwargs):
    """SDPA with the key and value heads repeated to the query heads' count first, as transformers' eager path
    does, instead of SDPA's own grouped-query handling: another kernel a healthy release may choose, for
    calibration to measure."""
    import torch

    groups = query.shape[1] // key.shape[1]
    if groups > 1:  # key head j serves query heads j*groups .. j*groups+groups-1, as in transformers
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    causal = attention_mask is None and query.shape[2] > 1
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           is_causal=causal, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


def register() -> None:
    """Register ``sdpa_repeat_kv`` under its name with transformers' attention and mask interfaces, so a case
    selects it as it selects any implementation."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, sdpa_repeat_kv)
    AttentionMaskInterface.register(NAME, sdpa_mask)
