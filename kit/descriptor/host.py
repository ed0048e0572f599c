"""The hardware a descriptor is resolved for: this machine's, asked, or the one a run recorded.

Resolving a descriptor asks the hardware two questions: the runtime key of an exact case (which of its entry's
goldens holds here) and the accelerator a calibrated case computes on (which of its records is this class's, and
whether a record of another class stands in). A gate asks this machine (``Host``), and its manifest records every
answer per case (``hardware_record``). `parity-kit verify` resolves the same descriptor again on another machine,
for the hardware the run recorded (``RecordedHost``), so that the golden and record it holds a case to are the ones
the gate chose there, by the same code, and not the ones the verifying machine would choose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from kit.backends import registry
from kit.core.noise.calibration import case_device
from kit.core.records.recordcheck import Wrong, mapping, text
from kit.core.records.spec import CaseSpec


class Host:
    """This machine, asked once per device (nvidia-smi for a GPU) for every case that resolves on it."""

    def __init__(self) -> None:
        self._accelerators: dict[str, dict[str, str]] = {}

    def accelerator(self, case: str, options: Mapping[str, Any]) -> dict[str, str]:
        """The accelerator a case of ``options`` computes on: ``{"name", "driver"}``
        (kit.core.host.runtime.accelerator)."""
        from kit.core.host.runtime import accelerator

        device = case_device(options)
        if device not in self._accelerators:
            self._accelerators[device] = accelerator(device)
        return dict(self._accelerators[device])

    def runtime(self, case: str, backend: str, options: Mapping[str, Any]) -> str:
        """The runtime key an exact case of ``backend`` with ``options`` computes under (its backend's own key)."""
        return registry.get(backend).runtime_key(dict(options))


@dataclass(frozen=True)
class CaseHardware:
    """What a run recorded of the hardware one case was resolved for."""

    accelerator: Mapping[str, str]  # {"name", "driver"}: the device it computed on
    runtime: str  # the runtime key its exact golden was chosen by ("" for a case that has none)

    def to_dict(self) -> dict:
        """The hardware a case was resolved for, as a run's manifest records it."""
        return {"accelerator": dict(self.accelerator), "runtime": self.runtime}


class RecordedHost(Host):
    """The hardware a run recorded, per case (its manifest's ``hardware``): asked nothing of this machine."""

    def __init__(self, cases: Mapping[str, CaseHardware]) -> None:
        super().__init__()
        self.cases = dict(cases)

    def accelerator(self, case: str, options: Mapping[str, Any]) -> dict[str, str]:
        """The accelerator a run recorded for ``case``: a descriptor resolved again for `verify` or a
        backtest judges as that run was judged, not as this machine would be."""
        return dict(self._of(case).accelerator)

    def runtime(self, case: str, backend: str, options: Mapping[str, Any]) -> str:
        """The runtime key a run recorded for ``case``, for the same reason as ``accelerator``."""
        return self._of(case).runtime

    def _of(self, case: str) -> CaseHardware:
        if case not in self.cases:  # the caller holds the record to the cases first (``recorded_hardware``)
            raise KeyError(f"no hardware recorded for case {case}")
        return self.cases[case]


def hardware_record(specs: Sequence[CaseSpec], host: Host) -> dict[str, dict]:
    """Per case, the hardware ``host`` gives it: what a run's manifest records (``hardware``)."""
    return {s.name: CaseHardware(host.accelerator(s.name, s.options), s.runtime).to_dict() for s in specs}


def recorded_hardware(doc: Any, cases: Sequence[str]) -> RecordedHost:
    """The hardware a manifest's ``hardware`` records for each of ``cases``; Wrong (naming the key) when it does
    not record it whole."""
    recorded = mapping(doc, "hardware")
    out = {}
    for case in cases:
        if case not in recorded:
            raise Wrong(f"hardware.{case}", "missing: no record of the hardware the case was resolved for")
        entry = mapping(recorded[case], f"hardware.{case}")
        acc = mapping(entry.get("accelerator"), f"hardware.{case}.accelerator")
        out[case] = CaseHardware({"name": text(acc.get("name"), f"hardware.{case}.accelerator.name"),
                                  "driver": _string(acc.get("driver"), f"hardware.{case}.accelerator.driver")},
                                 _string(entry.get("runtime"), f"hardware.{case}.runtime"))
    return RecordedHost(out)


def _string(value: Any, key: str) -> str:
    """A string, empty or not (a CPU has no driver; a case with no exact golden no runtime key)."""
    if not isinstance(value, str):
        raise Wrong(key, "expected a string", value)
    return value
