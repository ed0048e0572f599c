"""Which CPU kernels torch computes an hf case with, pinned where a case asks, and the key they make.

An exact golden of hf holds wherever the same kernels run. Left alone, torch, oneDNN and MKL each pick the
widest kernels the CPU offers, so an AVX2 host and an AVX-512 host (and MKL on two CPU vendors) round
differently. ``cpu_kernels = "avx2"`` pins all three to their AVX2 code, which every x86-64-v3 or newer CPU
runs, so one golden holds on all of them (docs/exact-baselines.md has the experiment). Stdlib only: the pin
must be in place before torch is imported, in the case kernel, the golden maker and the calibrator alike.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum

from kit.core.errors import BadInput
from kit.core.host.portable import PORTABLE_DTYPE, PORTABLE_RUNTIME
from kit.core.host.runtime import TORCH_AVX2_PIN, host_runtime_of, torch_cpu_runtime



class CpuKernels(StrEnum):
    """The CPU kernels an hf case computes with, as its ``cpu_kernels`` option spells it: the widest the CPU
    offers, or torch's, oneDNN's and MKL's AVX2 code."""

    NATIVE = "native"
    AVX2 = "avx2"


def pin_env(options: dict) -> dict[str, str]:
    """The environment variables that pin a case's kernels (none for the native ones or a GPU)."""
    if options.get("cpu_kernels",
                   CpuKernels.NATIVE) == CpuKernels.AVX2 and not str(options.get("device", "cpu")).startswith("cuda"):
        return dict(TORCH_AVX2_PIN)
    return {}


def exact_runtime(options: dict) -> str:
    """The runtime key of an hf case with ``options`` on this host (kit.core.host.runtime); a float64 case's holds
    on every host (kit.core.host.portable)."""
    if options.get("dtype") == PORTABLE_DTYPE:
        return PORTABLE_RUNTIME
    if str(options.get("device", "cpu")).startswith("cuda"):
        return host_runtime_of(options)
    return torch_cpu_runtime({**os.environ, **pin_env(options)}, threads=int(options.get("threads", 1)))


def legacy_runtime(provenance: dict) -> str | None:
    """The runtime key of an hf exact golden made before goldens recorded one, where its record says enough: a
    golden made on an x86-64-v3 host's CPU ran torch's AVX2 kernels with oneDNN's AVX2 ones and MKL's branch for
    that CPU; nothing else can be recovered (an AVX-512 host's oneDNN may have run bf16 or VNNI code)."""
    hardware_text = str(provenance.get("hardware", ""))
    release = provenance.get("release") or {}
    if release.get("device", "cpu") != "cpu":
        return None
    model = hardware_text.split(" (", 1)[0]
    vendor = "AuthenticAMD" if model.startswith("AMD") else "GenuineIntel" if model.startswith("Intel") else None
    if vendor is None or not hardware_text.endswith(", x86-64-v3)"):
        return None
    return f"torch-cpu x86_64 aten=avx2 onednn=avx2 mkl={vendor} {model}"


def apply_pin(options: dict) -> None:
    """Put the pin in this process's environment before torch reads it, or refuse where it is too late."""
    wanted = pin_env(options)
    if not wanted:
        return
    differs = {k: v for k, v in wanted.items() if os.environ.get(k) != v}
    if differs and "torch" in sys.modules:
        raise BadInput(f"cpu_kernels = {options.get('cpu_kernels')!r} needs {', '.join(sorted(differs))} set "
                       "before torch is imported, and torch is already imported in this process: restart the "
                       "kernel (or start it with those variables)")
    os.environ.update(wanted)


def check_pin(options: dict, capability: str) -> None:
    """Refuse a run whose torch did not take the pin (it read its capability before the pin was set)."""
    if pin_env(options) and capability.lower() != CpuKernels.AVX2:
        raise BadInput(f"cpu_kernels = 'avx2' is set but torch runs its {capability} kernels: the pin came too "
                       "late in this process; restart the kernel")
