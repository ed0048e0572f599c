"""A fault's ladder of magnitudes for `parity-kit power`: each faulted copy, its float32 effect, and where a
family's search starts.

Two facts shape it. On a 1B model each float32 effect is about a minute of scoring, so effects are kept in the
run directory for every case measured on the same model, and the start is found by bisection. And a checkpoint
stored in bfloat16 cannot hold every magnitude: a norm weight of 1.0 offset by 0.005 and by 0.01 rounds to the
same 1.0078, and offset by 0.002 rounds back to 1.0. Two magnitudes that write the same bytes are one fault, and
one that writes the source's bytes is none; the ladder compares the copies' digests, so such a rung is never
scored or tried twice, and is never taken for a fault the case missed. The unfaulted model is the fault at
magnitude 0, written by the same writer.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import shutil
from pathlib import Path

from kit.core.model.modeldigest import model_digest
from kit.faults.cache import faulted_copy
from kit.faults.catalogue import Fault
from kit.faults.effect import EmbeddedCases, hf_float32_effect

log = logging.getLogger(__name__)

EFFECTS_FILE = "effects.jsonl"  # float32 effects of the run, by model, fault and magnitude
DECADES_BELOW = 4  # how far under the catalogue's smallest magnitude a case of tiny noise is followed
SOURCE = "source"  # what twin() names when a magnitude's copy is the unfaulted model itself


class Ladder:
    """A fault's magnitudes, each faulted copy and its float32 effect made on first use."""

    def __init__(self, fault: Fault, source: str, effects, cache: Path, kept: Path | None = None):
        self.fault, self.source, self.effects, self.cache, self.kept = fault, source, effects, cache, kept
        self.magnitudes = list(fault.magnitudes)
        # Effects measured before, in this run directory: a measurement continued with --resume must not pay for
        # them again, and an effect is the model's, not the case's, so every case of the run shares it.
        self._effects: dict[float, float] = {}
        self._digests: dict[float, str] = {}
        self._source_digest: str | None = None
        self.scope = _scope(effects)
        if kept is not None and kept.is_file():
            for line in kept.read_text().splitlines():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    entry = json.loads(line)
                    if (entry["fault"], entry["model"], entry.get("prompts")) == (fault.name, str(source), self.scope):
                        self._effects[float(entry["magnitude"])] = float(entry["effect"])

    def insert(self, magnitude: float, effect: float | None = None) -> int:
        """The index of ``magnitude`` on the ladder, placed in order where it is not on it yet (a refinement's
        midpoint, a magnitude an earlier record tried); ``effect``: its float32 effect, measured before (kept in
        the run's effects file, so another case of the run does not measure it again)."""
        m = float(magnitude)
        if m not in self.magnitudes:
            bisect.insort(self.magnitudes, m)
        if effect is not None and m not in self._effects:
            self._effects[m] = float(effect)
            self._keep(m)
        return self.magnitudes.index(m)

    def folder(self, i: int) -> Path:
        """The faulted copy of the ``i``-th magnitude, made once and kept in the ladder's cache."""
        return faulted_copy(self.fault, self.magnitudes[i], self.source, cache_dir=self.cache)

    def digest(self, i: int) -> str:
        """The digest of magnitude ``i``'s faulted copy (written if it is not yet)."""
        m = self.magnitudes[i]
        if m not in self._digests:
            self._digests[m] = model_digest(self.folder(i))
        return self._digests[m]

    def twin(self, i: int, among) -> float | str | None:
        """The magnitude of ``among`` (indices) whose copy has the same bytes as magnitude ``i``'s, ``SOURCE`` where
        the copy is the unfaulted model, else None."""
        if self._source_digest is None:
            # The unfaulted model as the fault's writer writes it (magnitude 0), not the source folder: the writer
            # lays out config.json its own way, so only a copy it wrote compares byte for byte.
            self._source_digest = model_digest(faulted_copy(self.fault, 0.0, self.source, cache_dir=self.cache))
        if self.digest(i) == self._source_digest:
            return SOURCE
        return next((float(self.magnitudes[j]) for j in among if j != i and self.digest(j) == self.digest(i)), None)

    def effect(self, i: int) -> float:
        """The float32 effect of the ``i``-th magnitude, measured once; a magnitude whose copy has the same
        bytes as one measured (the checkpoint's precision rounded them together) takes its effect."""
        m = self.magnitudes[i]
        if m not in self._effects:
            known = [j for j, k in enumerate(self.magnitudes) if k in self._effects and k in self._digests]
            twin = self.twin(i, known)
            if twin is None:
                self._effects[m] = hf_float32_effect(self.folder(i), self.effects)
            else:
                self._effects[m] = self._effects[twin] if isinstance(twin, float) else 0.0
                log.info(f"power: {self.fault.name} at {m:g} writes the same checkpoint as "
                         f"{'the unfaulted model' if twin == SOURCE else f'{twin:g}'} (the checkpoint's precision "
                         f"rounds them alike): float32 effect {self._effects[m]:.3g}, not scored again")
            self._keep(m)
        return self._effects[m]

    def _keep(self, m: float) -> None:
        if self.kept is not None:
            with open(self.kept, "a") as f:
                f.write(json.dumps({"model": str(self.source), "prompts": self.scope, "fault": self.fault.name,
                                    "magnitude": m, "effect": self._effects[m]}) + "\n")

    def start(self, noise: float) -> int:
        """The first magnitude whose effect reaches ``noise``, or the largest where none does. The effect grows
        with the magnitude, so it is found by bisection: a walk up a ladder of seven measures up to seven effects
        where three do. Where even the smallest reaches the noise, decades below it are added while they still do
        (at most DECADES_BELOW): a float32 case's noise (about 1e-6) sits far under the catalogue's smallest
        fault, and "detects from 10000x its noise" says nothing. Effects already known bound the bisection first."""
        below, above = -1, len(self.magnitudes) - 1  # the answer lies in (below, above]
        # Effects known already (kept in the run directory, or an earlier record's) narrow the interval first.
        known = [(j, self._effects[m] >= noise) for j, m in enumerate(self.magnitudes) if m in self._effects]
        low = max((j for j, reaches in known if not reaches), default=-1)
        high = min((j for j, reaches in known if reaches), default=len(self.magnitudes) - 1)
        if low < high:  # else the known effects do not grow with the magnitude: bisect the whole ladder
            below, above = low, high
        while above - below > 1:
            middle = (below + above) // 2
            if self.effect(middle) >= noise:
                above = middle
            else:
                below = middle
        if above > 0:
            return above
        for _ in range(DECADES_BELOW):
            self.magnitudes.insert(0, float(f"{self.magnitudes[0] / 10:.3g}"))
            if self.effect(0) < noise:
                return 1
        return 0

    def remove(self) -> None:
        """Remove the ladder's faulted copies, and the run's folder of copies once no family's is left in it."""
        shutil.rmtree(self.cache, ignore_errors=True)
        with contextlib.suppress(OSError):  # the run's folder of copies, once no family's copy is left in it
            self.cache.parent.rmdir()


def _scope(effects: EmbeddedCases | None) -> dict | None:
    """Which prompts an effect was measured on (None: the whole fixture), as the effects file keys it."""
    spec = effects.float32 if effects is not None else None
    if spec is None or (spec.buckets is None and spec.prompt_ids is None):
        return None
    return {"buckets": spec.buckets, "prompt_ids": spec.prompt_ids}
