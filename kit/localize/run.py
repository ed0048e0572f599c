"""`parity-kit localize DESCRIPTOR CASE`: name the first layer and sublayer where a failing candidate diverges.

The case is run first, in this process, on the candidate's weights (``--model``; the case's own model
unless given), so that only prompts it fails are localized: a named prompt that passes is refused, and
without ``--prompt`` the worst failing prompts are taken. Their residual streams are then compared with the
float32 reference's against a clean run's (kit.case.localize, kit.core.noise.localize), written to
``localize.json``, and shown by ``localize.ipynb`` (papermill, in the main kernel): the per-layer curve
beside the clean one, the named layer marked, and the verdict line.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Sequence

from kit.backends import registry
from kit.case.interpreter import kernel_python, run_case_fresh
from kit.case.localize import backends_text, curves, in_own_kernel, localizable_here, reference_options, refusal
from kit.case.runner import run_case as run_here
from kit.core.records import paths, rundir
from kit.core.errors import BadInput
from kit.core.records.jsonio import write_json
from kit.core.noise.localize import FLOOR, K, earliest, verdict_line
from kit.core.records.records import CaseResult
from kit.core.records.results import now_iso
from kit.core.model.faultcopy import on_model
from kit.core.records.spec import CaseSpec
from kit.descriptor.load import LoadedDescriptor, load_descriptor
from kit.descriptor.plan import outline, resolve
from kit.localize.candidate import check_candidate
from kit.run import lifecycle
from kit.run.notebook import run_and_render

LOCALIZE_NOTEBOOK = paths.NOTEBOOKS / "localize.ipynb"
RESULT = rundir.LOCALIZE
MAX_PROMPTS = 2  # without --prompt: the worst failing prompts; one fault shows in each, so a few suffice


@dataclass
class LocalizeRun:
    out: Path
    verdict: str
    notebook_error: str | None


def localize_dir(case: str) -> Path:
    """Where a localize of ``case`` goes when no --out is given: a new folder under runs/."""
    return rundir.new_run_dir("localize", case)


def case_spec(desc: LoadedDescriptor, case: str) -> CaseSpec:
    """The case, refused unless its backend can expose activations (naming the cases that can)."""
    stated = outline(desc)
    if case not in stated.cases:
        raise BadInput(stated.no_case(case))
    spec = resolve(desc, [case]).cases[case].spec
    able_backends = localizable_here()
    if spec.backend not in able_backends:
        dtype = spec.options.get("dtype")
        able = [s for s in resolve(desc).specs if s.backend in able_backends]
        alike = [s.name for s in able if s.options.get("dtype") == dtype] or [s.name for s in able]
        where = f" (in this descriptor: {', '.join(alike)})" if alike else ""
        raise BadInput(f"case {case} runs on {spec.backend}, which exposes no per-layer activations: localize on "
                       f"{backends_text()} instead, with the same dtype{where}")
    why = refusal(spec)
    if why:
        raise BadInput(f"case {case} {why}")
    return spec


def failing_prompts(spec: CaseSpec, prompt_ids: Sequence[str] | None) -> tuple[CaseResult, list[str]]:
    """The case's verdict on the candidate and the prompts to localize; a named prompt that passes, or a
    case that fails no prompt, is refused: there is nothing to localize."""
    chosen = [p.id for p in _fixture(spec).select(spec.prompt_ids, spec.buckets)]
    run_case = run_here
    if in_own_kernel(spec.backend):  # its engine is not importable here: the case runs in its kernel's Python
        python, environ = kernel_python(spec.kernel, spec.name)
        run_case = partial(run_case_fresh, python=python, environ=environ)
    if prompt_ids:
        unknown = [p for p in prompt_ids if p not in chosen]
        if unknown:
            raise BadInput(f"case {spec.name} scores no prompt {unknown[0]!r}")
        # The drift test is a verdict on every prompt together: one prompt's localization needs its own scores.
        result = run_case(dataclasses.replace(spec, prompt_ids=list(prompt_ids), drift=False))
        for score in result.prompts:
            if score.passed:
                raise BadInput(f"prompt {score.id} passes case {spec.name} ({_error(score)}): nothing to localize")
        return result, list(prompt_ids)
    result = run_case(spec)
    failed = sorted((s for s in result.prompts if not s.passed), key=lambda s: -s.max_probability_error)
    if not failed:
        worst = max(result.prompts, key=lambda s: s.max_probability_error)
        drift = " (only its drift test fails: no single prompt to localize)" if result.failures else ""
        raise BadInput(f"case {spec.name} passes every prompt (largest error {worst.max_probability_error:.4g} on "
                       f"{worst.id}, bound {worst.bound}){drift}: nothing to localize")
    return result, [s.id for s in failed[:MAX_PROMPTS]]


def localize_case(descriptor: str | Path, case: str, prompt_ids: Sequence[str] | None = None,
                  model: str | Path | None = None, out: str | Path | None = None, k: float = K,
                  command: Sequence[str] | None = None, notebook: bool = True) -> LocalizeRun:
    """`parity-kit localize`: run the case on the candidate (``model``, else the case's own), take its failing
    prompts (or ``prompt_ids``), and compare each prompt's residual stream after the embeddings and after every
    block's attention and MLP across the float32 reference, a clean run of the case's settings and the
    candidate; the verdict names the first point where the candidate leaves ``k`` times the clean run's
    difference. Writes localize.json (and, with ``notebook``, localize.ipynb) to a fresh ``out``. A failing gate
    says that a case is wrong; this says where in the model it first goes wrong, which is where a fix starts.
    Bad input (an unknown case, a backend without activations, a used --out) is refused before anything runs."""
    t_start = time.perf_counter()
    desc = load_descriptor(descriptor)
    spec = case_spec(desc, case)
    if model is not None:
        check_candidate(spec, Path(model), _prompts(spec, prompt_ids))
    out = Path(out or localize_dir(case))
    lifecycle.claimable(out, "--out", "localize", command)  # refused before anything runs; claimed with a verdict
    candidate_model = str(Path(model).resolve()) if model else spec.model_path
    candidate_spec = on_model(spec, candidate_model) if model else spec
    t0 = time.perf_counter()
    result, ids = failing_prompts(candidate_spec, prompt_ids)
    case_s = time.perf_counter() - t0
    fixture = _fixture(spec)
    prompts = [p for p in fixture.select(ids) if p.id in ids]
    prompts.sort(key=lambda p: ids.index(p.id))
    found = curves(spec, candidate_model, prompts, k=k)
    first = earliest(found.localizations)
    verdict = verdict_line(first.first.point if first and first.first else None, k)
    scores = {s.id: s for s in result.prompts}
    out_dir = lifecycle.claim(out, "--out", "localize", command)
    with lifecycle.owned(out_dir, command, "localize"):
        write_json(out_dir / RESULT, {
            "format": "parity-kit-localize/1", "descriptor": str(desc.path), "case": spec.name, "backend": spec.backend,
            "options": dict(spec.options), "model": candidate_model, "case_model": spec.model_path,
            "same_model": found.same_model, "command": list(command or []), "finished_at": now_iso(),
            "k": k, "floor": FLOOR,
            "reference": f"{registry.REFERENCE} float32 (the golden's settings) on the case's own model",
            "reference_options": reference_options(spec),
            "clean": "the case's own settings on the case's own model",
            "prompts": [{"id": i, "max_probability_error": scores[i].max_probability_error, "bound": scores[i].bound,
                         "failures": scores[i].failures} for i in ids],
            "verdict": verdict, "first_divergent": first.to_dict()["first_divergent"] if first else None,
            "first_prompt": first.prompt_id if first else None,
            "localizations": [loc.to_dict() for loc in found.localizations],
            "seconds": {"case": round(case_s, 3), **found.seconds, "total": round(time.perf_counter() - t_start, 3)},
        })
        error = None
        if notebook:
            # A view of localize.json, written above: what fails in it is one line, never an exception.
            error = run_and_render(LOCALIZE_NOTEBOOK, out_dir / "localize.ipynb",
                                   {"localize_json": str(out_dir / RESULT)}, 300,
                                   rundir.kernel_log(out_dir, "localize"), html=False).error
    return LocalizeRun(out_dir, verdict, error)


def _prompts(spec: CaseSpec, prompt_ids: Sequence[str] | None) -> list:
    """The prompts the case will run on the candidate: the named ones (those it scores), else all of its own."""
    chosen = _fixture(spec).select(spec.prompt_ids, spec.buckets)
    return [p for p in chosen if p.id in prompt_ids] if prompt_ids else chosen


def _fixture(spec: CaseSpec):
    from kit.core.records.fixture import load_fixture

    return load_fixture(spec.fixture_path)


def _error(score) -> str:
    if score.bound is None:
        return "it matches its exact golden bit for bit"
    return f"error {score.max_probability_error:.4g} under bound {score.bound:g}"
