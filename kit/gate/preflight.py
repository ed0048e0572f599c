"""Check every input of a gate before anything runs: fixture, goldens, model, kernels, notebooks (their parameters).

It checks the outside world against a resolved plan (kit.descriptor.plan): the files, their digests, the
kernels installed. What the descriptor says was settled when the plan was resolved; the plan also holds every
location a message names, so nothing here reads the descriptor. Each refusal is a BadInput with one line
naming what and where.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kit.backends import registry
from kit.core.records import paths
from kit.core.baselines.baselinekind import CALIBRATION, POWER, InKernelReference, judged_by, lacked, of_golden
from kit.core.verdict.decode import check_continuations_fit, check_decode_golden
from kit.core.errors import BadInput
from kit.core.records.fixture import Fixture, Prompt, load_fixture
from kit.core.baselines.golden import Golden, check_golden_matches_fixture, check_golden_vocabulary, load_golden
from kit.core.model.modelconfig import check_prompt_tokens, check_prompts_fit, model_limits
from kit.core.model.modeldigest import DigestCache, check_model_digest
from kit.descriptor.plan import CasePlan, Outline, Plan
from kit.descriptor.schema import case_schemas
from kit.gate.parameters import check_case_notebook
from kit.run.mainkernel import provide_main_kernel, registered_kernels

log = logging.getLogger(__name__)

LARGE_MODEL_BYTES = 256 * 2**20  # hashing this much takes long enough that a silent console looks hung

@dataclass(frozen=True)
class Inputs:
    fixture: Fixture
    goldens: dict[str, Golden]
    model_digest: str
    models: dict[str, str] = field(default_factory=dict)  # the [models] entries the cases use: name -> digest
    # The file digests behind those model digests: the executor saves them for its kernels to reuse.
    digests: DigestCache = field(default_factory=DigestCache)


def announce_hashing(folder: str | Path) -> None:
    """Say that a model folder is being hashed, before a wait that can last minutes on a large model:
    when the folder is large, or always under -v; never under -q (its files are not even listed then)."""
    if not log.isEnabledFor(logging.INFO):
        return
    files = [p for p in Path(folder).rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    if size > LARGE_MODEL_BYTES or log.isEnabledFor(logging.DEBUG):
        amount = f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"
        log.info(f"hashing model folder {paths.display(folder)} ({len(files)} files, {amount})...")


def installed_kernels() -> dict[str, str]:
    """The kernels this gate can start: those registered, and the main kernel, which the gate
    provides for its own interpreter when a plain pip install registered none (kit.run.mainkernel)."""
    provide_main_kernel()
    return registered_kernels()


def kernel_install_hint(name: str, backend: str | None = None) -> str:
    """How to install a missing kernel, in one line: the main kernel's ipykernel command, a backend environment's
    own install, or registering a release's kernel from the environment that holds it."""
    if name == paths.MAIN_KERNEL:
        return f"install it with: {sys.executable} -m ipykernel install --sys-prefix --name {name}"
    info = registry.registry().get(backend or "")
    # A backend with an environment of its own (Levanter's pins).
    if info is not None and info.kernel != paths.MAIN_KERNEL:
        if name == info.kernel:
            return f"{backend} runs in an environment of its own; install it with: {info.install}"
        return (f"{backend} runs in an environment of its own ({info.install}); register this kernel from the "
                f"environment that holds that release: python -m ipykernel install --prefix {sys.prefix} --name {name}")
    return ("install it into the environment that holds that release: "
            f"python -m ipykernel install --sys-prefix --name {name}")


def check_backends_installed(plan: Plan) -> None:
    """A case that runs in this environment's own kernel needs its backend's engine here: refuse it
    before anything runs, with the line that installs it."""
    for case in plan.cases.values():
        spec = case.spec
        if spec.kernel != paths.MAIN_KERNEL:
            continue  # another environment's kernel: what it holds is checked by starting it
        info = registry.get(spec.backend)
        missing = registry.missing_requirements(info)
        if missing:
            raise BadInput(f"{case.where.backend}: case {spec.name} needs backend "
                           f"{spec.backend}, whose {', '.join(missing)} this environment lacks; "
                           f"install it with: {info.install}")


def kernel_rows(descriptors: Sequence[Outline]) -> list[dict]:
    """Each kernel the descriptors' cases need: which cases, whether installed, how to install it."""
    installed = installed_kernels()
    rows: dict[str, dict] = {}
    for outline in descriptors:
        for name, case in outline.cases.items():  # outlines: no golden is chosen, none can refuse a listing
            kernel = case.kernel
            row = rows.setdefault(kernel, {"kernel": kernel, "cases": [], "installed": kernel in installed,
                                           "location": _location(kernel, installed),
                                           "hint": kernel_install_hint(kernel, case.backend)})
            row["cases"].append(f"{outline.name}:{name}")
    return list(rows.values())


def _location(kernel: str, installed: dict[str, str]) -> str | None:
    provided = provide_main_kernel()
    if provided is not None and provided.name == kernel:
        return provided.describe()  # its folder is temporary: naming it would point at nothing later
    return installed.get(kernel)


def missing_kernel(case: CasePlan) -> str:
    """Where a missing kernel is named: the release's `kernel` key when a release chose it, else the case."""
    spec = case.spec
    if spec.release:
        key = ("releases", spec.release["name"], "backends", spec.backend, "kernel")
        return f"{case.release_kernel_where}: {'.'.join(key)}: kernel {spec.kernel!r} is not installed; "
    return (f"{case.where.case}: case {spec.name} needs kernel {spec.kernel!r}, "
            "which is not installed; ")


def check_inputs(plan: Plan) -> Inputs:
    """Check every input of a gate before any kernel starts: the backends installed, the fixture, every golden
    of every entry (each runtime's, not only this host's) against the fixture, the model folders against their
    pinned digests, and per case its kernel, notebook, buckets, prompts, top_n, options, decode steps and
    calibration. A bad input found here is one BadInput line naming what and where, in seconds; found inside a
    case it would cost a kernel and an engine load, and read as that case's error instead of the descriptor's.
    Returns what it read (Inputs), so the run does not read it again."""
    check_backends_installed(plan)
    fixture = load_fixture(plan.fixture)
    goldens, by_path = {}, {}
    for entry in plan.goldens.values():
        listed = []
        for path in entry.files:  # every runtime's golden of an entry, not only this host's
            golden = load_golden(path)
            if golden.kind != entry.kind:
                raise BadInput(f"{entry.where}: goldens.{entry.name} names {paths.display(path)}, "
                               f"which is a {golden.kind} golden")
            check_golden_matches_fixture(golden, fixture)
            by_path[str(path)] = golden
            listed.append(golden)
        of_golden(entry.kind).check_listed(entry, listed, registry.golden_runtime)
    goldens = used_goldens(plan, by_path)
    digests = DigestCache()  # empty: every gate reads every model byte once, here
    announce_hashing(plan.model.path)
    model_digest = check_model_digest(plan.model.path, plan.model.digest, plan.model.where, digests)
    models: dict[str, str] = {}
    for name, pin in plan.models.items():  # other model folders, each held to its own pinned digest
        announce_hashing(pin.path)
        models[name] = check_model_digest(pin.path, pin.digest, pin.where, digests)
    kernels = installed_kernels()
    for case in plan.cases.values():
        spec, where = case.spec, case.where.case
        if spec.kernel not in kernels:
            raise BadInput(missing_kernel(case) + kernel_install_hint(spec.kernel, spec.backend))
        if not Path(spec.notebook).is_file():
            hint = "" if paths.NOTEBOOKS.is_dir() else (
                "; this installation has no embedded notebooks: reinstall parity-kit from a complete wheel")
            raise BadInput(f"{where}: case {spec.name}: notebook {spec.notebook} does not exist{hint}")
        check_case_notebook(spec, where)  # the parameters the gate injects, and its option parameters
        if lacked(spec) not in (None, CALIBRATION, POWER):
            continue  # no golden holds here: recorded as its own outcome when the run starts, nothing to check
        # A case without a record (or a power record) of this host's hardware is checked all the same: every record
        # it lists must fit it wherever it runs, and its golden must fit the fixture.
        judged = judged_by(spec)
        if isinstance(judged, InKernelReference):  # no golden: what it is compared with is its own model folder
            judged.check_case(spec, case.where.reference, fixture, digests)
            continue
        golden = by_path[spec.golden_path]
        if spec.top_n < golden.top_k:
            raise BadInput(f"{where}: case {spec.name}: top_n {spec.top_n} is below the golden's top_k {golden.top_k}")
        known = {str(b) for b in fixture.buckets}
        attention = spec.options.get("attention")
        per_bucket = attention if isinstance(attention, dict) else {}  # levanter's; jax's is one name
        unknown_b = [k for k in [*spec.bucket_bounds, *per_bucket] if k not in known] + [
            str(b) for b in spec.buckets or [] if str(b) not in known]
        if unknown_b:
            raise BadInput(f"{where}: case {spec.name}: bucket {unknown_b[0]} is not in the fixture "
                           f"(buckets: {', '.join(map(str, fixture.buckets))})")
        unknown_p = sorted(set(spec.prompt_ids or []) - set(fixture.ids))
        if unknown_p:
            raise BadInput(f"{where}: case {spec.name}: prompt {unknown_p[0]!r} is not in the fixture")
        selected = fixture.select(spec.prompt_ids, spec.buckets)
        if not selected:
            raise BadInput(f"{where}: case {spec.name} selects no prompt of the fixture")
        unselected = sorted(set(spec.repeat_prompts or []) - {p.id for p in selected})
        if unselected:
            raise BadInput(f"{case.where.repeat_prompts}: case {spec.name}: repeat prompt "
                           f"{unselected[0]!r} is not among the prompts this case scores")
        check_fits_model(f"{where}: case {spec.name}: ", spec.model_path, golden, selected)
        problem = case_schemas()[spec.backend].model_problem(spec.options, spec.model_path)
        if problem:  # options the model cannot run with (e.g. a head count a tensor-parallel split must divide)
            raise BadInput(f"{where}: case {spec.name}: {problem}")
        if spec.decode:
            at = f"{case.where.decode}: "
            check_decode_golden(golden, spec.decode, spec.name, at)
            check_continuations_fit(((p.id, p.n_tokens) for p in selected), spec.decode,
                                    model_limits(spec.model_path), spec.model_path, f"{at}case {spec.name}: ")
        if spec.calibration is not None:
            model = case.outline.model
            digest = models[model] if model is not None else model_digest
            CALIBRATION.check_case(spec, case.where.calibration, [r.reference() for r in case.records],
                                   fixture.sha256, golden.sha256, digest, {p.id: p.bucket for p in selected})
    return Inputs(fixture, goldens, model_digest, models, digests)


def used_goldens(plan: Plan, by_path: dict[str, Golden]) -> dict[str, Golden]:
    """The goldens this run's cases are judged against, by [goldens] entry (an exact entry whose cases chose
    several, one per runtime, names each file after the entry)."""
    used = {spec.golden_path for spec in plan.specs if spec.golden_path}
    out: dict[str, Golden] = {}
    for name, entry in plan.goldens.items():
        chosen = [p for p in map(str, entry.files) if p in used]
        for path in chosen:
            out[name if len(chosen) == 1 else f"{name} ({Path(path).name})"] = by_path[path]
    return out


def check_fits_model(prefix: str, model: str, golden: Golden, prompts: Sequence[Prompt]) -> None:
    """The case's model can take what the case feeds it and the golden names only tokens it has:
    otherwise the backend is blamed for the input (or a truncated prompt passes)."""
    limits = model_limits(model)
    check_prompts_fit(((p.id, p.n_tokens) for p in prompts), limits, model, prefix)
    check_prompt_tokens(((p.id, p.prompt_token_ids) for p in prompts), limits, model, prefix)
    if limits is not None and limits.vocab_size is not None:
        check_golden_vocabulary(golden, limits.vocab_size, model, limits.where("vocab_size"))
