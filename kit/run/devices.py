"""The node's GPUs and which running case holds each, for the local executor.

A case that asks for ``resources.num_gpus`` gets that many whole GPUs of its own, handed to its
kernel as CUDA_VISIBLE_DEVICES; it waits while they are held by other cases, so two cases never
share a GPU and never see each other's memory use as their own. Without this, every case saw every
GPU and allocated on the first one, and a GPU descriptor had to be run one case at a time.

The GPUs are listed once, before the run starts, with nvidia-smi (or ``$PARITY_KIT_FAKE_GPUS``, a
stand-in list for tests). A GPU whose memory another process already fills is never handed out: a
case that could only run on it ends at once as an error that names it, instead of waiting for
memory that will not come or dying of out-of-memory mid-case.
"""

from __future__ import annotations

import math
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from kit.core.records.contract import CUDA_VISIBLE_DEVICES_ENV, FAKE_GPUS_ENV
from kit.core.errors import BadInput, ParityKitError

QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total", "--format=csv,noheader"]
QUERY_TIMEOUT_S = 30
# Memory in use at or above this share of the total: another process fills the GPU. An idle GPU
# shows a few hundred MiB at most; a process that holds most of it leaves a case nothing to load into.
BUSY_FRACTION = 0.9


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's index (PCI bus order)
    uuid: str
    name: str
    memory_used_mib: float | None = None  # None: the driver does not say (e.g. a MIG parent)
    memory_total_mib: float | None = None

    @property
    def busy(self) -> bool:
        """Another process already fills its memory (listed before this run's cases start)."""
        used, total = self.memory_used_mib, self.memory_total_mib
        return used is not None and bool(total) and used >= BUSY_FRACTION * total

    @property
    def label(self) -> str:
        """The GPU as a line names it: its index and model."""
        return f"GPU {self.index} ({self.name})"

    def record(self) -> dict:
        """What a case result keeps of the GPU it ran on."""
        return {"index": self.index, "uuid": self.uuid, "name": self.name}

    def to_dict(self) -> dict:
        """The GPU as a run's record keeps it, with its memory and whether it was busy."""
        return {**self.record(), "memory_used_mib": self.memory_used_mib,
                "memory_total_mib": self.memory_total_mib, "busy": self.busy}


@dataclass(frozen=True)
class Inventory:
    """The GPUs this node offers the run's cases, and where that list came from."""

    gpus: tuple[Gpu, ...]
    source: str  # "nvidia-smi", or the stand-in variable's name
    problem: str | None = None  # why no GPU could be listed (nvidia-smi missing or failing)

    @property
    def usable(self) -> list[Gpu]:
        """The GPUs not busy with another process: those a case may be given."""
        return [g for g in self.gpus if not g.busy]

    def describe(self) -> str:
        """``2: GPU 0 (NVIDIA H200), GPU 1 (NVIDIA H200)``, or ``none (nvidia-smi: ...)``."""
        if not self.gpus:
            return f"none ({self.problem or self.source + ' lists no GPU'})"
        return f"{len(self.gpus)}: {', '.join(g.label for g in self.gpus)}"

    def to_dict(self) -> dict:
        """The inventory as a run's record keeps it: where it came from, any problem reading it, every GPU."""
        return {"source": self.source, "problem": self.problem, "gpus": [g.to_dict() for g in self.gpus]}


def parse_rows(text: str, source: str) -> list[Gpu]:
    """nvidia-smi's CSV rows (``index, uuid, name, memory.used, memory.total``, with or without the
    ``MiB`` unit); a row that is not one refuses the whole list, naming ``source``."""
    gpus: list[Gpu] = []
    for row in filter(None, (r.strip() for r in text.replace(";", "\n").splitlines())):
        gpu = _parse_row(row, source)
        _check_row(gpu, gpus, row, source)
        gpus.append(gpu)
    return gpus


def _parse_row(row: str, source: str) -> Gpu:
    parts = [p.strip() for p in row.split(",")]
    try:
        if len(parts) < 5:
            raise ValueError
        # A GPU's name may hold a comma; index and uuid lead, the two memory columns end the row.
        return Gpu(int(parts[0]), parts[1], ", ".join(parts[2:-2]), _mib(parts[-2]), _mib(parts[-1]))
    except ValueError:
        raise BadInput(f"{source}: cannot read GPU row {row!r}; expected 'index, uuid, name, "
                       "memory.used, memory.total' as nvidia-smi --format=csv,noheader writes it") from None


def _check_row(gpu: Gpu, before: Sequence[Gpu], row: str, source: str) -> None:
    """A row that parsed must still describe one GPU of its own: two rows of one index (or uuid) would hand
    one GPU to two cases at once, as CUDA_VISIBLE_DEVICES names it by either, and a memory figure that is
    negative or not finite would make the busy test (used >= 90 % of total) say what it likes."""
    memory = [m for m in (gpu.memory_used_mib, gpu.memory_total_mib) if m is not None]
    problem = next((why for bad, why in (
        (gpu.index < 0, f"index {gpu.index} is negative"),
        (not gpu.uuid, "its uuid is empty"),
        (any(g.index == gpu.index for g in before), f"index {gpu.index} is listed twice"),
        (any(g.uuid == gpu.uuid for g in before), f"uuid {gpu.uuid} is listed twice"),
        (any(not (math.isfinite(m) and m >= 0) for m in memory), "a memory figure is negative or not finite"),
    ) if bad), None)
    if problem:
        raise BadInput(f"{source}: GPU row {row!r}: {problem}; each row is one GPU, as nvidia-smi lists it")


def _mib(text: str) -> float | None:
    value = text.removesuffix("MiB").strip()
    if value.startswith("[") or value in ("", "N/A"):  # [N/A], [Not Supported]
        return None
    return float(value)


def discover(environ: Mapping[str, str] | None = None,
             run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Inventory:
    """The GPUs of this node: ``$PARITY_KIT_FAKE_GPUS`` when set, else nvidia-smi's list; limited to
    those an inherited CUDA_VISIBLE_DEVICES names, so a gate started on part of a shared node stays there."""
    environ = os.environ if environ is None else environ
    if FAKE_GPUS_ENV in environ:
        source = f"${FAKE_GPUS_ENV}"
        gpus, problem = parse_rows(environ[FAKE_GPUS_ENV], source), None
    else:
        source = "nvidia-smi"
        gpus, problem = _query(run)
    visible = environ.get(CUDA_VISIBLE_DEVICES_ENV)
    if visible is not None and gpus:
        gpus = [g for g in gpus if _named(g, visible)]
        source += f" limited by {CUDA_VISIBLE_DEVICES_ENV}={visible}"
    return Inventory(tuple(gpus), source, problem)


def _query(run: Callable[..., subprocess.CompletedProcess]) -> tuple[list[Gpu], str | None]:
    try:
        done = run(QUERY, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except FileNotFoundError:
        return [], "nvidia-smi: not found"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi: {exc}"
    if done.returncode != 0:  # e.g. a driver that is not loaded: no GPU this run can use
        said = (done.stderr or done.stdout or "").strip().splitlines()
        return [], f"nvidia-smi: exit {done.returncode}" + (f": {said[0]}" if said else "")
    return parse_rows(done.stdout, "nvidia-smi"), None


def _named(gpu: Gpu, visible: str) -> bool:
    """Whether CUDA_VISIBLE_DEVICES (nvidia-smi indices or UUIDs, or UUID prefixes as CUDA allows) names it."""
    for entry in filter(None, (e.strip() for e in visible.split(","))):
        if entry == str(gpu.index) or (entry.startswith(("GPU-", "MIG-")) and gpu.uuid.startswith(entry)):
            return True
    return False


# ---------------------------------------------------------------- what a case asks for

def whole_gpus(num_gpus: float, case: str, where: str) -> int:
    """A case's ``num_gpus`` as a count of whole GPUs. A fraction is refused rather than rounded: rounding
    up would hide that the case meant to share a GPU, rounding down would run it on none."""
    if num_gpus != int(num_gpus):
        raise BadInput(f"{where}: case {case} asks for num_gpus = {num_gpus:g}; the local executor gives each "
                       f"case whole GPUs (ask for {math.ceil(num_gpus)}, or share a GPU by fraction with "
                       "`--executor ray`)")
    return int(num_gpus)


def check_fits(case: str, wanted: int, inventory: Inventory, where: str) -> None:
    """Refuse, before anything runs, a case that asks for more GPUs than the node has at all."""
    if wanted > len(inventory.gpus):
        raise BadInput(f"{where}: case {case} asks for {wanted:g} GPU(s) (num_gpus); this node has "
                       f"{inventory.describe()}")


def gpu_env(gpus: Sequence[Gpu]) -> dict[str, str]:
    """The environment that shows a case's kernel its GPUs and no others. CUDA counts GPUs fastest
    first unless told to count them in PCI order as nvidia-smi does; JAX's own device filter indexes
    into what CUDA shows, so an inherited one is reset to all of them."""
    return {CUDA_VISIBLE_DEVICES_ENV: ",".join(str(g.index) for g in gpus),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "JAX_CUDA_VISIBLE_DEVICES": "all"}


# ---------------------------------------------------------------- who holds what

class Unavailable(ParityKitError):
    """The case cannot start: its GPUs will not come (others fill them) or it waited past its max_wait_s."""


class WaitStopped(ParityKitError):
    """The run was stopped while the case waited: it never started."""


@dataclass
class Slots:
    """At most ``limit`` cases at once (None: no limit of its own); shared by the cases it counts."""

    limit: int | None
    used: int = 0

    def room(self) -> bool:
        """Whether another case may start within this share's limit of cases at once."""
        return self.limit is None or self.used < self.limit


@dataclass(eq=False)
class Request:
    case: str
    gpus: int
    slots: Slots
    order: int = 0
    granted: list[Gpu] = field(default_factory=list)


class DevicePool:
    """Hands out whole GPUs and slots; one pool serves every run of the process (a control run's two
    gates share the node's GPUs). Requests are served in the order they were made, among those that
    fit: a case waits only while what it needs is held, and the cases of a run start in their order."""

    def __init__(self, inventory: Inventory | None = None, poll_s: float = 0.2) -> None:
        self.inventory = inventory or Inventory((), "none asked for")
        self._free = sorted(self.inventory.usable, key=lambda g: g.index)
        self._waiting: list[Request] = []
        self._cond = threading.Condition()
        self._count = 0
        self._poll_s = poll_s  # how often a waiting case checks whether the run was stopped

    def request(self, case: str, gpus: int, slots: Slots) -> Request:
        """Queue a case; call in the order the cases should start, before any of them waits."""
        with self._cond:
            self._count += 1
            req = Request(case, gpus, slots, self._count)
            self._waiting.append(req)
            return req

    def wait(self, req: Request, stopped: Callable[[], bool] = lambda: False,
             max_wait_s: float | None = None) -> list[Gpu]:
        """Block until the request holds its GPUs and a slot; raises Unavailable or WaitStopped instead."""
        t0 = time.monotonic()
        with self._cond:
            try:
                if req.gpus > len(self.inventory.usable):
                    raise Unavailable(self._why_not(req))
                while True:
                    if stopped():
                        raise WaitStopped(req.case)
                    if self._first_fitting() is req:
                        self._grant(req)
                        return req.granted
                    waited = time.monotonic() - t0
                    if max_wait_s is not None and waited >= max_wait_s:
                        held = "a slot" if req.gpus == 0 else f"{req.gpus} free GPU(s)"
                        raise Unavailable(f"waited {max_wait_s:g} s (max_wait_s) for {held} and never started")
                    left = self._poll_s if max_wait_s is None else min(self._poll_s, max_wait_s - waited)
                    self._cond.wait(timeout=max(left, 0.0))
            finally:
                if req in self._waiting:
                    self._waiting.remove(req)
                    self._cond.notify_all()  # a request that gave up may have held up those behind it

    def release(self, req: Request) -> None:
        """Give a finished case's GPUs and its slot back to the pool, and wake the cases waiting for them."""
        with self._cond:
            self._free = sorted([*self._free, *req.granted], key=lambda g: g.index)
            req.granted = []
            req.slots.used -= 1
            self._cond.notify_all()

    def _first_fitting(self) -> Request | None:
        for req in self._waiting:
            if req.slots.room() and len(self._free) >= req.gpus:
                return req
        return None

    def _grant(self, req: Request) -> None:
        req.granted, self._free = self._free[:req.gpus], self._free[req.gpus:]
        req.slots.used += 1
        self._waiting.remove(req)
        self._cond.notify_all()  # the next in line may fit too

    def _why_not(self, req: Request) -> str:
        usable, busy = self.inventory.usable, [g for g in self.inventory.gpus if g.busy]
        filled = "; ".join(f"{g.label} has {g.memory_used_mib:g} of {g.memory_total_mib:g} MiB in use by "
                           "another process" for g in busy)
        return (f"needs {req.gpus} GPU(s) but only {len(usable)} of this node's {len(self.inventory.gpus)} "
                f"are free: {filled}")
