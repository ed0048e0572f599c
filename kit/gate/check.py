"""`parity-kit check`: the gate's preflight alone, with a line for every check it passed.

A descriptor edited in an editor or a CI step that only prepares a machine wants to know whether a
gate would start, without running a case or writing a run directory. The preflight refuses at its
first failed check (one BadInput line); when it passes, these lines say what it verified.
"""

from __future__ import annotations

from typing import Sequence

from kit.backends import registry
from kit.core import paths
from kit.core.spec import CaseSpec
from kit.descriptor.load import LoadedDescriptor, load_descriptor
from kit.gate.preflight import Inputs, check_inputs, installed_kernels


def run_check(descriptor: str, only: Sequence[str] | None = None, release: str | None = None) -> list[str]:
    """The lines of a passed preflight; raises BadInput at the first check that fails. Writes nothing."""
    desc = load_descriptor(descriptor)
    specs = desc.case_specs(list(only) if only else None, release)
    return passed_lines(desc, specs, check_inputs(desc, specs))


def passed_lines(desc: LoadedDescriptor, specs: Sequence[CaseSpec], inputs: Inputs) -> list[str]:
    lines = [f"descriptor {paths.display(desc.path)}: valid, {len(specs)} cases"
             + (f" ({', '.join(s.name for s in specs)})" if specs else "")]
    for backend in sorted({s.backend for s in specs if s.kernel == paths.MAIN_KERNEL}):
        lines.append(f"backend {backend}: installed here ({registry.get(backend).summary})")
    fx = inputs.fixture
    lines.append(f"fixture {paths.display(fx.path)}: sha256 {fx.sha256[:16]}... verified, {len(fx.prompts)} prompts "
                 f"in buckets {', '.join(map(str, fx.buckets))}")
    for name, golden in inputs.goldens.items():
        lines.append(f"golden {name} {paths.display(golden.path)}: {golden.kind}, top-{golden.top_k}, "
                     "matches the fixture")
    lines.append(f"model {paths.display(desc.resolve(desc.doc.model.path))}: digest "
                 f"{inputs.model_digest[:16]}... as pinned")
    for name, digest in inputs.models.items():
        lines.append(f"model {name} {paths.display(desc.resolve(desc.doc.models[name].path))}: digest "
                     f"{digest[:16]}... as pinned")
    kernels = installed_kernels()
    for kernel in sorted({s.kernel for s in specs}):
        users = [s.name for s in specs if s.kernel == kernel]
        lines.append(f"kernel {kernel}: installed ({kernels[kernel]}); cases: {', '.join(users)}")
    for notebook in sorted({s.notebook for s in specs}):
        lines.append(f"notebook {paths.display(notebook)}: present")
    for spec in specs:
        chosen = inputs.fixture.select(spec.prompt_ids, spec.buckets)
        decode = f", decode {spec.decode} steps" if spec.decode else ""
        lines.append(f"case {spec.name}: {len(chosen)} prompts, top_n {spec.top_n}, golden {spec.golden_kind}{decode}")
    return lines
