"""How `parity-kit golden make --backend levanter` runs Levanter, and how a golden it made is made again.

Levanter scores in float32 with the attention its buckets choose; what the command line picks is the
checkpoint it reads (an HF export or a native one) and the device. It runs in Levanter's own environment
(its parity-kit), which the remake line's caller says.
"""

from __future__ import annotations

HF_EXPORT = "hf"  # the checkpoint format `golden make` reads unless told: a remake names only the other


def golden_options(request: dict) -> dict:
    """The checkpoint and device of `golden make`'s run; dtype and attention are Levanter's own (float32, the
    attention each bucket chooses)."""
    return {"checkpoint": request["checkpoint"], "device": request["device"]}


def golden_flags(provenance: dict, options: dict | None = None) -> list[str]:
    """``--checkpoint native`` for a golden made from a native checkpoint; an HF export is the default."""
    checkpoint = (provenance.get("release") or {}).get("checkpoint", HF_EXPORT)
    return [] if checkpoint == HF_EXPORT else ["--checkpoint", str(checkpoint)]
