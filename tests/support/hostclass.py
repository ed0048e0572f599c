"""The classes of CPU host the suite runs as: every class the repository holds baselines for, and one it holds none
for. A test that asks for the ``host_class`` fixture (tests/conftest.py) runs once per class, the kit seeing the
forced class in place of this machine's CPU ($PARITY_KIT_HOST_CLASS, kit.core.host.runtime.host_cpu): which
record, golden and power record a case stands on follows the class; the numbers any kernel computes stay this
machine's, so only tests that resolve and judge records, never ones that compute, ask for it.

The classes are read from the committed records when the tests are collected, so a record of a new class, once
committed, is tested without anyone editing a test: a calibration record names its class of CPU (its accelerator,
``cpu (x86-64-v3)``) and its host's model, a golden its host and runtime key, a lineage entry the runtime it holds
on. The kit's keys tell a CPU's vendor apart (MKL's branch, ``mkl=AuthenticAMD``) and AVX-512 with AMX from without
(oneDNN's widest kernels, ``onednn=avx512_core_amx``), so each level is run as an AMD and as an Intel host, and a
level with AVX-512 as an Intel host with AMX too.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from kit.core.host.runtime import CLASS_FEATURES, CLASS_VENDORS, X86_LEVELS

ROOT = Path(__file__).resolve().parents[2]
# Where the repository keeps the records that name a class of hardware.
RECORD_FOLDERS = ("calibrations", "goldens", "baselines")
# A host of no class the repository has a record for: it must stand on borrowed bounds or say "no baseline".
NO_RECORD_MACHINE = "aarch64"
_LEVEL = re.compile(r"\b(x86-64-v\d)\b")
# How a record names a vendor: a model name's first word (AMD EPYC, Intel(R) Xeon(R)) or MKL's vendor id.
_VENDOR_WORDS = {"amd": ("AMD", "AuthenticAMD"), "intel": ("Intel", "GenuineIntel")}


@dataclass(frozen=True)
class HostClass:
    """One class of host: the value of $PARITY_KIT_HOST_CLASS that makes it, and whether the repository holds
    records measured on its level."""

    value: str  # "x86-64-v4:intel:amx", "aarch64"
    level: str  # the accelerator's level as the kit names it: "x86-64-v4", "aarch64"
    recorded: bool

    @property
    def accelerator(self) -> str:
        """The name the kit gives this class's CPU, as a calibration record and a lineage entry state it."""
        return f"cpu ({self.level})"

    def __str__(self) -> str:
        return self.value


def _texts(doc) -> list[str]:
    """Every string in a record, where a class of hardware may be named (a fingerprint, a provenance, a runtime)."""
    if isinstance(doc, dict):
        return [t for v in doc.values() for t in _texts(v)]
    if isinstance(doc, list):
        return [t for v in doc for t in _texts(v)]
    return [doc] if isinstance(doc, str) else []


@functools.cache
def recorded_classes(root: Path = ROOT) -> tuple[frozenset[str], frozenset[str]]:
    """The x86-64 levels and the vendors the committed records name."""
    levels, vendors = set(), set()
    known = {name for name, _ in X86_LEVELS}
    for folder in RECORD_FOLDERS:
        for path in sorted((root / folder).rglob("*.json")):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            for text in _texts(doc):
                levels |= {level for level in _LEVEL.findall(text) if level in known}
                words = set(re.split(r"[\s=()]+", text))
                vendors |= {v for v, names in _VENDOR_WORDS.items() if words & set(names)}
    return frozenset(levels), frozenset(vendors & set(CLASS_VENDORS))


@functools.cache  # read once per collection, however many tests ask
def host_classes(root: Path = ROOT) -> tuple[HostClass, ...]:
    """Each level the records name as each vendor they name, AVX-512 levels on Intel also with AMX; then a host
    of no recorded class."""
    levels, vendors = recorded_classes(root)
    order = [name for name, _ in X86_LEVELS]
    out = []
    for level in sorted(levels, key=order.index):
        avx512 = order.index(level) >= order.index("x86-64-v4")
        for vendor in sorted(vendors):
            out.append(HostClass(f"{level}:{vendor}", level, True))
            if avx512 and vendor == "intel":
                out += [HostClass(f"{level}:{vendor}:{feature}", level, True) for feature in sorted(CLASS_FEATURES)]
    return (*out, HostClass(NO_RECORD_MACHINE, NO_RECORD_MACHINE, False))
