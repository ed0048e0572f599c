"""Kernels the executor starts: track their process so a timeout can kill the whole tree."""

from __future__ import annotations

import threading

import psutil
from jupyter_client.manager import AsyncKernelManager


class KernelHandle:
    """Filled in when the case's kernel starts; ``kill`` ends the kernel and every process under it."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.killed = False
        self._lock = threading.Lock()

    def manager_class(self) -> type[AsyncKernelManager]:
        handle = self

        class TrackedKernelManager(AsyncKernelManager):
            async def start_kernel(self, **kw):  # type: ignore[override]
                await super().start_kernel(**kw)
                with handle._lock:
                    handle.pid = getattr(self.provisioner, "pid", None)
                    if handle.killed:  # the timeout fired while the kernel was starting
                        kill_tree(handle.pid)

        return TrackedKernelManager

    def kill(self) -> None:
        with self._lock:
            self.killed = True
            if self.pid is not None:
                kill_tree(self.pid)


def kill_tree(pid: int | None) -> None:
    """SIGKILL a process and all its descendants (children first, so none is re-parented and missed)."""
    if pid is None:
        return
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)
