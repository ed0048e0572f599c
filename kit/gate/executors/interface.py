"""The executors a gate can run its cases with, behind one interface and found by name, and the run they run.

A gate run names its executor once (``--executor``, written in its manifest and its history); everything
that differs between executors is a method of its class here, never a test of that name elsewhere: what it
refuses before anything runs (``check``) and how it runs the pending cases of a run (``run_cases``). What a
case is (one papermill execution, ``kit.gate.executor.execute_case``), how its failure is classed and
whether it runs again (``kit.gate.retry``) are the same whichever executor ran it.

The registry is papermill's engines registry in small: a name maps to a class, ``executors.get(name)``
gives one, and an unknown name is one line naming the known ones. A built-in executor is registered by
the dotted path of its class and imported only when asked for, so that naming the executors (the CLI's
choices) imports neither executor's module, and Ray, optional, only when its executor runs.

A gate run (``GateRun``, frozen) holds the executor that runs it, and what an executor is handed and fills in
is the run's progress (``RunProgress``): the three are defined here together, so that neither module of an
executor is needed to name any of them.
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, ClassVar, Mapping

from kit.core.errors import BadInput
from kit.core.records.results import Verdict, gate_verdict, status_counts

if TYPE_CHECKING:
    from kit.core.records.records import CaseResult
    from kit.core.records.spec import CaseSpec
    from kit.core.verdict.coverage import Expected
    from kit.descriptor.plan import Plan
    from kit.gate.preflight import Inputs
    from kit.run.devices import DevicePool, Inventory
    from kit.run.runlock import RunLock

DEFAULT = "local"  # the executor a run gets when it names none


@dataclass(frozen=True)
class Share:
    """What the runs of one session hold in common, for an executor that shares this machine between them:
    the cases at once (``--jobs``; None: no limit given), the cores, and the node's GPUs. An executor that
    places cases elsewhere (Ray, by each case's resources) ignores it."""
    jobs: int | None = None
    cores: int | None = None
    pool: DevicePool | None = None


class Executor(abc.ABC):
    """How a gate runs its cases. A subclass sets ``name`` (the string runs record) and is registered under it."""

    name: ClassVar[str]

    @abc.abstractmethod
    def check(self, plan: Plan) -> Inventory | None:
        """Refuse (BadInput, one line) what this executor can never give the plan's cases, before anything is
        written; return the node's GPUs where this executor hands them to cases itself, else None."""

    @abc.abstractmethod
    def run_cases(self, progress: RunProgress, on_start: Callable[[str], None] | None = None,
                  on_done: Callable[[str, CaseResult], None] | None = None, share: Share | None = None) -> None:
        """Run every pending case of a run (``progress.pending``), each to its file in the run directory and then
        its result in ``progress.results``; ``on_start`` and ``on_done`` are called once per case, a start before
        its end, with the case's name (all that a report of progress reads of it: the spec stays the executor's).
        An interruption (KeyboardInterrupt) stops the running cases, records each, and propagates.
        ``share``: what this run shares with the session's other runs (None: nothing)."""


class UnknownExecutor(BadInput):
    """A name no executor is registered under."""


class Executors:
    """Name -> executor class; a class may be given by its dotted path (``module:Class``), imported on first use."""

    def __init__(self) -> None:
        self._known: dict[str, type[Executor] | str] = {}

    def register(self, name: str, executor: type[Executor] | str) -> None:
        """Register ``executor`` under ``name``; a name is taken once (a second executor under it would make
        what a run's record says ran ambiguous)."""
        if name in self._known:
            raise ValueError(f"an executor is already registered as {name!r}")
        self._known[name] = executor

    def names(self) -> list[str]:
        """The registered executors' names: the CLI's choices for --executor, known without importing any executor."""
        return list(self._known)

    def get(self, name: str) -> Executor:
        """An instance of the executor registered as ``name``; UnknownExecutor naming the known ones otherwise."""
        if name not in self._known:
            raise UnknownExecutor(f"unknown executor {name!r} (registered: {', '.join(self._known) or 'none'})")
        found = self._known[name]
        if isinstance(found, str):
            found = self._known[name] = _imported(name, found)
        return found()


def _imported(name: str, target: str) -> type[Executor]:
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Executor) and cls.name == name):
        raise TypeError(f"{target} is not an Executor named {name!r}")
    return cls


executors = Executors()
executors.register("local", "kit.gate.executor:LocalExecutor")
executors.register("ray", "kit.gate.executors.ray_executor:RayExecutor")


@dataclass(frozen=True, eq=False)
class GateRun:
    """One gate run: its plan, cases and checked inputs, the executor that runs it, and what running gave (each
    case's result, the times, what a resume reused or kept, the retries). Frozen: a run is built once when its
    directory is claimed (``kit.gate.executor.claim_run``), once more when it starts, and once more when it
    finishes (``RunProgress.finished``), each a new record made with ``dataclasses.replace``.

    What changes while the cases run lives apart, in the run's ``RunProgress``: an accumulator, not a stream of
    replaced runs, because an interruption (Ctrl-C, SIGTERM) must still find every result recorded so far, and
    an exception unwinding through an executor returns nothing. The session holds the accumulator, the
    executor writes each case's result into it as the case ends (its file is already written by then), and
    the finish, interrupted or not, freezes it into the run it records. Equality is identity: two runs are the
    same run only if they are the same record."""

    run_dir: Path
    plan: Plan  # the descriptor resolved for this run: the executor reads nothing else of it
    specs: list[CaseSpec]
    inputs: Inputs
    release: str | None = None
    # Claimed: the results known before any case runs (reused, kept, no baseline); finished: every case's.
    results: Mapping[str, CaseResult] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    duration_s: float = 0.0
    executor: Executor = field(default_factory=lambda: executors.get(DEFAULT))  # resolved once, by the preflight
    lock: RunLock | None = None
    reused: dict[str, CaseResult] = field(default_factory=dict)  # finished results taken from an earlier run
    rerun: dict[str, str] = field(default_factory=dict)  # case -> why it ran again (resumed runs only)
    # Resumed with --case: the other cases, neither run nor reused; case -> why (their earlier error
    # result is kept, or they count as missing).
    kept: dict[str, str] = field(default_factory=dict)
    expected: dict[str, Expected] = field(default_factory=dict)  # what each case's verdict must cover
    custom_notebooks: dict[str, dict] = field(default_factory=dict)  # case -> {path, sha256} of code not the kit's
    fingerprints: dict[str, str | None] = field(default_factory=dict)  # kernel -> release fingerprint
    history: list[dict] = field(default_factory=list)  # the earlier runs into this directory
    placements: dict[str, dict] = field(default_factory=dict)  # case -> where the Ray executor placed it
    gpus: Inventory | None = None  # the node's GPUs, listed when a case asks for some (local executor)
    # Which baseline each case stands on here (kit.descriptor.standing), worked out once, when the run starts.
    baselines: list[dict] | None = None
    # The hardware each case was resolved for (kit.descriptor.host), asked once, when the run starts.
    hardware: dict[str, dict] | None = None
    # How often a case classed infrastructure runs again (kit.gate.retry), and the cases that did: case -> the
    # evidence of the attempt that was retried.
    infrastructure_retries: int = 1
    retried: dict[str, str] = field(default_factory=dict)

    @property
    def pending(self) -> list[CaseSpec]:
        """The cases this run executes: all of them, less those a resume reused or kept and those with no
        baseline for this runtime (recorded as such when the run is prepared)."""
        return [s for s in self.specs if s.name not in self.reused and s.name not in self.kept and not s.no_baseline]

    @property
    def verdict(self) -> Verdict:
        """The run's verdict from the results so far, every selected case counted (a case without a result as
        missing)."""
        return gate_verdict([s.name for s in self.specs], self.results)

    @property
    def counts(self) -> dict[str, int]:
        """How many of the run's cases ended with each status so far."""
        return status_counts([s.name for s in self.specs], self.results)

    @property
    def cases_dir(self) -> Path:
        """The folder of the run's case files (results, notebooks, logs, evidence)."""
        return self.run_dir / "cases"


@dataclass(eq=False)
class RunProgress:
    """What running adds to one gate run, collected while its cases run: the one mutable part of a run (see
    ``GateRun`` for why it is apart). The executor records each case's result here as the case ends;
    kit.gate.retry classes them, sets retried ones aside and narrows the next round (``only``); the session adds
    the time. ``finished`` freezes it, whenever the run ends, into the run its records are written from."""

    run: GateRun  # the run as it started
    results: dict[str, CaseResult] = field(init=False)  # from the run's own (reused, kept, no baseline) on
    retried: dict[str, str] = field(default_factory=dict)  # case -> the evidence of the attempt retried
    placements: dict[str, dict] = field(default_factory=dict)  # case -> where the Ray executor placed it
    duration_s: float = 0.0
    finished_at: str = ""
    only: set[str] | None = None  # while a retry runs: the cases it runs again

    def __post_init__(self) -> None:
        self.results = dict(self.run.results)

    @property
    def pending(self) -> list[CaseSpec]:
        """The cases an executor runs now: the run's pending ones, narrowed to ``only`` while a retry runs."""
        return [s for s in self.run.pending if self.only is None or s.name in self.only]

    def finished(self) -> GateRun:
        """The run with what running gave it, frozen (its results a read-only mapping)."""
        return replace(self.run, results=MappingProxyType(dict(self.results)), retried=dict(self.retried),
                       placements=dict(self.placements), duration_s=self.duration_s, finished_at=self.finished_at)
