"""The base of every backend's options schema (pydantic; imported by the descriptor only, never in a kernel)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class BackendOptions(BaseModel):
    """A backend's case options: the keys a descriptor case may set beyond the common ones.
    Their defaults are stated here and nowhere else: the resolved case carries every option."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)  # no NaN, no infinity

    def code_settings(self) -> list[tuple[str, str]]:
        """The options that make the engine load code beyond the kit's own, as (key, what it loads):
        the descriptor layer warns about each. None by default."""
        return []
