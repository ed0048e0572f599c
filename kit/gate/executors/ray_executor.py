"""The Ray executor: each gate case is one Ray task that runs the case's papermill execution.

The task calls the same ``execute_case`` as the local executor, so the notebook,
the kernel, the per-case timeout (the kernel's session killed, status
``timeout``, partial notebook kept) and the dead-kernel handling are one code
path. What Ray adds is placement and survival:

- a case asks for ``[cases.X.resources]`` (CPUs, GPUs, accelerator type, memory,
  custom resources); a case with ``nodes > 1`` is a gang: one placement group,
  one bundle per node, ``STRICT_SPREAD``, so every stage is placed at once or
  none is. ``SPREAD`` would be allowed to pack two bundles onto one node, which
  for a multi-node pipeline-parallel case tests another path (intra-node
  transport, half the memory per stage) than the one the case exists for. The
  notebook task sits in bundle 0; the kernel gets the group from
  ``kit.case.placement.case_placement_group()`` to start its stages there.
- a worker or node that dies under a case: Ray restarts the task, up to the
  case's ``retries``; after that the case is an ``error`` with its partial
  notebook, of kind ``worker-lost`` (kit.core.outcomes), decided from Ray's
  exception type. The lost worker's kernel session is stopped by the kernel's
  guard process (kit.backends.processes), on whichever node it ran.

Ray's restart is no second rule for running a case again beside kit.gate.retry's,
which decides for every executor: it is that rule applied at once, inside one
attempt of the gate, while the other cases still run (and a gang keeps its
placement group). Ray restarts a task only when its worker died
(``retry_exceptions=False``: a notebook that failed returned its result), which
kit.core.verdict.triage classes infrastructure, and a restart never runs again a case
whose lost attempt had written a failed verdict
(``kit.gate.executors.ray_task.verdict_before_restart``). Its attempts are kept in the
case's files (``<case>.attempts.jsonl``, ``<case>.attemptN.ipynb``, a note
``attempt N`` on the result); a case still lost after them is retried by
kit.gate.retry like any infrastructure failure, which moves those files to
``cases/retried/`` with the attempt it lists under ``attempts``.
- a task that outlives its timeout by a grace period (stuck outside the notebook,
  where the in-task timer cannot reach) is cancelled from here and recorded as ``timeout``.

Case files are written by the task straight into the run directory, so on a
cluster the run directory (and the kit, notebooks, fixtures and goldens) must be
at the same path on every node, as a shared filesystem gives.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from kit.backends.processes import stop_procs
from kit.case.placement import RAY_NAMESPACE
from kit.core import outcomes
from kit.core.records import paths, rundir
from kit.core.verdict.coverage import Expected
from kit.core.errors import ParityKitError, Unrunnable
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import kernel_result, now_iso
from kit.core.records.spec import CaseSpec
from kit.descriptor.plan import Plan
from kit.descriptor.schema import Resources
from kit.gate.executor import record
from kit.gate.executors.interface import GateRun, RunProgress
from kit.gate.executors.interface import Executor, Share
from kit.gate.executors.ray_task import attempts, case_task
from kit.run.notebook import describe_failure
from kit.run.output import MARKUP, NOTICE

log = logging.getLogger(__name__)

GANG_STRATEGY = "STRICT_SPREAD"
TEMP_DIR_ENV = "PARITY_KIT_RAY_TMPDIR"  # where a Ray started for the run keeps its sockets and logs
# Past its timeout, how long a task may take to return on its own (its in-task timer has killed the
# kernel by then) before the driver cancels it.
GRACE_ENV, GRACE_S = "PARITY_KIT_RAY_GRACE_S", 30.0
FORCE_AFTER_S = 15.0  # after a polite cancel, how long before the worker is killed
REAP_S = 30.0  # how long the Ray started for a run may take to die after SIGKILL
RAY_STARTS = 3  # tries to start a Ray for the run whose node does not come up in Ray's startup wait


# ---------------------------------------------------------------- the task, in a Ray worker

# case_task and the record of its attempts live in kit.gate.executors.ray_task, which a worker imports quickly
# (see there why).


# ---------------------------------------------------------------- Ray for the run

@contextlib.contextmanager
def ray_session(num_cpus: int | None = None) -> Iterator[str]:
    """Connect to ``$RAY_ADDRESS``, or start a Ray for this run and stop it afterwards."""
    import ray

    quiet = {"logging_level": logging.WARNING, "log_to_driver": False, "namespace": RAY_NAMESPACE}
    address = os.environ.get("RAY_ADDRESS")
    if address:
        try:
            ray.init(address=address, **quiet)
        except ConnectionError as exc:
            raise Unrunnable(f"the Ray cluster at RAY_ADDRESS={address} cannot be reached: {exc}") from None
        try:
            yield f"Ray cluster at {address}"
        finally:
            ray.shutdown()
        return
    given = os.environ.get(TEMP_DIR_ENV)
    # A fresh, short temp dir per run: socket paths must stay under 107 characters, and a
    # `ray_current_cluster` file left in a shared one by an earlier Ray confuses the next start.
    temp = Path(given) if given else Path(tempfile.mkdtemp(prefix="pkray-"))
    (temp / "ray").mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(temp)  # else Ray writes its cluster pointer into a machine-wide /tmp/ray
    try:
        try:
            _start_local(ray, temp, dict(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                                         _temp_dir=str(temp), **quiet))
            yield f"a Ray started for this run ({temp})"
        finally:
            # Also after a failed or interrupted ray.init, which may have started some processes.
            ray.shutdown()
            _reap(temp)
    finally:
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved
        if not given:
            shutil.rmtree(temp, ignore_errors=True)


def _start_local(ray, temp: Path, options: dict) -> None:
    """``ray.init`` of a Ray for this run, tried again when its node does not come up in time.

    Ray gives its raylet a fixed 30 s to register, which a loaded 2-core machine can miss; the start is then
    no fact about the engine, so it is tried again (what was started is reaped first) before the run is given
    up as unrunnable."""
    for attempt in range(1, RAY_STARTS + 1):
        try:
            ray.init(**options)
            return
        except Exception as exc:  # Ray raises a bare Exception for a node that did not come up in time
            if "timed out during startup" not in str(exc):
                raise
            ray.shutdown()
            _reap(temp)
            if attempt == RAY_STARTS:
                raise Unrunnable(f"a Ray for this run did not start, {attempt} times within Ray's own startup "
                                 f"wait: {exc} (is the machine overloaded?)") from None
            log.warning("a Ray for this run did not start in time (try %d of %d); starting it again", attempt,
                        RAY_STARTS)


def _reap(temp: Path, deadline_s: float = REAP_S) -> None:
    """Kill what is left of the Ray this run started and wait for it to be gone.

    ray.shutdown gives each process one second after SIGKILL and moves on; a loaded machine can take
    longer, and a ray.init that failed half-way leaves processes ray.shutdown does not know. Only
    this process's descendants that name the run's own temp dir are touched, with what they started
    (a worker's case kernel and its session among them)."""
    import psutil

    def ours() -> list[int]:
        found = []
        for p in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if str(temp) in " ".join(p.cmdline()):
                    found.append(p.pid)
        return found

    alive = stop_procs(ours(), grace_s=0, wait_s=deadline_s, warn=False)
    if alive:
        log.warning(f"parity-kit: warning: {len(alive)} Ray process(es) of this run did not exit within "
                    f"{deadline_s:g} s of SIGKILL (pids {', '.join(map(str, alive))})")


# ---------------------------------------------------------------- resources

def task_resources(res: Resources) -> dict:
    """Ray task options for a one-node case."""
    opts: dict = {"num_cpus": res.num_cpus, "num_gpus": res.num_gpus}
    if res.accelerator_type:
        opts["accelerator_type"] = res.accelerator_type
    if res.memory_gb:
        opts["memory"] = int(res.memory_gb * 2**30)
    if res.custom:
        opts["resources"] = dict(res.custom)
    return opts


def bundle(res: Resources) -> dict[str, float]:
    """One node's share of a gang, in Ray's resource names (zero amounts left out: Ray refuses them)."""
    b = {"CPU": res.num_cpus, "GPU": res.num_gpus, **res.custom}
    if res.memory_gb:
        b["memory"] = float(int(res.memory_gb * 2**30))
    if res.accelerator_type:
        b[f"accelerator_type:{res.accelerator_type}"] = 0.001  # how Ray itself asks for an accelerator type
    return {k: v for k, v in b.items() if v}


def unplaceable(res: Resources, nodes: list[dict]) -> str | None:
    """Why no placement can ever satisfy the case on this cluster, or None. Ray would queue such a
    task forever; the gate says so at once instead."""
    want = bundle(res)
    fitting = [n for n in nodes if n.get("Alive") and all(n["Resources"].get(k, 0) >= v for k, v in want.items())]
    if len(fitting) >= res.nodes:
        return None
    alive = sum(bool(n.get("Alive")) for n in nodes)
    return f"needs {asked(res)}; {len(fitting)} of the Ray cluster's {alive} alive node(s) have that"


def asked(res: Resources) -> str:
    """What a case asks for, in words: ``1 node(s) with CPU 4 each``."""
    return f"{res.nodes} node(s) with {', '.join(f'{k} {v:g}' for k, v in bundle(res).items()) or 'nothing'} each"


# ---------------------------------------------------------------- the driver

class RayExecutor(Executor):
    """Each case a Ray task with its descriptor's resources, on the cluster at ``$RAY_ADDRESS`` or a Ray started
    for the run (see the module's docstring)."""

    name = "ray"

    def check(self, plan: Plan) -> None:
        """Nothing to refuse before the run: what a case asks is checked against the cluster's nodes when the
        run connects (``unplaceable``), the only time they are known, and a case that cannot be placed ends
        as its own error while the others run."""
        return None

    def run_cases(self, progress: RunProgress, on_start: Callable[[str], None] | None = None,
                  on_done: Callable[[str, CaseResult], None] | None = None, share: Share | None = None) -> None:
        """Run the pending cases on Ray, each placed by its own resources rather than by the session's share
        of this machine."""
        run_cases_ray(progress, on_start, on_done)  # Ray places each case by its resources, not by the session's share


@dataclass
class _Submitted:
    spec: CaseSpec
    retries: int
    group: object | None = None
    resources: Resources = field(default_factory=Resources)
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None  # monotonic time the latest attempt was seen starting
    seen: int = 0  # attempts seen so far
    cancelled: float | None = None  # monotonic time the driver cancelled it
    forced: bool = False
    gave_up_waiting: bool = False  # cancelled before it ever started: its resources never came


def run_cases_ray(progress: RunProgress, on_start: Callable[[str], None] | None = None,
                  on_done: Callable[[str, CaseResult], None] | None = None,
                  num_cpus: int | None = None) -> None:
    """Run the pending cases as Ray tasks, each placed by its resources, on the cluster at $RAY_ADDRESS or a Ray
    started for the run; each case's result recorded in ``progress`` as it ends."""
    import ray

    run, specs = progress.run, progress.pending
    if not specs:
        return
    with ray_session(num_cpus) as where:
        log.log(NOTICE, f"  on {where}", extra=MARKUP)
        remote = ray.remote(case_task)
        nodes = ray.nodes()
        live: dict = {}

        started: set[str] = set()

        def start(spec: CaseSpec) -> None:
            if spec.name not in started and on_start:
                on_start(spec.name)
            started.add(spec.name)

        def finish(spec: CaseSpec, result: CaseResult) -> None:
            start(spec)  # progress reports pair each end with a start, also for a case that never ran
            progress.results[spec.name] = result
            if on_done:
                on_done(spec.name, result)

        for spec in specs:
            case = run.plan.cases[spec.name]
            res, retries = case.resources, case.retries
            why = unplaceable(res, nodes)
            if why:
                finish(spec, record(run.cases_dir, CaseResult(
                    case=spec.name, backend=spec.backend, status=Status.ERROR, finished_at=now_iso(),
                    error_kind=outcomes.Outcome.CASE_ERROR, error=f"cannot be placed: {why}")))
                continue
            try:
                ref, sub = _submit(ray, remote, run, spec, res, retries)
            except Exception as exc:  # a refused submission is this case's error, not the gate's
                finish(spec, record(run.cases_dir, CaseResult(
                    case=spec.name, backend=spec.backend, status=Status.ERROR, finished_at=now_iso(),
                    error_kind=outcomes.Outcome.CASE_ERROR, error=f"Ray refused the task: {describe_failure(exc)}")))
                continue
            live[ref] = sub
        try:
            _drive(ray, progress, live, start, finish)
        except KeyboardInterrupt:
            for ref in live:
                ray.cancel(ref)  # each task then kills its kernel and saves its partial notebook
            if live:
                ray.wait(list(live), num_returns=len(live), timeout=FORCE_AFTER_S + 15)
            for sub in live.values():
                finish(sub.spec, interrupted(run.cases_dir, sub.spec))
            raise
        finally:
            for sub in live.values():
                if sub.group is not None:
                    ray.util.remove_placement_group(sub.group)


def interrupted(cases: Path, spec: CaseSpec) -> CaseResult:
    """The record of a case whose task the interruption cancelled: the one its task wrote when it stopped the
    case's kernel, or, where the task had not written it by the time the run must end (on a loaded machine
    stopping a kernel and recording it outlasted the wait), the driver's own, so that the run never lists the
    case as missing while its partial notebook lies in the run. Ray's shutdown then ends the kernel with the
    rest of the run's processes."""
    try:
        written = kernel_result(cases, spec.name)
    except (OSError, ParityKitError, ValueError, TypeError, KeyError):
        written = None  # a half-written or damaged record is replaced by the driver's account
    if written is not None:
        return written
    notebook = rundir.case_file(cases, spec.name, rundir.CASE_NOTEBOOK)
    return record(cases, CaseResult(
        case=spec.name, backend=spec.backend, status=Status.ERROR, finished_at=now_iso(), notebook=str(notebook),
        error_kind=outcomes.Outcome.INTERRUPTED,
        error=f"interrupted; its Ray task was cancelled; partial notebook {paths.display(notebook)}"))


def _submit(ray, remote, run: GateRun, spec: CaseSpec, res: Resources, retries: int):
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group, group_name = None, None
    # Ray reruns a task whose worker or node died (see the module's docstring for how that meets kit.gate.retry);
    # a case that failed in its notebook returned its result and is not rerun here.
    opts: dict = {"max_retries": retries, "retry_exceptions": False}
    if res.nodes > 1:
        group_name = f"parity-kit/{run.run_dir.name}/{spec.name}/{os.getpid()}"
        group = placement_group([bundle(res)] * res.nodes, strategy=GANG_STRATEGY, name=group_name)
        # The notebook itself takes nothing from bundle 0: its stages (started by the kernel) need all of it.
        opts.update(num_cpus=0, scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=0, placement_group_capture_child_tasks=True))
    else:
        opts.update(task_resources(res))
    ref = remote.options(name=f"parity-kit:{spec.name}", **opts).remote(
        spec.to_dict(), str(run.cases_dir), os.getcwd(), group_name,
        run.expected[spec.name].to_dict() if spec.name in run.expected else None)
    return ref, _Submitted(spec, retries, group, res)


def _drive(ray, progress: RunProgress, live: dict, start, finish) -> None:
    run = progress.run
    cases = run.cases_dir
    grace = float(os.environ.get(GRACE_ENV, GRACE_S))
    while live:
        ready, _ = ray.wait(list(live), num_returns=1, timeout=0.5)
        for ref in ready:
            sub = live.pop(ref)
            if sub.group is not None:
                progress.placements[sub.spec.name] = _placement(ray, sub.group)
                ray.util.remove_placement_group(sub.group)
                sub.group = None
            finish(sub.spec, _outcome(ray, ref, sub, cases, run.expected.get(sub.spec.name)))
        now = time.monotonic()
        for ref, sub in live.items():
            n = len(attempts(cases, sub.spec.name))
            if n > sub.seen:  # a retry gets its own full timeout
                start(sub.spec)
                sub.seen, sub.started = n, now
            wait = sub.resources.max_wait_s
            if sub.started is None and sub.cancelled is None and wait is not None and now - sub.submitted > wait:
                sub.cancelled, sub.gave_up_waiting = now, True
                ray.cancel(ref)  # a task that never started has no kernel to lose
            elif sub.started is not None and sub.cancelled is None and now - sub.started > sub.spec.timeout_s + grace:
                sub.cancelled = now
                ray.cancel(ref)
            elif sub.cancelled is not None and not sub.forced and now - sub.cancelled > FORCE_AFTER_S:
                sub.forced = True
                ray.cancel(ref, force=True)


def _outcome(ray, ref, sub: _Submitted, cases: Path, expected: Expected | None = None) -> CaseResult:
    spec = sub.spec
    notebook = paths.display(rundir.case_file(cases, spec.name, rundir.CASE_NOTEBOOK))
    # What every result the executor writes for the task says of the case (it finished now).
    result = functools.partial(CaseResult, case=spec.name, backend=spec.backend, finished_at=now_iso(),
                               notebook=str(rundir.case_file(cases, spec.name, rundir.CASE_NOTEBOOK)), bound=spec.bound,
                               golden_kind=spec.golden_kind)
    try:
        return CaseResult.from_dict(ray.get(ref))
    except ray.exceptions.TaskCancelledError:
        if sub.gave_up_waiting:
            return record(cases, result(notebook=None, status=Status.ERROR, error_kind=outcomes.Outcome.EXECUTOR,
                                        error=(
                f"waited {sub.resources.max_wait_s:g} s for {asked(sub.resources)} and never started; "
                "its Ray task was cancelled")))
        return record(cases, result(status=Status.TIMEOUT, error_kind=outcomes.Outcome.TIMEOUT, error=(
            f"exceeded its timeout of {spec.timeout_s:g} s and did not return; its Ray task was cancelled; "
            f"partial notebook {notebook}")), expected)
    except Exception as exc:
        tries = len(attempts(cases, spec.name))
        kind = lost_kind(ray, exc)
        died = kind in (outcomes.Outcome.WORKER_LOST, outcomes.Outcome.OUT_OF_MEMORY)
        what = "its Ray worker died" if died else "its Ray task failed"
        return record(cases, result(status=Status.ERROR, error_kind=kind, error=(
            f"{what} ({type(exc).__name__}) on attempt {tries} of {1 + sub.retries}; "
            f"partial notebook {notebook}")), expected)


def lost_kind(ray, exc: BaseException) -> str:
    """The kind of a Ray task's failure, from Ray's exception types: its worker, node or actor died (worker-lost),
    Ray killed it for memory (out-of-memory), or the task failed otherwise outside the notebook, whose failures
    the task records itself (executor). A RayTaskError is judged by the exception it wraps."""
    cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) and exc.cause is not None else exc
    if isinstance(cause, ray.exceptions.OutOfMemoryError):
        return outcomes.Outcome.OUT_OF_MEMORY
    if isinstance(cause, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                          ray.exceptions.ActorDiedError)):
        return outcomes.Outcome.WORKER_LOST
    return outcomes.Outcome.EXECUTOR


def _placement(ray, group) -> dict:
    from ray.util.placement_group import placement_group_table

    table = placement_group_table(group)
    bundles = table.get("bundles", {})
    nodes = table.get("bundles_to_node_id", {})
    return {"name": table.get("name"), "strategy": table.get("strategy"), "state": table.get("state"),
            "bundles": [bundles[i] for i in sorted(bundles)], "nodes": [nodes.get(i) for i in sorted(bundles)]}
