"""The hardware each case of a run is judged for, bound to what the case's own sealed result records of the runtime
it computed on, never taken from the manifest's free text alone.

A run's manifest records, per case, the accelerator it computed on (``"cpu (x86-64-v3)"``, a GPU's name) and the
runtime key its exact golden was chosen by (kit.descriptor.host). Those words choose how the case is judged: which
calibration record's bounds, whether they are borrowed from another class and its drift test left out, which exact
golden, or none. A forger who edits them re-seals the run and picks the judgement. So each claim is held to:

- its form: a name the kit itself writes (``accelerator()``'s ``cpu (<level>)``, or a GPU's name of printable ASCII
  without stray spaces), a runtime key of printable ASCII; anything else is refused in one line;
- the case's options: a card's records never judge a case whose options put it on a CPU, nor a CPU class one on a GPU;
- what the case's result records of its runtime (its backend's ``release``: the device, torch's CPU capability, the
  GPU's name; the GPUs the executor gave it): torch runs its AVX-512 kernels only on an x86-64-v4 CPU and its AVX2
  ones, unpinned, only where there is no AVX-512 (kit.core.host.runtime.aten_capability); a GPU case's card is
  the one its result names; an exact case computed in float64 has the one portable runtime key, and a CPU case's
  torch key names the capability its result records.

The class a case is judged for is the one those facts leave (the claim, where they leave several); a claim they
refute is a problem, and the case is judged for the class the facts give, where they give one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from kit.backends import registry
from kit.core.host.portable import PORTABLE_DTYPE, PORTABLE_RUNTIME
from kit.core.errors import BadInput, ParityKitError
from kit.core.noise.calibration import case_device
from kit.core.records import rundir
from kit.core.records.records import CaseResult
from kit.descriptor.host import CaseHardware, RecordedHost

# accelerator() names a CPU by its x86-64 level, or elsewhere by the machine's own name.
CPU_CLASS = re.compile(r"cpu \((?:x86-64(?:-v[1-4])?|[a-z0-9_]{1,32})\)")
# A GPU as nvidia-smi names it ("NVIDIA H100 80GB HBM3"), or accelerator()'s "cuda (unknown GPU)".
CARD = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._()/+-]| (?! ))*[A-Za-z0-9)]")
# What a runtime key or a driver is written in: printable ASCII, no space at either end.
KEY = re.compile(r"(?:[!-~](?:[ -~]*[!-~])?)?")
V3, V4 = "cpu (x86-64-v3)", "cpu (x86-64-v4)"


@dataclass(frozen=True)
class Claim:
    """The hardware one case is judged for, and what in its result it was bound to."""

    name: str  # the class or card
    facts: str  # what the case's result records of it, in words ("" where it records nothing)


class BoundHost(RecordedHost):
    """A run's recorded hardware with every case's claim bound to its facts (``bind``); its runtime keys held to
    them where the descriptor asks for one (an exact golden chosen by runtime), the problems collected."""

    def __init__(self, cases: Mapping[str, CaseHardware], claims: Mapping[str, Claim],
                 facts: Mapping[str, dict[str, Any]]) -> None:
        super().__init__(cases)
        self.claims, self.facts = dict(claims), dict(facts)
        self.problems: list[str] = []

    def runtime(self, case: str, backend: str, options: Mapping[str, Any]) -> str:
        """The runtime key the run recorded for ``case``, held to what its options and result give."""
        key = super().runtime(case, backend, options)
        problem = runtime_problem(key, backend, options, self.facts.get(case, {}))
        if problem is None:
            return key
        self.problems.append(f"{rundir.MANIFEST}: hardware.{case}.runtime is {_quoted(key)}: {problem}")
        derived = _portable(backend, options)
        return derived if derived is not None else key


def bind(recorded: RecordedHost, options: Mapping[str, Mapping[str, Any]],
         results: Mapping[str, CaseResult]) -> tuple[BoundHost, list[str]]:
    """Every case's recorded hardware (``recorded``) held to its form, its ``options`` and its result's facts:
    the host to resolve the descriptor for, and the problems. BadInput, one line, for a name no kit writes."""
    cases, claims, facts, problems = {}, {}, {}, []
    for case, hw in recorded.cases.items():
        name, driver = hw.accelerator["name"], hw.accelerator["driver"]
        _check_form(case, name, driver, hw.runtime)
        found = facts_of(results.get(case))
        facts[case] = found
        allowed, said = classes_for(found, options.get(case, {}))
        derived = name
        where = _kind(case_device(options.get(case, {})))
        if _kind_of_class(name) != where:
            problems.append(f"{rundir.MANIFEST}: hardware.{case}.accelerator.name is {_quoted(name)}, but the "
                            f"case's options put it on {case_device(options.get(case, {}))}: a "
                            f"{'card' if where == 'cpu' else 'CPU'}'s records never judge it")
        if allowed is not None and name not in allowed:
            problems.append(f"{rundir.MANIFEST}: hardware.{case}.accelerator.name is {_quoted(name)}; its result "
                            f"records {said}: {' or '.join(sorted(allowed)) or 'no such class'}")
            derived = sorted(allowed)[0] if len(allowed) == 1 else name
        cases[case] = CaseHardware({"name": derived, "driver": driver}, hw.runtime)
        claims[case] = Claim(derived, said)
    return BoundHost(cases, claims, facts), problems


def facts_of(result: CaseResult | None) -> dict[str, Any]:
    """What a case's result records of the runtime it computed on: its backend's device, torch's CPU capability
    and the GPU's name (``release``), and the GPUs its executor gave it."""
    if result is None:
        return {}
    release = result.release if isinstance(result.release, dict) else {}
    out = {k: release[k] for k in ("device", "cpu_capability", "device_name") if isinstance(release.get(k), str)}
    cards = [d.get("name") for d in result.devices if isinstance(d, dict) and isinstance(d.get("name"), str)]
    if cards:
        out["cards"] = sorted(set(cards))
    return out


def classes_for(facts: Mapping[str, Any], options: Mapping[str, Any]) -> tuple[set[str] | None, str]:
    """The classes of hardware ``facts`` leave for a case of ``options`` (None: they leave any), and the facts in
    words."""
    said = ", ".join(f"{k} {v if isinstance(v, str) else '/'.join(v)}" for k, v in facts.items())
    device = facts.get("device")
    if device is not None and _kind(device) != _kind(case_device(options)):
        return set(), said
    card = facts.get("device_name") or (facts["cards"][0] if len(facts.get("cards", ())) == 1 else None)
    if _kind(case_device(options)) == "cuda":
        return ({card}, said) if card else (None, said)
    capability = str(facts.get("cpu_capability", "")).lower()
    pinned = str(options.get("cpu_kernels", "")).lower() == "avx2"  # the descriptor's, not the run's word
    if capability == "avx512":
        return {V4}, said
    if capability == "avx2":
        return ({V3, V4} if pinned else {V3}), said
    return None, said


def runtime_problem(key: str, backend: str, options: Mapping[str, Any], facts: Mapping[str, Any]) -> str | None:
    """Why ``key`` is not a runtime key the case's backend computes for ``options`` where its result's ``facts``
    hold; None when it may be."""
    if not key:
        return "empty, where the descriptor chooses the case's exact golden by its runtime"
    portable = _portable(backend, options)
    if portable is not None:
        return None if key == portable else f"a case computed in {PORTABLE_DTYPE} has the runtime {_quoted(portable)}"
    capability = str(facts.get("cpu_capability", "")).lower()
    if key.startswith("torch-cpu ") and capability and f" aten={capability} " not in f"{key} ":
        return f"its result records cpu_capability {facts['cpu_capability']}, which the key does not name"
    card = facts.get("device_name")
    if key.startswith("cuda ") and card and not key.startswith(f"cuda {card} driver "):
        return f"its result records the card {card}, which the key does not name"
    return None


def _portable(backend: str, options: Mapping[str, Any]) -> str | None:
    """The runtime key of a case computed in float64, which holds on every host; None for any other case."""
    if options.get("dtype") != PORTABLE_DTYPE:
        return None
    try:
        key = registry.get(backend).runtime_key(dict(options))
    except (ParityKitError, KeyError, ValueError, ImportError):
        return None
    return key if key == PORTABLE_RUNTIME else None


def _check_form(case: str, name: str, driver: str, runtime: str) -> None:
    shown = f"{rundir.MANIFEST}: hardware.{case}"
    if not (CPU_CLASS.fullmatch(name) or (CARD.fullmatch(name) and not name.startswith("cpu"))):
        raise BadInput(f"{shown}.accelerator.name is {_quoted(name)}: not a class or card the kit names (a CPU is "
                       "\"cpu (x86-64-v3)\" and the like, a GPU its name in printable ASCII)")
    for key, value in (("accelerator.driver", driver), ("runtime", runtime)):
        if not KEY.fullmatch(value):
            raise BadInput(f"{shown}.{key} is {_quoted(value)}: not one the kit writes (printable ASCII, no space at "
                           "either end)")


def _kind(device: str) -> str:
    """A device as a class of hardware: "cuda" for any GPU (jax names it "gpu"), else its own name."""
    return "cuda" if device.startswith("cuda") or device == "gpu" else device


def _kind_of_class(name: str) -> str:
    return "cpu" if CPU_CLASS.fullmatch(name) else "cuda"


def _quoted(value: str) -> str:
    return ascii(value).replace("'", '"') if not value.isascii() or not value.isprintable() else f'"{value}"'
