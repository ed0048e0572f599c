"""The provenance a fault copy carries: which fault, at which magnitude, into which model; and a case run on a
copy of its model (``on_model``).

`parity-kit fault inject` writes a copy of a checkpoint with a fault in it. A gate run of that copy is known bad
by construction, which a backtest of a new baseline needs to know long after the copy is gone: the copy holds
this small file, its folder's digest covers it (kit.core.model.modeldigest digests every file), so the digest a
descriptor pins for the copy pins its provenance too, and the gate's manifest records it per model digest.

Stdlib only, like every record format of kit.core.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from kit.core.errors import BadInput
from kit.core.model.modeldigest import model_digest
from kit.core.records.recordcheck import Wrong, formatted, text
from kit.core.records.resultcheck import read_shaped
from kit.core.records.spec import CaseSpec

FILE = "parity-kit-fault.json"
FORMAT = "parity-kit-fault/1"
KEYS = ("format", "fault", "magnitude", "unit", "source_model_digest", "source_fault")


def fault_provenance(fault: str, magnitude: float, unit: str, source_digest: str,
                     source_fault: Mapping[str, Any] | None) -> dict:
    """The file's document: ``source_fault`` is the source's own provenance when it was a fault copy too."""
    return {"format": FORMAT, "fault": fault, "magnitude": magnitude, "unit": unit,
            "source_model_digest": source_digest, "source_fault": dict(source_fault) if source_fault else None}


def read_provenance(folder: str | Path) -> dict | None:
    """The provenance in a model folder, None when it holds none; a damaged one is refused in one line."""
    path = Path(folder) / FILE
    if not path.is_file():
        return None
    return read_shaped(path, "fault provenance", _provenance)


def _provenance(doc: Any) -> dict:
    d = formatted(doc, KEYS, FORMAT)
    text(d["fault"], "fault")
    if isinstance(d["magnitude"], bool) or not isinstance(d["magnitude"], (int, float)):
        raise Wrong("magnitude", "expected a number", d["magnitude"])
    text(d["source_model_digest"], "source_model_digest")
    return d


def model_faults(folders: Iterable[tuple[str | Path, str]]) -> dict[str, dict]:
    """Per model digest, the provenance of each ``(folder, digest)`` that is a fault copy (a gate's manifest
    records it); a damaged file is recorded as ``{"unreadable": why}``, since a file of that name is only ever
    written by a fault injection. Never raises: a manifest is written whatever it finds."""
    out: dict[str, dict] = {}
    for folder, digest in folders:
        try:
            found = read_provenance(folder)
        except BadInput as exc:
            out[digest] = {"unreadable": str(exc)}
            continue
        if found is not None:
            out[digest] = found
    return out


def fault_words(found: Mapping[str, Any]) -> str:
    """A fault copy's provenance in a few words: "fault rope_base at 0.05"."""
    if "unreadable" in found:
        return f"its fault provenance unreadable: {found['unreadable']}"
    magnitude = found.get("magnitude")
    at = f" at {magnitude:g}" if isinstance(magnitude, (int, float)) else ""
    return f"fault {found.get('fault')}{at}"


def on_model(spec: CaseSpec, folder: str | Path, digest: str | None = None) -> CaseSpec:
    """The case run on another copy of its model: a faulted copy, or a candidate's weights (the copy's digest
    computed unless given).

    The copy stands for the case's own model run by an engine with the fault, so a calibration record
    measured on that model still sets the case's bounds and drift reference: the record is carried over
    to the copy's digest, which the runner would otherwise refuse as a record made for another model."""
    digest = digest or model_digest(folder)
    changes: dict = {"model_path": str(folder), "model_digest": digest}
    calibration = getattr(spec, "calibration", None)
    if calibration is not None and calibration.get("inputs", {}).get("model_digest") == spec.model_digest:
        changes["calibration"] = {**calibration, "inputs": {**calibration["inputs"], "model_digest": digest}}
    return replace(spec, **changes)
