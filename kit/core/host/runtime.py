"""The runtime fingerprint of a host (CPU model, OS, machine, instruction-set level), and the runtime keys
of exact results.

Bit-exact goldens hold only where the same kernels compute. The fingerprint names the x86-64
microarchitecture level (psABI v1-v4), which is what a class of noise follows (calibration records are
chosen by it); the bits of an exact result follow each numeric stack's own dispatch, which the runtime keys
below name (docs/exact-baselines.md). Stdlib only: it runs in every case kernel.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The x86-64 psABI levels as /proc/cpuinfo spells their flags (sse3 is "pni", lzcnt is "abm").
# Each level also needs every flag of the levels below it.
X86_LEVELS: tuple[tuple[str, frozenset[str]], ...] = (
    ("x86-64-v1", frozenset({"cmov", "cx8", "fpu", "fxsr", "mmx", "syscall", "sse", "sse2"})),
    ("x86-64-v2", frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"})),
    ("x86-64-v3", frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"})),
    ("x86-64-v4", frozenset({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})),
)
X86_MACHINES = frozenset({"x86_64", "amd64", "x64"})


def isa_level(flags: set[str] | frozenset[str] | None, machine: str) -> str:
    """The highest x86-64 level all of whose flags (and its predecessors') are present; elsewhere, or
    when the flags cannot be read, the machine name itself."""
    if machine.lower() not in X86_MACHINES or flags is None:
        return machine.lower() or "unknown"
    level, needed = "x86-64", set[str]()  # below v1 (hardly a real x86-64 CPU): the bare architecture
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
    cpu = host_cpu()
    flags = cpu.fields.get("flags")
    return cpu.fields.get("model name"), (set(flags.split()) if flags is not None else None)


def host_isa_level() -> str:
    """This host's instruction-set level (the highest x86-64 level whose flags /proc/cpuinfo lists, or the
    machine's own name elsewhere): part of the runtime key of an exact result."""
    return isa_level(_cpuinfo()[1], host_cpu().machine)


def hardware() -> str:
    """This host's runtime fingerprint, e.g. ``AMD EPYC (Linux x86_64, x86-64-v3)``; deterministic."""
    cpu = host_cpu()
    model, flags = _cpuinfo()
    level = isa_level(flags, cpu.machine)
    return f"{model or cpu.processor or cpu.machine} ({platform.system()} {cpu.machine}, {level})"


# --- Which CPU this host is ---------------------------------------------------------------------------------------
# Every question above and below about the host's CPU (its machine, /proc/cpuinfo's fields, its caches) is asked
# of ``host_cpu``, so that a test can make the host any class of CPU the repository holds baselines for, or one it
# holds none for, by setting one variable: which calibration record, golden and power record a case stands on is
# chosen by the class, while the numbers computed are this CPU's own (a kernel's code is picked by the real CPU).
HOST_CLASS_ENV = "PARITY_KIT_HOST_CLASS"  # for tests: "x86-64-v3:amd", "x86-64-v4:intel:amx", "aarch64" ...
# The vendors a forced class may name, as /proc/cpuinfo names them and a model name the kit's records carry.
CLASS_VENDORS = {"amd": ("AuthenticAMD", "AMD EPYC"), "intel": ("GenuineIntel", "Intel(R) Xeon(R) Processor")}
# Features a forced class may add by one word: AMX is what oneDNN's widest kernels need (``onednn_isa``).
CLASS_FEATURES = {"amx": frozenset({"amx_tile", "amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni"})}


@dataclass(frozen=True)
class HostCpu:
    """The host's CPU as the kit reads it: the machine's name, the first CPU's fields of /proc/cpuinfo, the
    processor name the platform gives where /proc/cpuinfo names no model, and its caches (``_cache_sizes``)."""

    machine: str
    fields: dict[str, str] = field(default_factory=dict)
    processor: str = ""
    caches: tuple[str, ...] = ()


def host_cpu() -> HostCpu:
    """This host's CPU; for tests, the class ``$PARITY_KIT_HOST_CLASS`` names in its place (``forced_cpu``). The
    one place the kit asks which CPU it runs on."""
    forced = os.environ.get(HOST_CLASS_ENV, "").strip()
    if forced:
        return forced_cpu(forced)
    return HostCpu(platform.machine(), _cpuinfo_map(), platform.processor(), tuple(_cache_sizes()))


def forced_cpu(value: str) -> HostCpu:
    """The CPU of a class named ``LEVEL[:VENDOR[:FEATURE...]]``: an x86-64 level (``x86-64-v3``) with every flag up
    to it, a vendor (``amd``, ``intel``) and features (``amx``, or a flag as /proc/cpuinfo spells it); or another
    machine's name alone (``aarch64``), which has no x86-64 level. BadInput names the variable for anything else."""
    from kit.core.errors import BadInput

    level, *rest = [w.strip().lower() for w in value.split(":")]
    levels = [name for name, _ in X86_LEVELS]
    if level not in levels:
        if rest or not re.fullmatch(r"[a-z][a-z0-9_]*", level) or level in X86_MACHINES:
            raise BadInput(f"${HOST_CLASS_ENV}={value!r}: expected an x86-64 level ({', '.join(levels)}) with a vendor "
                           f"({', '.join(CLASS_VENDORS)}) and features, or another machine's name (aarch64)")
        return HostCpu(level, {}, level)
    if not rest or rest[0] not in CLASS_VENDORS:
        raise BadInput(f"${HOST_CLASS_ENV}={value!r}: name the vendor after the level ({', '.join(CLASS_VENDORS)})")
    vendor, model = CLASS_VENDORS[rest[0]]
    flags = set().union(*(more for _, more in X86_LEVELS[:levels.index(level) + 1]))
    for feature in rest[1:]:
        flags |= CLASS_FEATURES.get(feature, {feature})
    return HostCpu("x86_64", {"vendor_id": vendor, "model name": model, "flags": " ".join(sorted(flags))}, model)


# --- What decides the bits of an exact result ------------------------------------------------------------------
# An exact golden holds where the same kernels run. Which kernels run is decided by each numeric library's own
# dispatch, not by the x86-64 level: torch's ATen picks its vectorized kernels by its CPU capability, oneDNN and
# MKL pick theirs by the instruction sets they find (and MKL by the vendor too), and XLA:CPU compiles for the
# host's CPU model and every feature it reports. So an exact golden records the key of the runtime it was made
# on, computed per numeric stack, and a case uses the golden whose key equals its own (docs/exact-baselines.md).

# ATen's CPU capabilities, lowest first; ATEN_CPU_CAPABILITY may lower the one the CPU offers, never raise it.
ATEN_CAPABILITIES = ("default", "avx2", "avx512")
# What pins torch's float32 kernels to AVX2 on any x86-64 host with AVX2: ATen's vectorized kernels, oneDNN's
# primitives and MKL's BLAS (conditional numerical reproducibility: the same results on every CPU of that
# branch, Intel or AMD). Measured: under these, an AVX-512 host reproduces bit for bit the exact golden an
# AVX2 host made without them.
TORCH_AVX2_PIN = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}


def aten_capability(flags: set[str] | frozenset[str] | None, environ=None) -> str:
    """The capability torch's ATen dispatch uses on a CPU with ``flags`` (its own rule: AVX-512 needs the
    VL, BW and DQ extensions and FMA; AVX2 needs FMA too), lowered by ``ATEN_CPU_CAPABILITY``."""
    flags = flags or set()
    if {"avx512vl", "avx512bw", "avx512dq", "fma"} <= flags:
        natural = "avx512"
    elif {"avx2", "fma"} <= flags:
        natural = "avx2"
    else:
        natural = "default"
    asked = str((environ or {}).get("ATEN_CPU_CAPABILITY", "")).lower()
    if asked in ATEN_CAPABILITIES and ATEN_CAPABILITIES.index(asked) < ATEN_CAPABILITIES.index(natural):
        return asked
    return natural


def onednn_isa(flags: set[str] | frozenset[str] | None, environ=None) -> str:
    """The highest instruction set oneDNN dispatches to on ``flags`` (its names), or its pinned maximum."""
    pinned = str((environ or {}).get("ONEDNN_MAX_CPU_ISA", "")).lower()
    if pinned:
        return pinned
    flags = flags or set()
    for isa, needs in (("avx512_core_amx", {"amx_tile", "avx512_bf16"}), ("avx512_core_bf16", {"avx512_bf16"}),
                       ("avx512_core_vnni", {"avx512_vnni"}), ("avx512_core", {"avx512bw", "avx512vl", "avx512dq"}),
                       ("avx2_vnni", {"avx_vnni", "avx2"}), ("avx2", {"avx2"}), ("sse41", {"sse4_1"})):
        if needs <= flags and ("avx512" not in isa or "avx512f" in flags):
            return isa
    return "default"


def _vendor() -> str:
    return host_cpu().fields.get("vendor_id", "unknown")


def cpu_identity() -> str:
    """What a float32 kernel's rounding can follow besides its instruction set: the CPU's vendor, model name,
    family, model and stepping, a digest of every feature it reports, and its cache sizes (kernels block their
    matmuls by them). Measured: pinning torch's, oneDNN's and MKL's kernels to AVX2 gave other float32 bits on an
    Intel Xeon than on an AMD EPYC (docs/exact-baselines.md), so a float32 result is known to hold only here."""
    import hashlib

    cpu = host_cpu()
    fields = cpu.fields
    flags = " ".join(sorted(fields.get("flags", "").split()))
    features = hashlib.sha256(flags.encode()).hexdigest()[:12]
    caches = ",".join(cpu.caches) or "unknown"
    return (f"cpu={fields.get('vendor_id', 'unknown')} {fields.get('model name', 'unknown')} "
            f"family={fields.get('cpu family', '?')} model={fields.get('model', '?')} "
            f"stepping={fields.get('stepping', '?')} features={features} caches={caches}")


def _cpuinfo_map() -> dict[str, str]:
    """The first CPU's fields of /proc/cpuinfo, by name (empty where it cannot be read); ask ``host_cpu``."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor's block ends
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out


def _cache_sizes() -> list[str]:
    """The first CPU's caches as ``L1d:48K`` ... from sysfs (empty where it has none)."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    out = []
    for index in sorted(base.glob("index*")):
        try:
            level, kind, size = ((index / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        out.append(f"L{level}{kind[0].lower() if kind != 'Unified' else ''}:{size}")
    return out


def torch_cpu_runtime(environ=None, flags: set[str] | frozenset[str] | None = None,
                      machine: str | None = None, threads: int = 1) -> str:
    """The key of the kernels torch runs float32 with on this CPU under ``environ`` (the case kernel's
    environment) and ``threads``: ``torch-cpu x86_64 aten=avx2 onednn=avx2 mkl=AVX2 threads=1 cpu=...``. Each
    part picks code that rounds differently; the CPU's identity is there because no pin was found to carry float32
    bits from one CPU vendor or model to another (``cpu_identity``). A float64 case needs no key of this kind
    (kit.core.host.portable)."""
    import os

    environ = os.environ if environ is None else environ
    machine = (machine or host_cpu().machine).lower()
    model, found = _cpuinfo()
    flags = found if flags is None else flags
    mkl = str(environ.get("MKL_CBWR", "")).split(",")[0].upper() or f"{_vendor()} {model or 'unknown'}"
    return (f"torch-cpu {machine} aten={aten_capability(flags, environ)} onednn={onednn_isa(flags, environ)} "
            f"mkl={mkl} threads={threads} {cpu_identity()}")


def xla_cpu_runtime() -> str:
    """The key of XLA:CPU's code on this host. XLA compiles for the host's CPU model and every feature it
    reports, and offers no flag to lower them (XLA_FLAGS has no maximum ISA), so the key is the CPU model
    with a digest of its full feature list: two hosts of one x86-64 level but other features differ."""
    import hashlib

    cpu = host_cpu()
    model, flags = _cpuinfo()
    digest = hashlib.sha256(" ".join(sorted(flags or ())).encode()).hexdigest()[:12]
    return f"xla-cpu {cpu.machine.lower()} {model or cpu.processor or 'unknown'} features={digest}"


def host_runtime_of(options: dict | None = None) -> str:
    """The key for a backend that names no finer one: its device (a GPU's model and driver), or on a CPU
    the host's CPU model and the digest of its features, the most a backend's kernels can depend on."""
    device = str((options or {}).get("device", "cpu"))
    if device.startswith("cuda"):
        gpu = accelerator(device)
        return f"cuda {gpu['name']} driver {gpu['driver'] or 'unknown'}"
    return xla_cpu_runtime().replace("xla-cpu", "host", 1)


def xla_runtime_of(options: dict | None = None) -> str:
    """The key of a JAX backend's results: XLA's code for the host's CPU, or the GPU it runs on."""
    device = str((options or {}).get("device", "cpu"))
    return host_runtime_of(options) if device.startswith("cuda") else xla_cpu_runtime()


def runtime_slug(runtime: str) -> str:
    """A short file-name tag for a runtime key: the portable one by name, others by digest."""
    import hashlib

    from kit.core.host.portable import PORTABLE_RUNTIME

    if runtime == PORTABLE_RUNTIME:
        return "portable"
    return "rt-" + hashlib.sha256(runtime.encode()).hexdigest()[:10]


# What moves numerics besides the code: the libraries that compute, and the environment variables that
# pick their kernels, threads and precision.
NUMERIC_PACKAGES = ("torch", "transformers", "jax", "jaxlib", "vllm", "numpy", "levanter", "haliax", "equinox",
                    "safetensors", "intel-openmp", "mkl")
NUMERIC_ENV_PREFIXES = ("OMP_", "MKL_", "OPENBLAS_", "KMP_", "ONEDNN_", "DNNL_", "XLA_", "JAX_", "TF_CPP_", "CUDA_",
                        "CUBLAS_", "CUDNN_", "NVIDIA_TF32", "NCCL_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "VLLM_")
# Where a tool keeps its files changes no number, and a path names the machine: such variables stay out.
LOCATION_SUFFIXES = ("_DIR", "_FILE", "_PATH", "_HOME", "_ROOT")
# Whom a process talks to, and what it is called while it runs, change no number and are drawn afresh per launch
# or per host: an identifier (vLLM's CPU worker sets VLLM_DIST_IDENT to its process group's file or port at every
# engine start), a port, a host's name or address. Such variables stay out.
ENDPOINT_SUFFIXES = ("_IDENT", "_ID", "_UUID", "_PORT", "_HOST", "_IP", "_ADDR", "_ADDRESS")
# Switches of how Intel's OpenMP runtime loads (a second copy tolerated, re-initialised after a fork), which a
# container image may set: they pick no kernel, thread count or precision, and two GPU nodes' records of one
# measurement differed by them alone.
LOADER_ONLY_ENV = frozenset({"KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK"})
# A name drawn by the process that set it, as a *_NAME variable may hold one (vLLM's multimodal cache names its
# shared memory "vllm_mm_" and a UUID in URL-safe base64): a token of 16 or more characters mixing digits, lower
# and upper case, where a setting's words keep to one case. Such a variable names a resource, never a kernel.
_NAME_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,}")
# Inside any value, what one launch drew for itself is replaced by its kind, so that the rest of the value (the
# other flags of an XLA_FLAGS that also names a dump folder) still counts: a UUID (dashed or not) or a long hex
# digest, and a path under a temporary folder (tempfile's, which TMPDIR moves, and the usual ones), alone, in a
# list, as a flag's value or in a file:// address (vLLM's process group file is file:///tmp/vllm_dist_<uuid>).
_DRAWN = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}|[0-9a-f]{16,}", re.IGNORECASE)
TEMP_ROOTS = ("/tmp", "/var/tmp", "/dev/shm")
_PATH_END = r"""(?=$|[\s,;:|'"])"""


def _drawn_name(value: str) -> bool:
    return any(sum((any(c.isdigit() for c in token), any(c.islower() for c in token),
                    any(c.isupper() for c in token))) >= 2 for token in _NAME_TOKEN.findall(value))


def launch_specific(name: str, value: str) -> bool:
    """Whether a variable as a whole holds what one launch or one host drew for itself rather than what
    computes: an identifier, a port or an address by its name's suffix, or a *_NAME holding a drawn name."""
    return name.endswith(ENDPOINT_SUFFIXES) or (name.endswith("_NAME") and _drawn_name(value))


def scrubbed(value: str, temp_roots: tuple[str, ...] | None = None) -> str:
    """``value`` with every temporary path and every drawn identifier in it replaced by what it is."""
    import tempfile

    roots = temp_roots or tuple(sorted({tempfile.gettempdir().rstrip("/"), *TEMP_ROOTS} - {""}, key=len,
                                       reverse=True))
    under = "|".join(re.escape(r) for r in roots)
    value = re.sub(r"""(^|[\s,;:=|'"]|file://)(?:""" + under + r""")(?:/[^\s,;:|'"]*)?""" + _PATH_END,
                   r"\1<temporary path>", value)
    return _DRAWN.sub("<identifier>", value)


def numeric_env(environ) -> dict[str, str]:
    """The environment variables that can change a backend's numbers, without the ones that only say where
    or how a library loads or what one launch drew for itself (``launch_specific``), each value ``scrubbed``."""
    return {k: scrubbed(str(v)) for k, v in sorted(environ.items())
            if k.startswith(NUMERIC_ENV_PREFIXES) and not k.endswith(LOCATION_SUFFIXES) and k not in LOADER_ONLY_ENV
            and not launch_specific(k, str(v))}


def numeric_fingerprint(fingerprint: Any) -> Any:
    """A stored fingerprint as this kit would take it today: every ``env`` in it narrowed by ``numeric_env``, so
    a record written before a variable was known to change nothing compares equal to one written after."""
    if not isinstance(fingerprint, dict):
        return fingerprint
    return {k: numeric_env(v) if k == "env" and isinstance(v, dict) else numeric_fingerprint(v)
            for k, v in fingerprint.items()}


def accelerator(device: str = "cpu") -> dict[str, str]:
    """The device a case computes on: "cpu (x86-64-v3)" with its instruction-set level, or the GPU's name and
    driver (from nvidia-smi, which every CUDA node has; no torch or jax import needed)."""
    if not device.startswith("cuda"):
        # The instruction-set level picks the CPU's kernels, and with them the rounding (see hardware()).
        return {"name": f"cpu ({host_isa_level()})", "driver": ""}
    import os
    import shutil
    import subprocess

    from kit.core.records.contract import FAKE_GPUS_ENV

    if FAKE_GPUS_ENV in os.environ:  # the stand-in list of the tests (kit.run.devices): its first GPU's name
        row = (os.environ[FAKE_GPUS_ENV].replace(";", "\n").strip().splitlines() or [""])[0]
        parts = [p.strip() for p in row.split(",")]
        name = ", ".join(parts[2:-2]) if len(parts) >= 5 else ""
        return {"name": name or "cuda (unknown GPU)", "driver": "fake"}

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


def numerics_fingerprint(device: str = "cpu", environ=None) -> dict:
    """The runtime a measurement of noise holds for: hardware, accelerator, numeric packages, and the numeric
    part of ``environ`` (this process's environment unless given). Take it before an engine starts in the
    process: an engine sets variables of its own there (kit.case.calibrate says which)."""
    import os
    from importlib import metadata

    packages = {}
    for name in NUMERIC_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    env = numeric_env(os.environ if environ is None else environ)
    return {"hardware": hardware(), "accelerator": accelerator(device), "python": platform.python_version(),
            "packages": packages, "env": env}
