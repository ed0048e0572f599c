"""Case options of the levanter backend."""

from __future__ import annotations

from pydantic import Field

from kit.backends.levanter.runtime import CheckpointFormat, LevanterAttention
from kit.backends.options import BackendOptions, Choice


class LevanterOptions(BackendOptions):
    """Levanter 1.1 (JAX), in its own kernel; an HF export or a native tensorstore checkpoint."""

    checkpoint: Choice[CheckpointFormat] = CheckpointFormat.HF
    # bucket (tokens, as a string key) -> attention; buckets not named follow `flash_above`
    # (reference attention through 4K tokens, flash beyond, as the real gate).
    attention: dict[str, Choice[LevanterAttention]] = Field(default_factory=dict)
    flash_above: int = Field(default=4096, ge=0)
    flash_block_size: int = Field(default=128, ge=1)  # flash needs lengths that are multiples of it
    # Prompts padded to their bucket's length under the causal mask: XLA compiles once per bucket.
    pad_to_bucket: bool = True
    threads: int = Field(default=1, ge=1)
    device: str = "cpu"

    def implementation_variants(self) -> list[tuple[str, dict, str]]:
        """Levanter's attention kernel choice and its padding, what a release changes most often: reference or
        flash attention at every length, and prompts at their own length."""
        return [("reference-attention", {"attention": {}, "flash_above": 1 << 30},
                 "reference attention at every length"),
                ("flash-attention", {"attention": {}, "flash_above": 0}, "blocked flash attention at every length"),
                # Flash needs lengths in whole blocks, so unpadded prompts take reference attention.
                ("unpadded", {"pad_to_bucket": False, "attention": {}, "flash_above": 1 << 30},
                 "each prompt at its own length: other XLA programs")]
