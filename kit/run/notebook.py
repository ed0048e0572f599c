"""Execute one notebook with papermill in a named kernel, under a wall-clock timeout.

The kernel's process is tracked so that a timeout can kill everything the case
started (papermill's own timeout is per cell, and a hung kernel ignores
interrupts). jupyter_client starts each kernel in a session of its own; the
kernel is stopped as that whole session (kit.backends.processes), on a timeout,
an interrupt, and when the notebook ends, and a guard process stops it should
this process die first. The kernel's stdout and stderr go to a log file: that is
where a dying kernel says why, and they would otherwise interleave on the console.

Every outcome carries its kind (kit.core.outcomes), decided from types where the failure arises: the kit's own
kill on a timeout or an interrupt, nbclient's DeadKernelError, the class a failing cell raised (its name, as the
kernel reports it, looked up among the kit's typed exceptions by kit.core.errors.kind_named), and the kernel
process's own exit (a kernel killed by SIGKILL the kit did not send is a dead kernel, the signal named: the
out-of-memory killer sends it, and so may anyone else, so it is not called out of memory).
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from jupyter_client.manager import AsyncKernelManager

from kit.backends import processes
from kit.core import outcomes
from kit.core.records import paths
from kit.core.records.contract import LOG_PREFIX_ENV
from kit.core.errors import kind_named
from kit.core.records.jsonio import atomic_write_bytes
from kit.run import warmkernels
from kit.run.mainkernel import provide_main_kernel

KERNEL_START_TIMEOUT_S = 120
# What a case left running once its notebook ended (an engine server whose kernel died) gets SIGTERM
# and this long to shut its workers down before SIGKILL.
LEFTOVER_GRACE_S = 10.0
_live: set["KernelHandle"] = set()
_live_lock = threading.Lock()
_stopping = threading.Event()  # set when a run is stopped: no kernel may start after the sweep


@dataclass(frozen=True)
class NotebookOutcome:
    error: str | None  # one line; None when every cell ran
    killed_by: str | None  # "timeout" or "interrupt" when the kit killed the kernel
    log_tail: str | None
    started: bool = True  # False: the run was stopped before this notebook's kernel could start
    kind: str | None = None  # kit.core.outcomes: what ended it, when it failed; None when every cell ran
    raised: str | None = None  # the class name of the exception a cell raised (as the kernel reports it), if one did
    message: str | None = None  # that exception's message, its first line

    @property
    def timed_out(self) -> bool:
        """Whether the kernel was killed because the case's time ran out (not by a stop or a crash)."""
        return self.killed_by == "timeout"


class KernelHandle:
    """Filled in when the kernel starts; ``kill`` ends the kernel and every process of its session,
    ``finish`` stops what is left of it once the notebook has ended."""

    def __init__(self, log_path: Path, log_prefix: str | None = None, env: dict[str, str] | None = None,
                 imports: Sequence[str] = ()) -> None:
        self.log_path = log_path
        self.imports = tuple(imports)  # what a warm process forking this kernel imports first (kit.run.warmkernels)
        self.log_prefix = log_prefix
        self.env = dict(env or {})  # added to the kernel's environment
        self.pid: int | None = None
        self.session: processes.Identity | None = None
        self.killed_by: str | None = None
        self.process: subprocess.Popen | None = None  # the kernel's process, as jupyter_client launched it
        self.shut_down = False  # papermill shut the kernel down (alive at the end), which kills it itself
        self.sockets: str | None = None  # the folder of the kernel's sockets (``private_sockets``), removed at the end
        self._guard: processes.Guard | None = None
        self._lock = threading.Lock()

    def manager_class(self) -> type[AsyncKernelManager]:
        """A kernel manager class that starts the kernel with this handle's environment and records its pid
        and session, so the executor can kill the kernel's whole process tree."""
        handle = self

        class TrackedKernelManager(AsyncKernelManager):
            async def start_kernel(self, **kw):  # type: ignore[override]
                handle.private_sockets(self)
                extra = {**handle.env, **({LOG_PREFIX_ENV: handle.log_prefix} if handle.log_prefix else {})}
                if extra:
                    kw["env"] = {**kw.get("env", os.environ), **extra}
                with open(handle.log_path, "ab") as log:
                    await super().start_kernel(stdout=log, stderr=log, **kw)
                with handle._lock:
                    handle.pid = getattr(self.provisioner, "pid", None)
                    handle.process = getattr(self.provisioner, "process", None)
                    handle.session = processes.identity(handle.pid) if handle.pid is not None else None
                    if handle.session is not None:
                        handle._guard = processes.guard(handle.session)
                    if handle.killed_by:  # killed while the kernel was starting
                        kill_tree(handle.session or handle.pid)

            async def _async_launch_kernel(self, kernel_cmd, **kw):  # type: ignore[override]
                # Forked from a warm process where that gives the kernel a cold start would; else started cold.
                spec_env = self.kernel_spec.env if self.kernel_spec else None
                forked = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: warmkernels.fork_kernel(kernel_cmd, spec_env, kw.get("env") or os.environ,
                                                          kw.get("cwd"), kw["stdout"], kw["stderr"], handle.imports))
                if forked is None:
                    return await super()._async_launch_kernel(kernel_cmd, **kw)
                provisioner = self.provisioner
                provisioner.process, provisioner.pid, provisioner.pgid = forked, forked.pid, forked.pid
                provisioner.cwd = kw.get("cwd") or os.getcwd()
                self._reconcile_connection_info(provisioner.connection_info)

            async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:  # type: ignore[override]
                handle.shut_down = True  # nbclient shuts down only a kernel still alive
                await super().shutdown_kernel(now=now, restart=restart)

        return TrackedKernelManager

    def kill(self, reason: str = "timeout") -> None:
        """Kill the kernel's process tree, once, recording why (the first reason stands)."""
        with self._lock:
            self.killed_by = self.killed_by or reason
            if self.pid is not None:
                kill_tree(self.session or self.pid)

    def exit_code(self) -> int | None:
        """The kernel process's exit status when it ended on its own (neither the kit nor papermill's shutdown
        killed it); None while it runs, or when it was killed on purpose. Read before ``finish``."""
        if self.process is None or self.shut_down or self.killed_by:
            return None
        return self.process.poll()

    def private_sockets(self, manager: AsyncKernelManager) -> None:
        """Have the kernel listen on sockets in a folder of this user's alone, not on TCP ports of the loopback.
        jupyter_client picks five free ports, and the kernel binds them only later: on a busy host another process
        (an engine, Ray, another test's kernel) was seen taking one in between, and a kernel that then failed to bind
        its IOPub port lived on with its threads, unanswering, until the start timed out. A socket's path in a
        private folder is no one else's to take, and no one else's to reach."""
        if manager.transport != "tcp":
            return
        try:
            self.sockets = tempfile.mkdtemp(prefix="k-", dir=warmkernels.folder())
        except OSError:  # no private folder here (kit.run.warmkernels.folder says why): the ports, as before
            return
        manager.transport, manager.ip = "ipc", os.path.join(self.sockets, "kernel")

    def finish(self) -> None:
        """Stop whatever of the case outlived its notebook (papermill's shutdown kills the kernel's
        process group only), then let the guard go, and remove the kernel's sockets."""
        with self._lock:
            if self.pid is not None:
                processes.stop_tree(self.session or self.pid, grace_s=LEFTOVER_GRACE_S)
            guard, self._guard = self._guard, None
        if guard is not None:
            guard.release()
        if self.sockets is not None:
            shutil.rmtree(self.sockets, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str | None:
        """The kernel log's tail, then those of the case's helper processes (a server that never got
        healthy says why in its own log)."""
        logs = [self.log_path]
        if self.log_prefix:
            prefix = Path(self.log_prefix)
            logs += sorted(p for p in prefix.parent.glob(f"{glob.escape(prefix.name)}.*.log") if p != self.log_path)
        parts = []
        for path in logs:
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            tail = "\n".join(text.splitlines()[-lines:])
            if tail:
                parts.append(tail if path == self.log_path else f"--- {path.name} ---\n{tail}")
        return "\n".join(parts) or None


def run_notebook(notebook: str | Path, output: Path, parameters: dict, kernel_name: str,
                 timeout_s: float | None, log_path: Path, log_prefix: str | None = None,
                 env: dict[str, str] | None = None, imports: Sequence[str] = ()) -> NotebookOutcome:
    """papermill's execution, saved after every cell, so a killed run leaves its partial notebook.
    ``env`` is added to the kernel's environment; ``imports``: what the kernel will import beyond every
    notebook's first cell (kit.run.warmkernels imports them first in the warm process it forks the kernel from)."""
    import papermill as pm

    if kernel_name == paths.MAIN_KERNEL:
        provide_main_kernel()  # a plain pip install registered none; the summary may be the first to ask
    handle = KernelHandle(log_path, log_prefix, env, imports)
    timer = threading.Timer(timeout_s, handle.kill) if timeout_s else None
    error, kind, raised, message = None, None, None, None
    with _live_lock:  # checked under the lock that stop_all sweeps with: no kernel slips past it
        if _stopping.is_set():
            return NotebookOutcome("the run was stopped before its kernel started", "interrupt", None, False,
                                   outcomes.Outcome.INTERRUPTED)
        _live.add(handle)
    if timer:
        timer.daemon = True
        timer.start()
    try:
        pm.execute_notebook(str(notebook), str(output), parameters=parameters, kernel_name=kernel_name,
                            progress_bar=False, start_timeout=KERNEL_START_TIMEOUT_S,
                            kernel_manager_class=handle.manager_class(),
                            # Every result is saved by then; a graceful shutdown only adds wait.
                            shutdown_kernel="immediate")
    except Exception as exc:  # every failure becomes a recorded outcome, never a lost case
        code = handle.exit_code()
        error, kind = describe_failure(exc) + exit_words(code), failure_kind(exc, code)
        raised = exc.ename if isinstance(exc, pm.PapermillExecutionError) else None
        message = first_line(exc.evalue) if isinstance(exc, pm.PapermillExecutionError) else None
    except BaseException:  # stopped in this very thread (a notebook run by the main thread): end its kernel
        handle.kill("interrupt")
        raise
    finally:
        if timer:
            timer.cancel()
        handle.finish()
        with _live_lock:
            _live.discard(handle)
    failed = error or handle.killed_by
    kind = KILLED_BY.get(handle.killed_by or "", kind)  # the kit's own kill is why the notebook failed
    return NotebookOutcome(error, handle.killed_by, handle.log_tail() if failed else None, kind=kind, raised=raised,
                           message=message)


def kill_all() -> int:
    """Kill every kernel still running (an interrupted gate must leave no orphan kernels)."""
    with _live_lock:
        handles = list(_live)
    for handle in handles:
        handle.kill("interrupt")
    return len(handles)


def stop_all() -> int:
    """A stopped run: kill every kernel, and refuse every later start (a case that a worker thread was
    about to start would otherwise run whole after the sweep). ``allow_starts`` lifts the refusal."""
    _stopping.set()
    return kill_all()


def stopping() -> bool:
    """Whether the run is stopping (a signal came): no new kernel may start once it is."""
    return _stopping.is_set()


def allow_starts() -> None:
    """Let kernels start again, for the next run in this process once a stopped one has ended."""
    _stopping.clear()


def describe_failure(exc: BaseException) -> str:
    """One line for a failed notebook execution: which cell raised what, or that the kernel died."""
    import papermill as pm
    from nbclient.exceptions import DeadKernelError

    if isinstance(exc, pm.PapermillExecutionError):
        return f"cell {exc.exec_count} raised {exc.ename}: {first_line(exc.evalue)}"
    if isinstance(exc, DeadKernelError):
        return "the kernel died mid-case"
    return f"{type(exc).__name__}: {first_line(str(exc))}"


# What the kit's own kill of a kernel (KernelHandle.kill's reason) makes of the case.
KILLED_BY = {"timeout": outcomes.Outcome.TIMEOUT, "interrupt": outcomes.Outcome.INTERRUPTED}
# How a kernel ended that was killed by SIGKILL it did not get from the kit: as its own process (a negative
# signal number) or through a shell in front of it (128 + the signal).
SIGKILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)


def failure_kind(exc: BaseException, exit_code: int | None = None) -> str:
    """The kind of a failed notebook execution, from types: the class a cell raised, else how the kernel's process
    ended (``exit_code``, when it ended on its own), else what nbclient raised."""
    import papermill as pm
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    if isinstance(exc, pm.PapermillExecutionError):
        return kind_named(exc.ename)
    if exit_code is not None or isinstance(exc, DeadKernelError):
        return outcomes.Outcome.KERNEL_DIED
    if isinstance(exc, CellTimeoutError):
        return outcomes.Outcome.TIMEOUT
    return outcomes.Outcome.CASE_ERROR


def exit_words(exit_code: int | None) -> str:
    """How a kernel that ended on its own ended, for its error line ("" when unknown)."""
    if exit_code is None:
        return ""
    if exit_code in SIGKILLED:
        # The out-of-memory killer sends it, and so may a person or another process: a dead kernel, no more.
        return " (killed by SIGKILL: the out-of-memory killer, or another process)"
    return f" (its process exited with code {exit_code})"


def first_line(text: str) -> str:
    """The first line of ``text``, stripped (empty for none): what a one-line message quotes of a longer error."""
    text = (text or "").strip()
    return text.splitlines()[0] if text else ""


def kill_tree(target: int | processes.Identity | None) -> None:
    """SIGKILL a kernel's session, every process in it and under it, and wait until none is alive
    (a hung kernel ignores SIGTERM, and a timed-out case gets no clean shutdown)."""
    processes.stop_tree(target, grace_s=0)


@dataclass(frozen=True)
class Rendered:
    """A report notebook (a run's summary, a control's notebook, the history, a baseline's evidence) executed and
    rendered. It is a view of records already on disk, so what failed in it is one line here, never an exception:
    a notebook stack missing a piece must not turn the verdict it shows into an internal error."""

    error: str | None  # one line: what failed (the notebook, its kernel, or its HTML); None when all of it worked
    html: Path | None  # the HTML written this time; None when none was (kept off, or its rendering failed)


def run_and_render(notebook: str | Path, output: Path, parameters: dict, timeout_s: float, log_path: Path,
                   kernel_name: str = paths.MAIN_KERNEL, html: bool = True) -> Rendered:
    """``notebook`` executed into ``output`` and (``html``) rendered beside it, also when a cell failed, so the
    reader sees where. Every failure is said, none raised: an interrupt still stops it."""
    try:
        outcome = run_notebook(notebook, output, parameters, kernel_name, timeout_s, log_path)
    except Exception as exc:  # the notebook stack itself (papermill, the main kernel's spec) could not start it
        why = f"{type(exc).__name__}: {first_line(str(exc))}"
        return Rendered(f"{output.name} could not run: {why}", None)
    errors = [f"{output.name} timed out after {timeout_s:g} s" if outcome.timed_out else
              f"{output.name} failed: {outcome.error}" if outcome.error else None]
    page = None
    if html and output.is_file():
        page, failed = try_render_html(output)
        errors.append(failed)
    return Rendered("; ".join(e for e in errors if e) or None, page)


def try_render_html(notebook: Path) -> tuple[Path | None, str | None]:
    """render_html, or the one line saying why not: on a node whose nbconvert lacks a piece (its sanitizer
    without tinycss2 raises NameError on import) the HTML is lost, never what it shows."""
    try:
        return render_html(notebook), None
    except Exception as exc:
        # All of it, on one line: a missing template's message lists the folders searched below its first line.
        why = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        return None, f"nbconvert could not render {notebook.name} to HTML: {why}"


# The scrap a notebook glues to name its page ("tiny-cpu: passed — parity gate"): nbconvert writes the notebook's
# metadata title into the HTML's <title>, else "Notebook", the same in every tab of a browser.
TITLE_SCRAP = "page_title"


def render_html(notebook: Path) -> Path:
    """The executed notebook as HTML beside it, without the code: what a reader opens (every command's report),
    titled by the notebook's ``page_title`` scrap where it glued one."""
    import nbformat

    exporter = html_exporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    node = nbformat.read(str(notebook), as_version=4)
    title = glued_text(node, TITLE_SCRAP)
    if title is not None:
        node.metadata["title"] = title
    for cell in node.cells:  # scraps are data, not a view: left in, each leaves an empty output area on the page
        cell.outputs = [o for o in cell.get("outputs", []) if not _scrap(o)]
    # The parameters' cells show nothing without their code, yet each took a cell's padding above the verdict.
    node.cells = [c for c in node.cells if not PARAMETER_TAGS & set(c.metadata.get("tags", []))]
    with warnings.catch_warnings():
        # A display scrap's own mimetype (beside what it displays), which HTML rightly leaves out.
        warnings.filterwarnings("ignore", message=".*is not able to be represented", category=UserWarning)
        body, _ = exporter.from_notebook_node(node)
    return atomic_write_bytes(notebook.with_suffix(".html"), body.encode("utf-8"))


PARAMETER_TAGS = {"parameters", "injected-parameters"}  # papermill's tags: the defaults, and what it was given


# How scrapbook 0.5 stores a string it glued: a display output of this mimetype, its payload's "data" the string.
TEXT_SCRAP = "application/scrapbook.scrap.text+json"


def glued_text(node, name: str) -> str | None:
    """The last string scrap ``name`` glued in the notebook ``node``, read from its outputs directly.

    Rendering must not need scrapbook: a node that installs only the notebook stack (nbconvert, nbformat) renders
    every report, and the title is the one scrap the page itself shows."""
    found = None
    for cell in node.cells:
        for output in cell.get("outputs", []):
            payload = (output.get("data") or {}).get(TEXT_SCRAP)
            if isinstance(payload, dict) and payload.get("name") == name and isinstance(payload.get("data"), str):
                found = payload["data"]
    return found


def _scrap(output: dict) -> bool:
    """A cell output that only carries a scrapbook scrap (its data's every mimetype is scrapbook's)."""
    data = output.get("data") or {}
    return bool(data) and all(kind.startswith("application/scrapbook.") for kind in data)


def html_exporter(**options):
    """nbconvert's HTMLExporter, which also finds its templates where an install left them beside the packages.

    nbconvert looks for its templates under Jupyter's data folders only (``JUPYTER_PATH``, the user's, the
    interpreter's ``sys.prefix/share/jupyter``, the system's). ``pip install --target DIR``, how a node whose
    image lacks the notebook stack gets it, puts them in DIR/share/jupyter, on none of those: the export then
    fails ("No template sub-directory with name 'lab'") in every process not started with DIR/share/jupyter on
    ``JUPYTER_PATH``. That folder is added last, as nbconvert itself adds it when it runs from a git checkout of
    its own, so every folder Jupyter searches keeps its precedence."""
    from nbconvert import HTMLExporter

    beside = nbconvert_data_beside()

    class Exporter(HTMLExporter):
        def get_prefix_root_dirs(self) -> list[str]:
            dirs = super().get_prefix_root_dirs()
            return [*dirs, beside] if beside is not None and beside not in dirs else dirs

    return Exporter(**options)


def nbconvert_data_beside() -> str | None:
    """The Jupyter data folder beside the folder nbconvert was imported from, where it holds nbconvert's
    templates (an install with ``--target``); None where it does not (an environment's own install, whose data
    is under its prefix)."""
    import nbconvert

    data = Path(nbconvert.__file__).resolve().parents[1] / "share" / "jupyter"
    return str(data) if (data / "nbconvert" / "templates").is_dir() else None
