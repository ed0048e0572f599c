"""Faults of the decode path: a KV cache that misplaces a position, in hf's own cache.

The checkpoint faults (kit.faults.catalogue) change what the model computes everywhere, so the
first-token check sees them. A decode-path bug does not: the prefill is right, and only the steps that
read the cache go wrong. These faults patch transformers' dynamic cache layer for the duration of a
``with`` block, and only on decode steps (one new token appended to a cache that already holds the
prompt), so the prefill and the first-token check stay bit-identical to a clean run; only the decode
check (kit.core.verdict.decode) can see them.

- ``kv_slot_off_by_one``: each new token's key and value are written one slot early, over the
  previous position, and the slot that should hold them stays zero (an engine's slot mapping off by one).
- ``kv_value_scaled``: each new token's value is stored 3 % too large (a cache quantization scale off by a
  little). Small, and it grows with the steps: step 1 (the prefill's) is untouched, step 2 reads one scaled
  value, step 8 seven. It fails the calibrated per-step bounds of ``hf-bf16-decode`` and passes the hand-set
  0.075 the case had before (docs/decode.md).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from kit.core.errors import BadInput


def _off_by_one(torch, keys, new, which):
    # [k_0 .. k_{L-2}, k_new, 0]: the previous position is overwritten, the new slot left empty.
    return torch.cat([keys[..., :-1, :], new, torch.zeros_like(new)], dim=-2)


VALUE_SCALE = 1.03


def _value_scaled(torch, cache, new, which):
    return torch.cat([cache, new * VALUE_SCALE if which == "values" else new], dim=-2)


DECODE_FAULTS: dict[str, tuple[str, Callable]] = {
    "kv_slot_off_by_one": ("each decode step's key and value written one cache slot early", _off_by_one),
    "kv_value_scaled": (f"each decode step's value stored {VALUE_SCALE - 1:.0%} too large", _value_scaled),
}


@contextlib.contextmanager
def decode_fault(name: str) -> Iterator[None]:
    """Inside the block, hf's dynamic cache computes decode steps with the named fault."""
    if name not in DECODE_FAULTS:
        raise BadInput(f"no decode fault named {name!r} (decode faults: {', '.join(DECODE_FAULTS)})")
    import torch
    from transformers.cache_utils import DynamicLayer

    edit = DECODE_FAULTS[name][1]
    clean = DynamicLayer.update

    def update(self, key_states, value_states, *args, **kwargs):
        decoding = self.is_initialized and self.keys.numel() > 0 and key_states.shape[-2] == 1
        if not decoding:  # the prefill: untouched
            return clean(self, key_states, value_states, *args, **kwargs)
        self.keys = edit(torch, self.keys, key_states, "keys")
        self.values = edit(torch, self.values, value_states, "values")
        return self.keys, self.values

    DynamicLayer.update = update
    try:
        yield
    finally:
        DynamicLayer.update = clean
