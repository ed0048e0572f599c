"""The base of every backend's options schema (pydantic; imported by the descriptor only, never in a kernel)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class BackendOptions(BaseModel):
    """A backend's case options: the keys a descriptor case may set beyond the common ones.
    Their defaults are stated here and nowhere else: the resolved case carries every option."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
