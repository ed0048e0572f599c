"""The one small interface every backend implements."""

from __future__ import annotations

from typing import Protocol, Sequence

from kit.fixture import PromptCase
from kit.records import Observation


class Backend(Protocol):
    name: str

    def release(self) -> dict:
        """The identity of what computed the observations: engine versions, build, device."""

    def observe(self, cases: Sequence[PromptCase], top_n: int) -> list[Observation]:
        """Next-token top-n logprobs at the last position of each case, most likely first."""

    def details(self) -> dict:
        """How the last ``observe`` computed its results (attention per bucket, ...); may be empty."""

    def close(self) -> None:
        """Free the engine (processes, memory); observing after close is an error."""
