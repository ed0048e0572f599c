"""One gate case, inside its kernel: check the inputs, observe with the backend, judge.

The case notebooks are thin wrappers around ``run_case``; the benchmarks call it
in-process to measure what the notebook execution costs on top.
"""

from __future__ import annotations

import time
from pathlib import Path

from kit import paths
from kit.backends import open_backend
from kit.errors import BadInput
from kit.fixture import load_fixture
from kit.golden import check_golden_matches_fixture, hardware, load_golden
from kit.modeldigest import check_model_digest
from kit.records import FAILED, PASSED, CaseResult
from kit.results import now_iso, save_case_result
from kit.scoring import bound_for, score_prompt
from kit.spec import CaseSpec


def resolve_spec(spec: dict | None, descriptor: str, case: str) -> CaseSpec:
    """The executor injects ``spec``; run by hand (JupyterLab), the case is read from the descriptor."""
    if spec:
        return CaseSpec.from_dict(spec)
    try:
        from kit.descriptor import load_descriptor  # only interactive runs parse descriptors in the kernel
    except ImportError:  # a backend kernel on pydantic 1 (Levanter's): the main environment parses it
        return _spec_from_main_environment(descriptor, case)
    return load_descriptor(descriptor).case_specs([case])[0]


def _spec_from_main_environment(descriptor: str, case: str) -> CaseSpec:
    import json
    import subprocess

    python = paths.PROJECT_ROOT / ".venv" / "bin" / "python"
    if not python.is_file():
        raise BadInput(f"this kernel cannot parse descriptor {descriptor}, and the main environment "
                       f"{python.parent.parent}, which can, does not exist: run `make env`, or pass `spec`")
    proc = subprocess.run([str(python), "-m", "kit.cli", "spec", str(descriptor), case],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BadInput(proc.stderr.strip().removeprefix("parity-kit: bad input: "))
    return CaseSpec.from_dict(json.loads(proc.stdout))


def run_case(spec: CaseSpec) -> CaseResult:
    started, t0 = now_iso(), time.perf_counter()
    fixture = load_fixture(spec.fixture_path)
    golden = load_golden(spec.golden_path)
    check_golden_matches_fixture(golden, fixture)
    model_digest = check_model_digest(spec.model_path, spec.model_digest, f"case {spec.name}")
    notes = []
    if golden.model_digest != model_digest:
        notes.append(f"golden {Path(golden.path).name} was made from model {golden.model_digest[:12]}, "
                     f"this case scores model {model_digest[:12]}")
    host = hardware()
    if golden.kind == "exact" and golden.provenance.get("hardware") != host:
        notes.append(f"exact golden {Path(golden.path).name} was made on {golden.provenance.get('hardware')}, "
                     f"this host is {host}: bit-exact goldens hold only where they were made")
    prompts = fixture.select(spec.prompt_ids, spec.buckets)

    backend = open_backend(spec)
    try:
        t_score = time.perf_counter()
        observations = backend.observe(prompts, spec.top_n)
        scoring_s = time.perf_counter() - t_score
        release = backend.release()
        details = backend.details()
    finally:
        backend.close()

    exact = golden.kind == "exact"
    scores = [
        score_prompt(p.id, p.bucket, golden.cases[p.id][: golden.top_k], obs,
                     bound_for(p.bucket, spec.bound, spec.bucket_bounds), exact=exact)
        for p, obs in zip(prompts, observations)
    ]
    failures = [f for s in scores for f in s.failures]
    return CaseResult(
        case=spec.name, backend=spec.backend, status=FAILED if failures else PASSED,
        golden_kind=golden.kind, golden_path=str(golden.path), bound=spec.bound,
        bucket_bounds=dict(spec.bucket_bounds), options=dict(spec.options), release=release, details=details,
        fixture_sha256=fixture.sha256, model_digest=model_digest, golden_sha256=golden.sha256,
        inputs_digest=spec.inputs_digest(fixture.sha256, golden.sha256),
        started_at=started, finished_at=now_iso(), duration_s=time.perf_counter() - t0, scoring_s=scoring_s,
        prompts=scores, failures=failures, notes=notes,
    )


def save(result: CaseResult, path: str | None) -> None:
    """Write the case result where the executor asked for it (nowhere when run by hand)."""
    if path:
        save_case_result(result, path)
