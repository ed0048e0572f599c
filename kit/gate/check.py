"""`parity-kit check`: the gate's preflight alone, with a line for every check it passed.

A descriptor edited in an editor or a CI step that only prepares a machine wants to know whether a
gate would start, without running a case or writing a run directory. The preflight refuses at its
first failed check (one BadInput line); when it passes, these lines say what it verified.
"""

from __future__ import annotations

from typing import Sequence

from kit.backends import registry
from kit.core.records import paths
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import Plan
from kit.gate.executor import check_run
from kit.gate.executors.interface import DEFAULT
from kit.gate.preflight import Inputs, installed_kernels
from kit.run.devices import Inventory


def run_check(descriptor: str, only: Sequence[str] | None = None, release: str | None = None,
              executor: str = DEFAULT) -> list[str]:
    """The lines of a passed preflight; raises BadInput at the first check that fails. Writes nothing.

    It is the gate's own preflight (``check_run``), executor's resources included, so that check cannot say ok
    for a descriptor the gate refuses (a fraction of a GPU, more GPUs than the node has)."""
    checked = check_run(load_descriptor(descriptor), only, executor, release)
    return passed_lines(checked.plan, checked.inputs, checked.gpus)


def passed_lines(plan: Plan, inputs: Inputs, gpus: Inventory | None = None) -> list[str]:
    """One line per check the preflight passed (descriptor, backends, fixture, goldens, model digests, kernels,
    notebooks, GPUs): what `check` prints, so a CI step shows what was checked, not only ok."""
    specs = plan.specs
    lines = [f"descriptor {paths.display(plan.path)}: valid, {len(specs)} cases"
             + (f" ({', '.join(s.name for s in specs)})" if specs else "")]
    for backend in sorted({s.backend for s in specs if s.kernel == paths.MAIN_KERNEL}):
        lines.append(f"backend {backend}: installed here ({registry.get(backend).summary})")
    fx = inputs.fixture
    lines.append(f"fixture {paths.display(fx.path)}: sha256 {fx.sha256[:16]}... verified, {len(fx.prompts)} prompts "
                 f"in buckets {', '.join(map(str, fx.buckets))}")
    for name, golden in inputs.goldens.items():
        lines.append(f"golden {name} {paths.display(golden.path)}: {golden.kind}, top-{golden.top_k}, "
                     "matches the fixture")
    lines.append(f"model {paths.display(plan.model.path)}: digest "
                 f"{inputs.model_digest[:16]}... as pinned")
    for name, digest in inputs.models.items():
        lines.append(f"model {name} {paths.display(plan.models[name].path)}: digest "
                     f"{digest[:16]}... as pinned")
    kernels = installed_kernels()
    for kernel in sorted({s.kernel for s in specs}):
        users = [s.name for s in specs if s.kernel == kernel]
        lines.append(f"kernel {kernel}: installed ({kernels[kernel]}); cases: {', '.join(users)}")
    for notebook in sorted({s.notebook for s in specs}):
        lines.append(f"notebook {paths.display(notebook)}: present")
    if gpus is not None:
        asked = [f"{c.name} ({c.resources.num_gpus:g})" for c in plan.cases.values() if c.resources.num_gpus]
        lines.append(f"gpus from {gpus.source}: {gpus.describe()}; every case fits: {', '.join(asked)}")
    for spec in specs:
        if spec.no_baseline:  # the gate would start, and record this case as not judged here
            lines.append(f"case {spec.name}: not judged here: {spec.no_baseline.text}")
            continue
        chosen = inputs.fixture.select(spec.prompt_ids, spec.buckets)
        decode = f", decode {spec.decode} steps" if spec.decode else ""
        lines.append(f"case {spec.name}: {len(chosen)} prompts, top_n {spec.top_n}, golden {spec.golden_kind}{decode}")
    return lines
