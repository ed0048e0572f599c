"""`parity-kit fault list | inject`: the fault catalogue as a user's tool, not only the test suite's.

A gate's bounds say how much noise a healthy release may have; they do not say how small a bug the gate still
fails. The catalogue answers that for the embedded model in the tests; with these two commands a user asks it
of their own gate: inject a fault at a magnitude into a copy of their Llama checkpoint, point a case at the
copy, and run the gate. The copy is written into a fresh folder, never over anything, and its source folder's
other files (tokenizer, generation config) come with it, so every backend loads it as it loads the original.
Beside them it holds its provenance (kit.core.model.faultcopy: the fault, its magnitude, the source's digest), which
its digest covers: a gate run of the copy is then known bad to a backtest of a new baseline (kit.baselines).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kit.core.model import faultcopy
from kit.core.records import paths
from kit.core.errors import BadInput
from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes
from kit.core.model.modelconfig import hf_config
from kit.core.model.modeldigest import model_digest
from kit.faults.catalogue import CATALOGUE, fault, faulted
from kit.faults.checkpoint import write_checkpoint
from kit.run import lifecycle
from kit.run.output import NOTICE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CatalogueRow:
    name: str
    mimics: str
    edit: str
    unit: str
    magnitudes: tuple[float, ...]


def catalogue_rows() -> list[CatalogueRow]:
    """Every fault, with the bug it stands for, what it edits and the magnitudes the test suite grades."""
    return [CatalogueRow(f.name, f.mimics, f.edit, f.unit, f.magnitudes) for f in CATALOGUE]


def inject(name: str, magnitude: float, model: str | Path, out: str | Path) -> Path:
    """A copy of the checkpoint in ``model`` with fault ``name`` at ``magnitude``, written into ``out`` (which
    must be new or empty, and outside ``model``). Refused in one line: an unknown fault, a magnitude out of its range,
    a folder that is no Llama checkpoint, an ``out`` inside the model's folder, or a checkpoint the fault cannot be
    applied to (it names a layer the model lacks)."""
    f = fault(name)
    f.check(magnitude)
    model = Path(model)
    if hf_config(model) is None:  # also refuses a config that is not a JSON object, naming the file
        raise BadInput(f"{model}: no config.json; a fault is injected into a Hugging Face Llama checkpoint")
    if Path(out).resolve().is_relative_to(model.resolve()):  # the copy would change the model a descriptor pins
        raise BadInput(f"--out {paths.display(Path(out))} lies inside the model folder {paths.display(model)}; "
                       "write the faulted copy elsewhere")
    # Claimed, not locked: the copy is a model folder, whose digest covers every file in it (a lock file too).
    target = lifecycle.claim(out, "--out", "fault injection")
    try:
        checkpoint = faulted(f, magnitude, model)
    except (KeyError, IndexError) as exc:
        target.rmdir()  # empty: claimed for this copy only
        raise BadInput(f"{model}: fault {name} cannot be applied to this checkpoint: it needs {exc}, which the "
                       "model lacks") from None
    try:
        source_fault = faultcopy.read_provenance(model)  # a copy of a copy says both faults
        source_digest = model_digest(model)
    except BadInput:
        target.rmdir()
        raise
    target.rmdir()  # write_checkpoint makes the folder itself, refusing one that exists
    write_checkpoint(checkpoint, model, target)
    # Written last, over the source's own provenance that write_checkpoint copied with the other files.
    atomic_write_bytes(target / faultcopy.FILE, canonical_bytes(
        faultcopy.fault_provenance(f.name, magnitude, f.unit, source_digest, source_fault)))
    # A descriptor pins each model's digest: the line a user needs to name the copy in [models].
    log.log(NOTICE, f"fault {name} at {magnitude:g} ({f.unit}) injected into a copy of {model}: "
                    f"digest = \"{model_digest(target)}\"")
    return target
