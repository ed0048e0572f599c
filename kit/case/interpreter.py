"""Python in another interpreter: the main environment's, a kernel's, or a fresh one of this environment.

Three needs meet here. A case kernel (Levanter's runs pydantic 1) asks the main environment for what only it can
compute, a resolved case or a case's variants, by running `parity-kit` there. The main environment runs what
only a backend's own environment can compute (Levanter's activations, its cases) in the interpreter of that
backend's kernel. And an engine that is started once per process (vLLM) gets a fresh interpreter for each case,
which leaves nothing behind in the caller. Each is a subprocess whose output is captured as text, and whose
failure is told by the last line it wrote.

Kernel-safe, like the rest of kit.case: the standard library and the kit's kernel-safe modules only
(jupyter_client only when a kernel's interpreter is asked for, which only the main environment does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from kit.backends.base import LOG_PREFIX_ENV, log_tail
from kit.core.records import contract
from kit.core.errors import BadInput
from kit.core.records.records import CaseResult
from kit.core.records.results import load_case_result
from kit.core.records.spec import CaseSpec


def main_python() -> str:
    """The main environment's interpreter. A kernel started by `parity-kit lab` or the gate is told which it is;
    a kernel of the main environment started some other way is that interpreter itself."""
    return os.environ.get(contract.MAIN_PYTHON_ENV) or sys.executable


def kernel_python(kernel: str | None, case: str) -> tuple[str, dict]:
    """The interpreter of a kernel and the environment it runs with: a backend whose environment is its own
    (Levanter's) is run there, outside a notebook, for what only that environment can compute."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        kspec = KernelSpecManager().get_kernel_spec(kernel or "")
    except NoSuchKernel:
        raise BadInput(f"case {case}: its kernel {kernel!r} is not installed (`parity-kit kernels` says how to "
                       "install it)") from None
    return kspec.argv[0], {**os.environ, **(kspec.env or {})}


def run_python(python: str, args: Sequence[str], env: Mapping[str, str] | None = None, input: str | None = None,
               timeout: float | None = None) -> subprocess.CompletedProcess:
    """``python args...``, its stdout and stderr captured as text; ``env`` replaces the environment, ``input`` is
    its stdin. The caller reads the exit status: what a failure means is the caller's to say."""
    return subprocess.run([python, *args], capture_output=True, text=True, env=env, input=input, timeout=timeout)


def last_line(text: str, default: str) -> str:
    """The last line a process wrote (a command's refusal, an exception's message), or ``default`` when none."""
    return (text.strip().splitlines() or [default])[-1]


# One case in a fresh interpreter: the case comes on stdin, its result goes to the file named by argv[1].
_FRESH = """
import json, sys
from kit.case.runner import run_case
from kit.core.records.results import save_case_result
from kit.core.records.spec import CaseSpec
save_case_result(run_case(CaseSpec.from_dict(json.load(sys.stdin))), sys.argv[1])
"""


def run_case_fresh(spec: CaseSpec, timeout_s: float | None = None, python: str | None = None,
                   environ: dict | None = None) -> CaseResult:
    """``run_case`` in a new Python process of this environment (or of ``python``'s with ``environ``, a
    backend's own kernel), for engines launched once per process. The engine's logs go to a temporary folder
    that goes with the call (a failure shows their tail)."""
    with tempfile.TemporaryDirectory(prefix="fault-case-") as tmp:
        out = Path(tmp) / "result.json"
        env = {**(os.environ if environ is None else environ), LOG_PREFIX_ENV: str(Path(tmp) / spec.name)}
        proc = run_python(python or sys.executable, ["-c", _FRESH, str(out)], env=env,
                          input=json.dumps(spec.to_dict()), timeout=timeout_s or 2 * spec.timeout_s)
        if proc.returncode != 0 or not out.is_file():
            logs = "".join(log_tail(p, 5) + "\n" for p in sorted(Path(tmp).glob("*.log")))
            tail = "\n".join((logs + proc.stderr).strip().splitlines()[-10:])
            raise RuntimeError(f"case {spec.name} on {spec.model_path} exited {proc.returncode}: {tail}")
        return load_case_result(out)
