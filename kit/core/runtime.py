"""The runtime fingerprint of a host: CPU model, OS, machine and instruction-set level.

Bit-exact goldens hold only on the runtime that made them: torch's ATen dispatch, MKL and XLA's CPU
codegen pick their kernels by the instruction set the CPU offers, so the same code and versions give
logprobs that differ in the last bits on an AVX2 host and an AVX-512 one. The fingerprint names the
x86-64 microarchitecture level (psABI v1-v4) so that two such hosts tell apart; on other machines the
level is the machine name. Stdlib only: it runs in every case kernel.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path

# The x86-64 psABI levels as /proc/cpuinfo spells their flags (sse3 is "pni", lzcnt is "abm").
# Each level also needs every flag of the levels below it.
X86_LEVELS: tuple[tuple[str, frozenset[str]], ...] = (
    ("x86-64-v1", frozenset({"cmov", "cx8", "fpu", "fxsr", "mmx", "syscall", "sse", "sse2"})),
    ("x86-64-v2", frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"})),
    ("x86-64-v3", frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"})),
    ("x86-64-v4", frozenset({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})),
)
X86_MACHINES = frozenset({"x86_64", "amd64", "x64"})
# The level a fingerprint ends in, inside its parentheses: "CPU (Linux x86_64, x86-64-v3)".
_LEVEL_SUFFIX = re.compile(r", [^,()]+\)$")


def isa_level(flags: set[str] | frozenset[str] | None, machine: str) -> str:
    """The highest x86-64 level all of whose flags (and its predecessors') are present; elsewhere, or
    when the flags cannot be read, the machine name itself."""
    if machine.lower() not in X86_MACHINES or flags is None:
        return machine.lower() or "unknown"
    level, needed = "x86-64", set()  # below v1 (hardly a real x86-64 CPU): the bare architecture
    for name, more in X86_LEVELS:
        needed |= more
        if not needed <= flags:
            break
        level = name
    return level


def cpuinfo_fields(text: str) -> tuple[str | None, set[str] | None]:
    """The first CPU's model name and flags from /proc/cpuinfo text (None where absent)."""
    model = flags = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and flags is None:
            flags = set(value.split())
    return model, flags


def _cpuinfo() -> tuple[str | None, set[str] | None]:
    try:
        return cpuinfo_fields(Path("/proc/cpuinfo").read_text())
    except OSError:
        return None, None


def host_isa_level() -> str:
    return isa_level(_cpuinfo()[1], platform.machine())


def hardware() -> str:
    """This host's runtime fingerprint, e.g. ``AMD EPYC (Linux x86_64, x86-64-v3)``; deterministic."""
    model, flags = _cpuinfo()
    cpu = model or platform.processor() or platform.machine()
    return f"{cpu} ({platform.system()} {platform.machine()}, {isa_level(flags, platform.machine())})"


def without_level(fingerprint: str) -> str:
    """A fingerprint as it read before it named the ISA level: ``AMD EPYC (Linux x86_64)``."""
    return _LEVEL_SUFFIX.sub(")", fingerprint)


def has_level(fingerprint: str) -> bool:
    return without_level(fingerprint) != fingerprint


def runtime_match(made_on: str, host: str) -> str | None:
    """How a golden made on ``made_on`` fits ``host``: "exact" when the fingerprints are equal, "legacy"
    when the golden predates the ISA level and the CPU model and OS agree, else None."""
    if made_on == host:
        return "exact"
    if not has_level(made_on) and made_on == without_level(host):
        return "legacy"
    return None


# What moves numerics besides the code: the libraries that compute, and the environment variables that
# pick their kernels, threads and precision.
NUMERIC_PACKAGES = ("torch", "transformers", "jax", "jaxlib", "vllm", "numpy", "levanter", "haliax", "equinox",
                    "safetensors", "intel-openmp", "mkl")
NUMERIC_ENV_PREFIXES = ("OMP_", "MKL_", "OPENBLAS_", "KMP_", "ONEDNN_", "DNNL_", "XLA_", "JAX_", "TF_CPP_", "CUDA_",
                        "CUBLAS_", "CUDNN_", "NVIDIA_TF32", "NCCL_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "VLLM_")
# Where a tool keeps its files changes no number, and a path names the machine: such variables stay out.
LOCATION_SUFFIXES = ("_DIR", "_FILE", "_PATH", "_HOME", "_ROOT")


def numeric_env(environ) -> dict[str, str]:
    """The environment variables that can change a backend's numbers, without the ones that only say where."""
    return {k: v for k, v in sorted(environ.items())
            if k.startswith(NUMERIC_ENV_PREFIXES) and not k.endswith(LOCATION_SUFFIXES)}


def accelerator(device: str = "cpu") -> dict[str, str]:
    """The device a case computes on: "cpu (x86-64-v3)" with its instruction-set level, or the GPU's name and driver (from nvidia-smi, which every
    CUDA node has; no torch or jax import needed)."""
    if not device.startswith("cuda"):
        # The instruction-set level picks the CPU's kernels, and with them the rounding (see hardware()).
        return {"name": f"cpu ({host_isa_level()})", "driver": ""}
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"name": "cuda (unknown GPU)", "driver": ""}
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return {"name": "cuda (unknown GPU)", "driver": ""}
    name, _, driver = (out.splitlines() or [""])[0].partition(",")
    return {"name": name.strip() or "cuda (unknown GPU)", "driver": driver.strip()}


def numerics_fingerprint(device: str = "cpu") -> dict:
    """The runtime a measurement of noise holds for: hardware, accelerator, numeric packages, environment."""
    import os
    from importlib import metadata

    packages = {}
    for name in NUMERIC_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    env = numeric_env(os.environ)
    return {"hardware": hardware(), "accelerator": accelerator(device), "python": platform.python_version(),
            "packages": packages, "env": env}
