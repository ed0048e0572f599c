"""Test helpers shared by both tiers: the embedded default's files, descriptors written on the fly, the real
CLI, stand-in kernels, injected faults. Test modules import helpers from here, never from each other."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat
import tomli_w

from kit.core.records import paths

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Embedded:
    descriptor: Path
    doc: dict
    model: Path
    fixture: Path
    goldens: dict[str, Path]  # each [goldens] entry's file that this host's cases use
    models: dict[str, dict]  # the [models] table, paths made absolute
    golden_files: dict[str, Path | list[Path]]  # each entry as the descriptor has it (an exact one: per runtime)


def load_embedded() -> Embedded:
    from kit.descriptor.load import load_descriptor

    path = paths.EMBEDDED_DESCRIPTOR
    doc = tomllib.loads(path.read_text())
    here = path.parent
    models = {k: {**m, "path": str((here / m["path"]).resolve())} for k, m in doc.get("models", {}).items()}
    loaded = load_descriptor(path)
    files = {k: loaded.baselines.golden_files(k) for k in doc["goldens"]}
    # An exact entry's file is the one its first case chooses on this host's runtime; a host none holds on
    # still gets a file to read (a gate there reads "no baseline" for that case).
    goldens = {k: _chosen(loaded, k) or files[k][0] for k in doc["goldens"]}
    as_written = {k: f if isinstance(doc["goldens"][k], list) else f[0] for k, f in files.items()}
    return Embedded(path, doc, (here / doc["model"]["path"]).resolve(), (here / doc["fixture"]["path"]).resolve(),
                    goldens, models, as_written)


def _chosen(loaded, entry: str) -> Path | None:
    user = next((n for n, c in loaded.cases.items() if c.golden == entry), None)
    return loaded.baselines.case_golden(user, loaded.cases[user])[0] if user is not None else None


def write_descriptor(folder: Path, embedded: Embedded, name: str = "test.toml", *, model: Path | None = None,
                     model_digest: str | None = None, fixture: Path | None = None,
                     goldens: dict | None = None, cases: dict | None = None, defaults: dict | None = None,
                     releases: dict | None = None, models: dict | None = None,
                     baselines: dict | None = None) -> Path:
    """A descriptor like the embedded one, with absolute paths and the given parts replaced."""
    doc = {
        "name": "test",
        "model": {"path": str(model or embedded.model), "digest": model_digest or embedded.doc["model"]["digest"]},
        "fixture": {"path": str(fixture or embedded.fixture)},
        "models": models if models is not None else embedded.models,
        "goldens": {k: [str(p) for p in v] if isinstance(v, list) else str(v)
                    for k, v in (goldens or embedded.golden_files).items()},
        "defaults": defaults or embedded.doc.get("defaults", {}),
        "cases": _calibrated_or_hand_set(cases if cases is not None else embedded.doc["cases"], embedded,
                                         own_inputs=not (model or model_digest or fixture or goldens)),
    }
    if releases is not None:
        doc["releases"] = releases
    if baselines is not None:
        doc["baselines"] = baselines
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / name
    out.write_text(tomli_w.dumps(doc))
    return out


# The real gate's hand-set bounds, which the embedded semantic cases had before calibration records.
HAND_SET_BOUNDS = {"hf": 0.075, "levanter": 0.075, "vllm": 0.125}


def _calibrated_or_hand_set(cases: dict, embedded: Embedded, own_inputs: bool) -> dict:
    """The cases with their calibration records' paths made absolute; with the embedded inputs replaced
    (another model, fixture or golden), which no record measured, with the hand-set bounds instead."""
    here = embedded.descriptor.parent

    def absolute(f: str) -> str:
        return str((here / f).resolve())

    def one(c: dict) -> dict:
        power = c.get("power")
        if power is not None:  # power records stand with the calibration records they were measured against
            listed = [power] if isinstance(power, str) else power
            c = {k: v for k, v in c.items() if k != "power"}
            if own_inputs:
                c["power"] = [f if Path(f).is_absolute() else absolute(f) for f in listed]
        cal = c.get("calibration")
        files = [cal] if isinstance(cal, str) else cal or []
        if not files or all(Path(f).is_absolute() for f in files):  # a test's own record stays
            return c
        if own_inputs:  # one record, or one per class of hardware
            return {**c, "calibration": absolute(cal) if isinstance(cal, str) else [absolute(f) for f in cal]}
        return {**{k: v for k, v in c.items() if k != "calibration"}, "bound": HAND_SET_BOUNDS[c["backend"]]}

    return {name: one(c) for name, c in cases.items()}


# How long a command past its test's timeout is given to stop as a user's Ctrl-C stops it (its kernels too).
STOP_AFTER_TIMEOUT_S = 60


def parity_kit(*args: str, cwd: Path | None = None, timeout: float = 600,
               env: dict | None = None) -> subprocess.CompletedProcess:
    """The real command, in a fresh process, as a user runs it (``env`` adds to the environment).

    A command still running after ``timeout`` is interrupted as Ctrl-C would (a gate then stops its kernels,
    which run in sessions of their own and would outlive a killed gate, loading the tests that follow), and the
    test fails with the end of what it logged: which case it was waiting for is the first thing to know."""
    argv = [sys.executable, "-m", "kit.cli", *map(str, args)]
    proc = subprocess.Popen(argv, cwd=cwd or ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env} if env else None)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=STOP_AFTER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(f"parity-kit {' '.join(map(str, args))} did not finish within {timeout:g} s; "
                             f"the end of its log:\n{err[-4000:]}") from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def add_kernel(jupyter_path: Path, name: str, startup: str) -> dict:
    """Register a kernel of this environment that runs ``startup`` (a sitecustomize) first: a
    stand-in for another release's environment. Returns the env that makes Jupyter find it."""
    site = jupyter_path / f"{name}-site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(startup)
    spec = jupyter_path / "kernels" / name
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name, "language": "python", "env": {"PYTHONPATH": str(site)},
    }))
    return {"JUPYTER_PATH": str(jupyter_path)}


def hf_cases(embedded: Embedded) -> dict:
    """The embedded descriptor's first-token hf cases (checkpoint, hf-bf16), which run in the main kernel;
    its decode case (hf-bf16-decode) has tests of its own (tests/e2e/gate/test_decode.py)."""
    return {k: v for k, v in embedded.doc["cases"].items() if v["backend"] == "hf" and "decode" not in v}


def golden_made_on(golden: Path, dest: Path, hardware: str, runtime: str | None = None) -> Path:
    """A copy of a golden whose provenance says it was made on ``hardware`` (and, where given, on the runtime
    key ``runtime``; "" drops the key), written canonically so that it loads (a golden's digest is that of
    its canonical bytes)."""
    from kit.core.records.jsonio import canonical_bytes

    doc = json.loads(Path(golden).read_text())
    doc["provenance"]["hardware"] = hardware
    if runtime == "":
        doc["provenance"].pop("runtime", None)
    elif runtime is not None:
        doc["provenance"]["runtime"] = runtime
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(canonical_bytes(doc))
    return dest


def power_against(power: Path, record: Path, folder: Path, **changes) -> Path:
    """A copy of a power record as if measured against ``record`` (a calibration record of the same samples, as
    a test relabels one to another class of hardware): it names that record and its class, and loads against it,
    its figures being its samples' under the same bounds; ``changes`` replace more of its keys (``created_at``: a
    record made again, of other bytes)."""
    from kit.core.noise.calibration import load_record, measured_on
    from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes

    against = load_record(record)
    doc = {**json.loads(Path(power).read_text()), "record_sha256": against.sha256,
           "measured_on": measured_on({"fingerprint": against.fingerprint}), **changes}
    data = canonical_bytes(doc)
    folder.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(folder / f"{sha256_bytes(data)}.json", data)


def copy_model(embedded: Embedded, dest: Path) -> Path:
    shutil.copytree(embedded.model, dest)
    return dest


def write_notebook(path: Path, *sources: str) -> Path:
    """A case notebook for fault injection: a papermill parameters cell, then the given cells."""
    params = nbformat.v4.new_code_cell("spec = None\nresult_path = None")
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[params, *(nbformat.v4.new_code_cell(s) for s in sources)])
    nb.metadata["kernelspec"] = {"name": paths.MAIN_KERNEL, "display_name": paths.MAIN_KERNEL, "language": "python"}
    nbformat.write(nb, str(path))
    return path


def trusted(notebook: Path) -> dict:
    """A descriptor's `notebook` entry for a case notebook of its own (not the kit's): code it vouches for."""
    return {"path": str(notebook), "trusted": True}


def edit_weight(model_dir: Path, tensor: str, edit) -> None:
    """Rewrite one tensor of a copied model folder in place (``edit`` maps the tensor to its new value)."""
    from safetensors.torch import load_file, save_file

    path = model_dir / "model.safetensors"
    tensors = load_file(str(path))
    tensors[tensor] = edit(tensors[tensor].clone()).contiguous()
    save_file(tensors, str(path), metadata={"format": "pt"})


# Faults and stand-ins shared by several test modules.

# A kernel's worker processes, as engines start them: a child, and one whose parent exited at once, so
# that init adopted it and only the kernel's session still ties it to the case. The pidfile lists the
# kernel, the child and the orphan.
STARTS_WORKERS = """import os, pathlib, subprocess
child = subprocess.Popen(["sleep", "600"])
orphan = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
pathlib.Path({pidfile!r}).write_text(f"{{os.getpid()}} {{child.pid}} {{orphan.stdout.strip()}}")"""
SLEEPER = STARTS_WORKERS + "\nimport time\ntime.sleep(600)"


def gone(pids) -> bool:
    import psutil

    def dead(pid):
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    return all(dead(p) for p in pids)


def survivors(pids) -> list[int]:
    """Those of ``pids`` still alive, with every live process of a session or process group one of them
    leads: a case's kernel leads its session, so this is everything the case started that stayed in it,
    also a grandchild whose parent died first."""
    from kit.backends.processes import members

    pids = list(pids)
    left = {p for p in pids if not gone([p])}
    for p in pids:
        left.update(members(p))
    return sorted(left)


def wait_gone(pids, within_s: float = 120.0) -> list[int]:
    """``survivors(pids)`` once there are none, or when ``within_s`` has passed: for a stop that ends
    in another process than the one the test waited for (a lost Ray worker's guard), on a machine of
    any load. A stop the gate itself makes is checked with ``survivors`` at once."""
    import time

    pids = list(pids)  # read on every look
    deadline = time.monotonic() + within_s
    while (left := survivors(pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


BROKEN_SILU = """import torch, torch.nn.functional as F
F.silu = lambda x, inplace=False: x * torch.sigmoid(2.0 * x)
"""
HUNG = "import time\ntime.sleep(600)\n"


def releases(current: str = paths.MAIN_KERNEL, candidate: str = paths.MAIN_KERNEL) -> dict:
    return {"current": {"description": "today's pin", "backends": {"hf": {"kernel": current, "version": "pin"}}},
            "candidate": {"description": "staged", "backends": {"hf": {"kernel": candidate, "version": "next",
                                                                       "source_commit": "0123abcd"}}}}


def install_backend_plugin(site: Path, backend: str, package: str, files: dict[str, str]) -> Path:
    """A backend plugin laid out as pip would install it (its package, and a dist-info whose entry point
    registers it under parity_kit.backends) in ``site``, a folder to put on PYTHONPATH."""
    pkg = site / package
    pkg.mkdir(parents=True)
    for name, text in files.items():
        (pkg / name).write_text(text.lstrip())
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[parity_kit.backends]\n{backend} = {package}:BACKEND\n")
    return site


# A backend plugin whose engine replays the golden it is given, every logprob divided by its `temperature`
# option: it agrees with any golden at 1.0 and disagrees at other temperatures. Given none (`golden make`),
# it echoes the prompt: its last distinct tokens, the latest most likely. Its activations, for `localize`, are
# the float32 stream of the model it was opened on, read through hf: the hooks are its own, the numbers need
# not be.
ECHO_PLUGIN = {
    "__init__.py": '''
from kit.api import BackendInfo

BACKEND = BackendInfo(name="echo", summary="replays the golden (a test plugin)", runtime="echo_backend.runtime",
                      options="echo_backend.options:EchoOptions", makes_goldens=True,
                      activations="echo_backend.activations")
''',
    "options.py": '''
from pydantic import Field

from kit.api import BackendOptions


class EchoOptions(BackendOptions):
    temperature: float = Field(default=1.0, gt=0)
''',
    "runtime.py": '''
import json
import math

from kit.api import Observation


class Echo:
    name = "echo"

    def __init__(self, golden_path, model_path, temperature=1.0):
        doc = json.loads(open(golden_path).read()) if golden_path else {"cases": []}
        self.tops = {c["id"]: [(e["token_id"], e["logprob"]) for e in c["top_logprobs"]] for c in doc["cases"]}
        self.model_path, self.temperature = model_path, temperature

    def release(self):
        return {"backend": "echo", "temperature": self.temperature}

    def observe(self, prompts, top_n):
        tops = [self.tops.get(p.id) or echoed(p, top_n) for p in prompts]
        return [Observation(p.id, tuple((t, lp / self.temperature) for t, lp in top), p.n_tokens)
                for p, top in zip(prompts, tops)]

    def details(self):
        return {}

    def close(self):
        pass


def echoed(prompt, top_n):
    latest = list(dict.fromkeys(reversed(prompt.prompt_token_ids)))[:top_n]
    return [(t, -(i + 1) * math.log(2)) for i, t in enumerate(latest)]


def open_backend(spec):
    return Echo(spec.golden_path, spec.model_path, **spec.options)
''',
    "activations.py": '''
def residual_stream(echo, token_ids):
    from kit.backends.hf.activations import residual_stream as hf_stream
    from kit.backends.hf.runtime import HfBackend

    model = HfBackend(echo.model_path)
    try:
        return hf_stream(model, token_ids)
    finally:
        model.close()
''',
}


def install_echo_plugin(folder: Path) -> dict:
    """The echo plugin installed into ``folder``; returns the env that puts it on the path."""
    install_backend_plugin(folder, "echo", "echo_backend", ECHO_PLUGIN)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}


def cases_pass_without_kernels(monkeypatch) -> None:
    """The gate's executor records every case as passed, on no prompts, without starting a kernel: for tests of
    what the gate does around its cases."""
    from kit.core.records.records import CaseResult
    from kit.core.records.results import save_case_result
    from kit.gate import executor

    def execute_case(spec, cases_dir, expected=None, gpus=(), clock_from=None):
        result = CaseResult(spec.name, spec.backend, status="passed")
        save_case_result(result, cases_dir / f"{spec.name}.json")
        return result

    monkeypatch.setattr(executor, "execute_case", execute_case)
