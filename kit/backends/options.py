"""The base of every backend's options schema (pydantic; imported by the descriptor only, never in a kernel)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict, Field

E = TypeVar("E", bound=StrEnum)
# An option whose value is one of a StrEnum's words (docs/architecture.md, "Enumerations: one style"): the enum the
# backend's runtime checks against, so the schema lists no words of its own. Lax where the model is strict: strict
# pydantic takes only the member itself, never the word a descriptor holds.
Choice = Annotated[E, Field(strict=False)]


class BackendOptions(BaseModel):
    """A backend's case options: the keys a descriptor case may set beyond the common ones.
    Their defaults are stated here and nowhere else: the resolved case carries every option."""

    # No NaN, no infinity. A Choice holds its word, not the member, as the options resolved and sent to a kernel
    # always have (its default too, hence validated).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False, use_enum_values=True,
                              validate_default=True)

    def code_settings(self) -> list[tuple[str, str]]:
        """The options that make the engine load code beyond the kit's own, as (key, what it loads):
        the descriptor layer warns about each. None by default."""
        return []

    def calibration_variants(self, launches: int = 2) -> list[dict]:
        """The clean variants ``parity-kit calibrate`` scores, one engine launch each: the case as set, the
        backend's own implementation variants (``implementation_variants``), and ``launches - 1`` further
        launches of the case as set (an engine that is not deterministic across launches shows it there). A
        variant that changes nothing of this case's options is dropped: it would count one measurement twice."""
        current = self.model_dump()
        variants: list[dict] = [{"name": "as-set", "overrides": {}, "why": "the case as the descriptor sets it"}]
        seen = [current]
        for name, overrides, why in self.implementation_variants():
            effective = {**current, **overrides}
            if effective in seen:
                continue
            seen.append(effective)
            variants.append({"name": name, "overrides": overrides, "why": why})
        variants.extend({"name": "as-set", "overrides": {}, "launch": n,
                         "why": "a second launch: nondeterminism across launches" if n == 2 else
                         f"launch {n}: nondeterminism across launches"} for n in range(2, launches + 1))
        return variants

    def implementation_variants(self) -> list[tuple[str, dict, str]]:
        """(name, option overrides, why a healthy release may differ so): none unless the backend says."""
        return []

    @classmethod
    def model_problem(cls, options: Mapping[str, Any], model_dir: str | Path) -> str | None:
        """Why the case's model cannot run with these (resolved) options, read from the model folder
        before anything runs (the gate's preflight refuses the case with it); None when it can."""
        return None
