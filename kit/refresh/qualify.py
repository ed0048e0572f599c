"""The qualify step: the exact wheel bytes of a release, installed, importable and scoring the model.

``qualify_release`` is what ``notebooks/qualify.ipynb`` calls. The qualified
environment is a fresh venv layered over the main environment: the wheels go
into its own site-packages, which come first on its path, and a ``.pth`` adds
the main environment's site-packages after them. So the release's bytes shadow
anything of the same name, while kit, ipykernel, papermill and the engine's own
dependencies come from the environment that already runs the gate; nothing is
downloaded (``pip install --no-deps --no-index`` of the files themselves). A
plain ``--system-site-packages`` venv would not do: made from inside a venv it
sees the base interpreter's packages, not the main environment's.

Its kernel is registered under the venv's own prefix, never per user; the gate
finds it through ``JUPYTER_PATH``, which the step reports.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from kit.backends import registry
from kit.core.errors import BadInput, ParityKitError
from kit.core.records.jsonio import read_json, write_json
from kit.core.records import paths, rundir
from kit.core.records.paths import display
from kit.core.records.records import GoldenMode
from kit.core.records.results import Verdict
from kit.descriptor.load import LoadedDescriptor, derive, load_descriptor
from kit.descriptor.plan import Outline, outline, resolve
from kit.descriptor.schema import case_golden_kind
from kit.refresh import release, wheels
from kit.run import output

RECORD = "qualify.json"
MAIN_ENV_PTH = "_parity_kit_main_env.pth"


@dataclass(frozen=True)
class QualifyOutcome:
    qualified: bool
    reason: str
    tag: str
    manifest: str
    kernel: str = ""
    jupyter_path: str = ""
    venv: str = ""
    wheels: list[dict] = field(default_factory=list)  # file, sha256, verified
    imports: dict = field(default_factory=dict)  # module -> file it was imported from
    hardware: dict = field(default_factory=dict)
    case: dict = field(default_factory=dict)  # name, bucket, verdict, run_dir, error
    checks: list[dict] = field(default_factory=list)  # step, ok, detail
    timings_s: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The outcome as the qualify step's record keeps it."""
        return asdict(self)


def kernel_name(tag: str) -> str:
    """The Jupyter kernel a qualified release's wheels run in."""
    return f"release-{tag}"


def candidate_release(desc: LoadedDescriptor | Outline, current: str, backend: str | None, manifest: dict,
                      kernel: str) -> tuple[str, dict]:
    """Today's pin with one backend's build replaced by the release: the refresh's candidate."""
    stated = _stated(desc)
    pin = stated.release(current)
    backend = pick_backend(stated, current, backend)
    backends = {name: copy.deepcopy(dict(built)) for name, built in pin.builds.items()}
    backends[backend] = {**backends[backend], "kernel": kernel, "version": manifest["version"],
                         "source_commit": manifest["source_commit"],
                         "wheels": {w["file"]: w["sha256"] for w in manifest["wheels"]}}
    return backend, {"description": f"{manifest['tag']}: {manifest.get('fork', 'fork')} refreshed onto "
                                    f"{manifest.get('upstream_ref', manifest['base_commit'][:12])}",
                     "backends": backends}


def pick_backend(desc: LoadedDescriptor | Outline, current: str, backend: str | None) -> str:
    """The backend the fork builds: the one named, else the pin's only one, else the pin's one forked engine
    (vllm: the engine whose forks a refresh exists for; its BackendInfo says ``forked``)."""
    pin = _stated(desc).release(current)
    if backend is None:
        known = registry.registry()
        forked = [name for name in pin.builds if name in known and known[name].forked]
        if len(pin.builds) > 1 and len(forked) == 1:
            return forked[0]
        if len(pin.builds) != 1:
            raise BadInput(f"{pin.where}: release {current!r} has backends "
                           f"{', '.join(pin.builds)}; say which one the fork builds (--backend)")
        return next(iter(pin.builds))
    if backend not in pin.builds:
        raise BadInput(f"{pin.where}: release {current!r} has no {backend} build "
                       f"(backends: {', '.join(pin.builds)})")
    return backend


def _stated(desc: LoadedDescriptor | Outline) -> Outline:
    return desc if isinstance(desc, Outline) else outline(desc)


def qualify_release(manifest_path: str | Path, descriptor: str | Path | None, step_dir: str | Path | None,
                    current: str = "current", backend: str | None = None, case: str | None = None,
                    bucket: int | None = None, parity_case: bool = True) -> QualifyOutcome:
    """Verify, install, register, import, then (unless ``parity_case`` is False: a bisect runs its own
    case on the failing prompts) one short parity case in the release's kernel. ``descriptor`` is a path or an
    embedded descriptor's name (kit.core.records.paths.descriptor_path); ``step_dir`` None is a fresh ``qualify-<time>``
    folder under the project's runs/, not the folder a notebook's kernel runs in."""
    output.ensure()  # qualify.ipynb calls this in its kernel: the gate's lines are the cell's stderr
    step_dir = Path(step_dir or rundir.new_run_dir("qualify", "", str(paths.runs_root()))).resolve()
    step_dir.mkdir(parents=True, exist_ok=True)
    manifest = release.load_release(manifest_path)
    desc = load_descriptor(paths.descriptor_path(descriptor))
    kernel = kernel_name(manifest["tag"])
    # Not named `release`: that is the module this function reads the manifest with.
    backend, candidate = candidate_release(desc, current, backend, manifest, kernel)
    case_name, case_bucket = pick_case(desc, backend, case, bucket)
    out = QualifyOutcome(False, "", manifest["tag"], manifest["_path"], hardware=host_hardware())
    t0 = time.perf_counter()

    def check(step: str, ok: bool, detail: str) -> bool:
        nonlocal out
        out.checks.append({"step": step, "ok": ok, "detail": detail})
        if not ok and not out.reason:
            out = replace(out, reason=f"{step}: {detail}")
        return ok

    source = release.wheel_dir(manifest)
    problems = wheels.verify_wheels(source, manifest["wheels"])
    out = replace(out, wheels=[{"file": w["file"], "sha256": w["sha256"], "architecture": w.get("architecture", ""),
                   "verified": not any(w["file"] in p for p in problems)} for w in manifest["wheels"]])
    if not check("verify", not problems, "; ".join(problems) or
                 f"{len(manifest['wheels'])} wheel(s) match their manifest digests"):
        return _record(step_dir, out, t0)

    venv = step_dir / "venv"
    out = replace(out, venv=str(venv))
    try:
        python = make_layered_venv(venv)
        out.timings_s["venv"] = time.perf_counter() - t0
        install(python, [source / w["file"] for w in manifest["wheels"]], step_dir / "install.log")
        check("install", True, f"installed into {venv} with pip --no-deps --no-index")
        out = replace(out, jupyter_path=register_kernel(python, venv, kernel))
        check("kernel", True, f"kernel {kernel} registered under {out.jupyter_path}")
    except StepFailed as exc:
        check(exc.step, False, str(exc))
        return _record(step_dir, out, t0)
    out = replace(out, kernel=kernel)
    out.timings_s["install"] = time.perf_counter() - t0 - out.timings_s["venv"]

    modules = sorted({m for w in manifest["wheels"] for m in wheels.top_level_modules(source / w["file"])})
    imports, problem = import_smoke(python, venv, modules)
    out = replace(out, imports=imports)
    if not check("import", problem is None, problem or f"imported {', '.join(modules)} from the release's bytes"):
        return _record(step_dir, out, t0)

    if not parity_case:
        out = replace(out, qualified=True,
                      reason=f"{len(manifest['wheels'])} wheel(s) verified, installed and imported in kernel {kernel}; "
                             "no parity case (the caller runs its own)")
        return _record(step_dir, out, t0)
    t1 = time.perf_counter()
    derived = derive(desc, {manifest["tag"]: candidate}, {case_name: {"buckets": [case_bucket]}})
    use_jupyter_path(out.jupyter_path)
    verdict, run_dir, error = _run_case(derived, manifest["tag"], case_name, step_dir / "case")
    out.timings_s["case"] = time.perf_counter() - t1
    out = replace(out, case={"name": case_name, "backend": backend, "bucket": case_bucket, "verdict": verdict,
                             "run_dir": str(run_dir), "error": error})
    if check("parity case", verdict == Verdict.PASSED,
             f"{case_name} on bucket {case_bucket} in kernel {kernel}: {verdict}" + (f" ({error})" if error else "")):
        out = replace(out, qualified=True,
                      reason=f"{len(manifest['wheels'])} wheel(s) verified, installed and imported; "
                             f"{case_name} (bucket {case_bucket}) passed in kernel {kernel}")
    return _record(step_dir, out, t0)


class StepFailed(ParityKitError):
    def __init__(self, step: str, message: str):
        super().__init__(message)
        self.step = step


def make_layered_venv(venv: Path) -> Path:
    """A fresh venv whose own site-packages come first and the main environment's after."""
    if venv.exists():
        raise StepFailed("venv", f"{venv} exists; a qualification always starts from a fresh environment")
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], "venv")
    python = venv / "bin" / "python"
    own = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    "venv").strip())
    main = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    # An `import` line in a .pth runs at start-up; addsitedir also reads the main env's own .pth files
    # (editable installs among them), which a bare path line would not.
    lines = [f"import site; site.addsitedir({p!r})" for p in main]
    (own / MAIN_ENV_PTH).write_text("\n".join(lines) + "\n")
    return python


def install(python: Path, files: list[Path], log: Path) -> None:
    """Install the release's wheels into the fresh environment with the main environment's pip (no index, no
    dependencies), its output in ``log``; a failure is refused with the log's last lines."""
    # The main environment's pip installs into the new interpreter: the venv needs no pip of its own.
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
           "--no-cache-dir", "--disable-pip-version-check", *map(str, files)]
    with open(log, "wb") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        raise StepFailed("install", f"pip install exited {proc.returncode} (log {log}): "
                                    f"{tail[-1] if tail else 'no output'}")


def register_kernel(python: Path, venv: Path, name: str) -> str:
    """Register the fresh environment's kernel under ``name`` inside that environment, and return where Jupyter
    finds it."""
    _run([str(python), "-m", "ipykernel", "install", "--prefix", str(venv), "--name", name,
          "--display-name", f"parity-kit ({name})"], "kernel")
    return str(venv / "share" / "jupyter")


def use_jupyter_path(path: str) -> None:
    """Let this process's Jupyter find the release's kernel (before any it already knew)."""
    known = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    if path not in known:
        os.environ["JUPYTER_PATH"] = os.pathsep.join([path, *known])


# Prints one JSON line: where each module was imported from, and the failure of each that could not be.
SMOKE = """
import importlib, json, sys
found, failed = {}, {}
for name in sys.argv[1:]:
    try:
        found[name] = getattr(importlib.import_module(name), "__file__", None) or "(namespace)"
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"found": found, "failed": failed}))
"""


def import_smoke(python: Path, venv: Path, modules: list[str]) -> tuple[dict, str | None]:
    """Import every top-level module of the wheels; each must come from the venv, not the main env."""
    if not modules:
        return {}, "the wheels install no importable module"
    try:
        smoke = json.loads(_run([str(python), "-c", SMOKE, *modules], "import").strip().splitlines()[-1])
    except StepFailed as exc:
        return {}, str(exc)
    found, failed = smoke["found"], smoke["failed"]
    if failed:
        name = next(iter(failed))
        return found, f"import {name} failed: {failed[name]}"
    for name, where in found.items():
        if where != "(namespace)" and not Path(where).resolve().is_relative_to(venv.resolve()):
            return found, f"{name} was imported from {where}, not from the release's bytes in {venv}"
    return found, None


def host_hardware() -> dict:
    """CPU model and cores, memory, and each GPU with its driver when nvidia-smi is there."""
    import psutil

    from kit.core.baselines.golden import hardware

    info = {"host": platform.node(), "cpu": hardware(), "cores": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1), "gpus": [], "driver": None}
    smi = shutil.which("nvidia-smi")
    if smi:
        proc = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True)
        for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
            name, memory, driver = (part.strip() for part in line.split(","))
            info["gpus"].append({"name": name, "memory": memory})
            info["driver"] = driver
    return info


def load_qualify(step_dir: str | Path) -> QualifyOutcome:
    """A qualify step's recorded outcome, read back from its folder."""
    return QualifyOutcome(**read_json(Path(step_dir) / RECORD))


def pick_case(desc: LoadedDescriptor, backend: str, case: str | None, bucket: int | None) -> tuple[str, int]:
    """The case to qualify with and one bucket of it (default: the shortest)."""
    from kit.core.records.fixture import load_fixture

    stated = outline(desc)
    names = [n for n, c in stated.cases.items() if c.backend == backend]
    if case is not None and case not in names:
        raise BadInput(f"{display(desc.path)}: no {backend} case named {case!r} (cases: {', '.join(names)})")
    # A tolerance-bound case by preference: exact goldens hold only on the hardware that made them,
    # and qualification runs on the target hardware.
    semantic = [n for n in names if case_golden_kind(stated.cases[n]) == GoldenMode.SEMANTIC]
    name = case or next(iter(semantic or names), None)
    if name is None:
        raise BadInput(f"{display(desc.path)}: no case runs the {backend} backend")
    spec = resolve(desc, [name]).cases[name].spec
    buckets = sorted({c.bucket for c in load_fixture(spec.fixture_path).select(spec.prompt_ids, spec.buckets)})
    if bucket is not None and bucket not in buckets:
        raise BadInput(f"case {name} has no bucket {bucket} (buckets: {', '.join(map(str, buckets))})")
    return name, bucket if bucket is not None else buckets[0]


def _run_case(desc: LoadedDescriptor, release: str, case: str, out: Path):
    from kit.gate.executor import RunRequest
    from kit.gate.session import gate_once

    command = ["parity-kit", "gate", str(desc.path), "--release", release, "--case", case]
    run = gate_once(RunRequest(desc, out, [case], release), command, jobs=1, summary=False)
    result = run.results.get(case)
    error = result.error if result is not None and result.error else None
    return run.verdict, run.run_dir, error


def _run(cmd: list[str], step: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        raise StepFailed(step, f"{Path(cmd[0]).name} {' '.join(cmd[1:3])} exited {proc.returncode}: "
                               f"{lines[-1] if lines else 'no output'}")
    return proc.stdout


def _record(step_dir: Path, out: QualifyOutcome, t0: float) -> QualifyOutcome:
    out.timings_s["total"] = time.perf_counter() - t0
    write_json(step_dir / RECORD, out.to_dict())
    return out
