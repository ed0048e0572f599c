"""One gate case, inside its kernel: check the inputs, observe with the backend, judge.

The case notebooks are thin wrappers around ``run_case``; the benchmarks call it
in-process to measure what the notebook execution costs on top.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Mapping

from kit.backends import registry
from kit.backends.base import Backend, can_decode
from kit.backends.registry import open_backend
from kit.case import interpreter
from kit.core.records import contract, paths, rundir
from kit.core.verdict.caseevidence import CaseEvidence
from kit.core.verdict.judge import Scored, drift_decision, drift_skipped
from kit.core.noise.calibration import check_case_inputs, hardware_change
from kit.core.verdict.coverage import prompt_mismatch
from kit.core.verdict.decode import check_continuations_fit, check_decode_golden
from kit.core.errors import BadInput, NoBaselineHere, ParityKitError
from kit.core.records.fixture import Prompt, load_fixture
from kit.core.baselines.golden import (Golden, check_golden_matches_fixture, golden_continuations, golden_tops,
                                       load_golden, provenance, reference_document)
from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes
from kit.core.model.modelconfig import model_limits
from kit.core.model.modeldigest import check_model_digest
from kit.core.records.observations import continuation_problem, observation_problem
from kit.core.records.phases import PhaseClock
from kit.core.records.progress import BucketDone, ProgressWriter
from kit.core.records.records import CaseResult, Continuation, Observation
from kit.core.records.results import now_iso, save_case_result
from kit.core.records.spec import CaseSpec
from kit.core.records.records import GoldenMode


def resolve_spec(spec: dict | None, descriptor: str | None, case: str, **option_overrides) -> CaseSpec:
    """The executor injects ``spec``, with the notebook's option parameters (``option_overrides``, None: as the
    descriptor says) applied over it: the gate's preflight held them to the backend's schema
    (kit.gate.parameters). Run by hand (JupyterLab), the case is read from the descriptor (a path, or the name of
    an embedded one: kit.core.records.paths.descriptor_path, never a path relative to the kernel's folder), its option
    parameters applied and checked there.

    Parsing a descriptor and checking options take pydantic 2, which a kernel need not have (Levanter's runs
    pydantic 1), so the kernel asks the main environment's ``parity-kit spec`` for the resolved case instead of
    importing the descriptor layer: one path for every kernel, and the import rules stay whole."""
    if spec:
        return with_options(CaseSpec.from_dict(spec), **option_overrides)
    return _spec_from_main_environment(str(paths.descriptor_path(descriptor)), case,
                                       {k: v for k, v in option_overrides.items() if v is not None})


def _spec_from_main_environment(descriptor: str, case: str, overrides: dict | None = None) -> CaseSpec:
    import json

    main = interpreter.main_python()
    extra = ["--options", json.dumps(overrides)] if overrides else []
    proc = interpreter.run_python(main, ["-m", "kit.cli", "spec", str(descriptor), case, *extra])
    if proc.returncode != 0:
        reason = interpreter.last_line(proc.stderr, f"exit {proc.returncode}")
        raise BadInput(f"cannot resolve case {case} of {descriptor} with {main}: "
                       f"{reason.removeprefix('parity-kit: bad input: ')} (start JupyterLab with `parity-kit lab`, "
                       "or pass `spec`)")
    return CaseSpec.from_dict(json.loads(proc.stdout))


def with_options(spec: CaseSpec, **overrides) -> CaseSpec:
    """The case with backend options overridden by notebook parameters (None: as the descriptor says), as the
    gate's preflight checked them."""
    given = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(spec, options={**spec.options, **given}) if given else spec


def run_case(spec: CaseSpec, reference_out: str | None = None, evidence_out: str | None = None) -> CaseResult:
    """Score one case and judge it. An exact case with a ``reference`` first computes its reference in this
    kernel (written to ``reference_out`` as an exact golden, when given, so the verdict's evidence stays); what
    the verdict was judged from is written to ``evidence_out`` (kit.core.verdict.caseevidence), when given."""
    if spec.no_baseline:
        raise BadInput(f"case {spec.name}: {spec.no_baseline.text}")
    started, t0, clock = now_iso(), time.perf_counter(), PhaseClock()
    fixture = load_fixture(spec.fixture_path)
    model_digest = check_model_digest(spec.model_path, spec.model_digest, f"case {spec.name}")
    prompts = fixture.select(spec.prompt_ids, spec.buckets)
    notes = []
    if spec.reference is not None:
        golden = reference_golden(spec, fixture, prompts, reference_out)
        notes.append(f"compared bit for bit with {spec.reference['model']} ({Path(spec.reference['model_path']).name}, "
                     f"options {_changed_options(spec)}) computed by the same backend in this kernel")
    else:
        golden = load_golden(spec.golden_path)
        check_golden_matches_fixture(golden, fixture)
        if golden.model_digest != model_digest:
            notes.append(f"golden {Path(golden.path).name} was made from model {golden.model_digest[:12]}, "
                         f"this case scores model {model_digest[:12]}")
    clock.mark("reference")
    if spec.decode:  # refused before the engine starts, as the preflight refuses it before the gate does
        check_decode_golden(golden, spec.decode, spec.name)
        check_continuations_fit(((p.id, p.n_tokens) for p in prompts), spec.decode, model_limits(spec.model_path),
                                spec.model_path, f"case {spec.name}: ")

    repeated = [p for p in prompts if spec.repeat_prompts is None or p.id in spec.repeat_prompts]
    runs: dict[str, list[Observation]] = {p.id: [] for p in repeated}
    elsewhere = other_hardware(spec) if spec.calibration is not None else None  # before the engine starts
    clock.mark("inputs")
    backend = open_backend(spec)
    clock.mark("model load")
    try:
        t_score = time.perf_counter()
        observations, details = observe_by_bucket(backend, prompts, spec.top_n, ProgressWriter(), spec.backend,
                                                  clock)
        scoring_s = time.perf_counter() - t_score
        release = backend.release()
        for obs in observations:
            if obs.prompt_id in runs:
                runs[obs.prompt_id].append(obs)
        # Only the phases this case has are marked: the timeline holds what a case did, not what took time.
        if spec.repeats > 1:
            _observe_again(backend, spec, repeated, runs, spec.repeats - 1)
            clock.mark("repeats")
        continuations, decode_s = continue_prompts(backend, spec, prompts)
        if spec.decode:
            clock.mark("decode")
    finally:
        backend.close()
    for _ in range(spec.repeat_launches - 1):
        backend = open_backend(spec)
        try:
            _observe_again(backend, spec, repeated, runs, spec.repeats)
        finally:
            backend.close()
    clock.mark("engine close, relaunches")
    check_distributions(spec, prompts, [*observations, *(o for r in runs.values() for o in r)], continuations)

    exact = golden.kind == GoldenMode.EXACT
    if spec.calibration is not None:
        problem = check_case_inputs(spec.calibration, spec, fixture_sha256=fixture.sha256,
                                    golden_sha256=golden.sha256, model_digest=model_digest,
                                    prompts={p.id: p.bucket for p in prompts})
        if problem:
            raise BadInput(f"case {spec.name}: calibration {spec.calibration.get('path')} does not fit: {problem}")
        if elsewhere:
            notes.append(elsewhere)
    skipped = drift_skipped(spec, elsewhere is not None)
    evidence = CaseEvidence(
        spec=spec, prompts=[Scored(p.id, p.bucket, p.n_tokens) for p in prompts], exact=exact,
        golden_sha256=golden.sha256, golden_tops=golden_tops(golden, prompts),
        golden_continuations=golden_continuations(golden, prompts, spec.decode),
        observations=observations, continuations=continuations, runs=runs, drift=drift_decision(spec, skipped))
    judged = evidence.judged()
    if evidence_out:
        evidence.save(evidence_out)
    if decode_s is not None:
        details = {**details, "decode_s": round(decode_s, 3)}
    clock.mark("compare")
    return CaseResult(
        case=spec.name, backend=spec.backend, **judged.result_fields(spec, golden.kind, skipped),
        golden_path=str(golden.path), options=dict(spec.options), release=release, details=details,
        fixture_sha256=fixture.sha256, model_digest=model_digest, golden_sha256=golden.sha256,
        inputs_digest=spec.inputs_digest(fixture.sha256, "" if spec.reference is not None else golden.sha256),
        started_at=started, finished_at=now_iso(), duration_s=time.perf_counter() - t0, scoring_s=scoring_s,
        notes=notes, phases=clock.seconds, kernel_span=clock.span(),
    )


def reference_golden(spec: CaseSpec, fixture, prompts: list[Prompt], out: str | None) -> Golden:
    """The exact reference of a case with ``reference``: the same backend, in this kernel, on the reference's
    model folder with its options, over the case's prompts; kept as an exact golden beside the case result."""
    ref = spec.reference or {}
    digest = check_model_digest(ref["model_path"], ref["model_digest"], f"case {spec.name}: reference")
    ref_spec = dataclasses.replace(spec, model_path=ref["model_path"], model_digest=digest,
                                   options=dict(ref["options"]), reference=None)
    backend = open_backend(ref_spec)
    try:
        observed = observe_by_bucket(backend, prompts, spec.top_n, ProgressWriter(), spec.backend)[0]
        release = backend.release()
    finally:
        backend.close()
    prov = provenance(spec.backend, release, str(ref["options"].get("dtype", "float32")), "in-kernel reference",
                      [f"parity-kit case {spec.name} (reference: {ref['model']})"],
                      registry.get(spec.backend).runtime_key(ref["options"]))
    data = canonical_bytes(reference_document(fixture, digest, spec.top_n, observed, prov))
    path = Path(out) if out else Path(f"{spec.name}{rundir.CASE_REFERENCE}")
    if out:
        atomic_write_bytes(path, data)
    return Golden(path, sha256_bytes(data), GoldenMode.EXACT, fixture.sha256, digest, spec.top_n, prov,
                  {o.prompt_id: tuple(o.top_logprobs[: spec.top_n]) for o in observed})


def _changed_options(spec: CaseSpec) -> str:
    ref = (spec.reference or {}).get("options", {})
    changed = {k: v for k, v in ref.items() if spec.options.get(k) != v}
    return ", ".join(f"{k}={v}" for k, v in sorted(changed.items())) or "the same"


def continue_prompts(backend: Backend, spec: CaseSpec,
                     prompts: list[Prompt]) -> tuple[dict[str, Continuation], float | None]:
    """The backend's continuations by prompt id, and the seconds they took (none without ``decode``)."""
    if not spec.decode:
        return {}, None
    if not can_decode(backend):  # the registry said it decodes; its runtime disagrees
        raise BackendMismatch(f"backend {spec.backend} has no decode method, which case {spec.name} "
                              f"(decode = {spec.decode}) needs")
    t0 = time.perf_counter()
    got = list(backend.decode(prompts, spec.decode, spec.top_n))
    wrong = prompt_mismatch([p.id for p in prompts], [c.prompt_id for c in got])
    if wrong:
        raise BackendMismatch(f"backend {spec.backend} returned {len(got)} continuations for the "
                              f"{len(prompts)} prompts of case {spec.name}: {wrong}")
    return {c.prompt_id: c for c in got}, time.perf_counter() - t0


def other_hardware(spec: CaseSpec, here: Mapping[str, str] | None = None) -> str | None:
    """None when the calibration measured this very class of hardware (CPU instruction-set level, or GPU);
    else a note, when the case accepts the difference, and NoBaselineHere when it does not. The descriptor chose
    the record for the node's hardware; only the kernel knows which GPU it was given (``here``: the accelerator a
    run recorded, to judge that run again)."""
    cal = spec.calibration or {}
    change = hardware_change(cal, spec.options, here)
    if change is None:
        return None
    measured, runs_on = change
    where = str(cal.get("path") or cal.get("sha256"))
    if "hardware" not in cal.get("accept", []):
        raise NoBaselineHere(f"no baseline for this hardware: case {spec.name}'s calibration {where} measured noise "
                             f"on {measured}, this case runs on {runs_on}; make one here with `parity-kit baseline "
                             f"make {paths.display(spec.descriptor)} --case {spec.name} --reason \"...\"`")
    return (f"calibration measured on {measured}, this case runs on {runs_on} (accepted): its bounds apply; its "
            "drift test does not, since the mean error itself moves with the hardware")


class BackendMismatch(ParityKitError):
    """A backend returned observations for other prompts than it was given: a fault in the backend,
    which must end the case as an error rather than a verdict on the prompts it chose to return."""


class InvalidObservation(BackendMismatch):
    """A backend returned what no next-token distribution could be (kit.core.records.observations): its fault, so
    the case ends as an error, as for observations of the wrong prompts, and is never scored."""


def check_distributions(spec: CaseSpec, prompts: list[Prompt], observed: list[Observation],
                        continuations: dict[str, Continuation]) -> None:
    """Every observation (repeats included) and continuation held to being a distribution of the case's
    model, before anything is scored; the first that is not ends the case naming its prompt."""
    limits = model_limits(spec.model_path)
    vocab = limits.vocab_size if limits is not None else None
    lengths = {p.id: p.n_tokens for p in prompts}
    for obs in observed:
        _refuse_invalid(spec, obs.prompt_id, observation_problem(obs, lengths[obs.prompt_id], vocab))
    for cont in continuations.values():
        _refuse_invalid(spec, cont.prompt_id, continuation_problem(cont, vocab))


def _refuse_invalid(spec: CaseSpec, prompt_id: str, problem: str | None) -> None:
    if problem:
        raise InvalidObservation(f"backend {spec.backend} returned an invalid distribution for prompt {prompt_id}: "
                                 f"{problem}")


def matched(backend_name: str, asked: list[Prompt], observed: list[Observation], what: str) -> list[Observation]:
    """``observed`` in ``asked``'s order, matched by prompt id; refused unless it holds every asked prompt
    exactly once (a backend may return them in any order, never fewer, more or twice)."""
    observed = list(observed)
    wrong = prompt_mismatch([p.id for p in asked], [o.prompt_id for o in observed])
    if wrong:
        raise BackendMismatch(f"backend {backend_name} returned {len(observed)} observations for the "
                              f"{len(asked)} prompts of {what}: {wrong}")
    by_id = {o.prompt_id: o for o in observed}
    return [by_id[p.id] for p in asked]


def observe_by_bucket(backend: Backend, prompts: list[Prompt], top_n: int, progress: ProgressWriter,
                      backend_name: str = "", clock: PhaseClock | None = None) -> tuple[list[Observation], dict]:
    """The observations in ``prompts``' order, one ``observe`` per bucket so that each finished bucket
    can be reported while the case runs, and the backend's details merged over those calls."""
    name = backend_name or type(backend).__name__
    buckets = sorted({p.bucket for p in prompts})
    out: list[Observation | None] = [None] * len(prompts)
    details: dict = {}
    for index, bucket in enumerate(buckets, start=1):
        members = [i for i, p in enumerate(prompts) if p.bucket == bucket]
        asked = [prompts[i] for i in members]
        t0 = time.perf_counter()
        observed = matched(name, asked, backend.observe(asked, top_n), f"bucket {bucket}")
        seconds = time.perf_counter() - t0
        for i, obs in zip(members, observed):
            out[i] = obs
        details = merge_details(details, backend.details())
        progress.bucket_done(BucketDone(bucket, len(members), round(seconds, 3), index, len(buckets)))
        if clock is not None:  # a bucket's first program compiles here: a cold run against a warm one shows it
            clock.mark(f"bucket {bucket}")
    return out, details  # type: ignore[return-value]


def merge_details(before: dict, last: dict) -> dict:
    """A backend's details describe its last ``observe``; over one call per bucket, per-bucket tables
    (dicts) merge and per-call records (lists, e.g. hf's batches) concatenate, in bucket order, which
    is what one call over every bucket records."""
    merged = dict(before)
    for key, value in last.items():
        old = merged.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            merged[key] = merge_details(old, value)
        elif isinstance(old, list) and isinstance(value, list):
            merged[key] = old + value
        else:
            merged[key] = value
    return merged


def _observe_again(backend: Backend, spec: CaseSpec, prompts: list[Prompt],
                   runs: dict[str, list[Observation]], times: int) -> None:
    for _ in range(times):
        for obs in matched(spec.backend, prompts, backend.observe(prompts, spec.top_n), "a repeat"):
            runs[obs.prompt_id].append(obs)



def result_target(result_path: str | None, case: str) -> str | None:
    """Where this kernel writes its case result: ``result_path`` when the executor started the kernel to write
    there (it names the same path in contract.RESULT_PATH_ENV), else nowhere. An executed case notebook keeps
    its injected ``result_path``; opened in JupyterLab and run again it must not write over the result the gate
    recorded there (docs/architecture.md, Data formats), so it says so in one line and writes nothing."""
    if not result_path:
        return None
    started_for = os.environ.get(contract.RESULT_PATH_ENV)
    if started_for and os.path.abspath(started_for) == os.path.abspath(result_path):
        return result_path
    print(f"case {case}: not run by the gate, so its result is not written to {paths.display(result_path)} "
          "(that file keeps what the gate recorded)")
    return None


def save(result: CaseResult, path: str | None) -> None:
    """Write the case result where the executor asked for it (nowhere when run by hand)."""
    target = result_target(path, result.case)
    if target:
        save_case_result(result, target)


def notebook_case(spec: dict | None, descriptor: str | None, case: str, result_path: str | None,
                  **option_overrides) -> CaseResult:
    """Everything a parity notebook does before it shows anything: resolve the case (injected by the
    executor, or read from the descriptor when run by hand), apply the notebook's option parameters,
    score, write the result where the executor expects it (only there, and only for the executor: see
    ``result_target``), and print the verdict for the log."""
    resolved = resolve_spec(spec, descriptor, case, **option_overrides)
    result_path = result_target(result_path, resolved.name)
    reference_out = str(Path(result_path).with_suffix(rundir.CASE_REFERENCE)) if result_path else None
    evidence_out = str(Path(result_path).with_suffix(rundir.CASE_EVIDENCE)) if result_path else None
    result = run_case(resolved, reference_out, evidence_out)
    save(result, result_path)
    counts = result.counts()
    print(f"{result.case}: {result.status}, {counts['failed']} of {counts['prompts']} prompts failed")
    if result.decode:
        print(f"  decode: {result.decode_text}")
    for line in result.failure_messages[:10]:
        print("  " + line)
    return result
