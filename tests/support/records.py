"""Case results built by hand, for the report tests of the unit tier: what a kernel would have
written, without one, so a report's every branch can be reached in milliseconds."""

from __future__ import annotations

from kit.core.records.records import CaseResult, DecodeScore, PromptScore, Status


def prompt_score(id_: str, err: float, bound: float = 0.075, failures: list[str] | None = None,
                 bucket: int = 256) -> PromptScore:
    """One scored prompt; it passed unless ``failures`` names why not."""
    return PromptScore(id=id_, bucket=bucket, n_tokens=200, passed=not failures, bound=bound,
                       max_probability_error=err, top_probability_l1_error=err, kl_shared=0.0,
                       first_rank_agreement=True, golden_top_token=5, golden_top_probability=0.6,
                       backend_top_token=5, backend_top_probability=0.6, winner_gap=0.0, failures=failures or [])


def passed_case(case: str, err: float = 0.01, duration_s: float = 1.5) -> CaseResult:
    return CaseResult(case=case, backend="hf", status=Status.PASSED, bound=0.075, golden_kind="semantic",
                      duration_s=duration_s, prompts=[prompt_score("p-1", err)])


def failed_case(case: str, reasons: dict[str, str], duration_s: float = 2.0) -> CaseResult:
    """A case that failed on each prompt of ``reasons`` (prompt id -> why), in that order."""
    failures = [f"{pid}: {why}" for pid, why in reasons.items()]
    prompts = [prompt_score(pid, 0.5, failures=[line]) for pid, line in zip(reasons, failures)]
    return CaseResult(case=case, backend="hf", status=Status.FAILED, bound=0.075, golden_kind="semantic",
                      duration_s=duration_s, prompts=prompts, failures=failures)


def decode_score(id_: str, step_errors: list[float], bucket: int = 256, failures: list[str] | None = None,
                 **divergence) -> DecodeScore:
    """One prompt's continuation, compared at every step with these errors; it passed unless ``failures`` names
    why not (``divergence``: diverged_at, golden_token, backend_token, accepted, why)."""
    return DecodeScore(id=id_, bucket=bucket, steps=len(step_errors), compared=len(step_errors), passed=not failures,
                       max_probability_error=max(step_errors), failures=failures or [], step_errors=step_errors,
                       **divergence)


def written_by_kernel(spec, expected, over: int) -> CaseResult:
    """What a case's kernel writes: every prompt the case selects, ``over`` of them at twice their bound."""
    prompts = []
    for n, pid in enumerate(expected.prompt_ids):
        bound = expected.bounds[pid]
        err = bound * (2.0 if n < over else 0.5)
        failures = [f"{pid}: max probability error {err:.4g} > bound {bound:g} (bucket 256)"] if n < over else []
        prompts.append(prompt_score(pid, err, bound=bound, failures=failures))
    return CaseResult(case=spec.name, backend=spec.backend, status=Status.FAILED if over else Status.PASSED,
                      bound=spec.bound, bucket_bounds=dict(spec.bucket_bounds), golden_kind=spec.golden_kind,
                      inputs_digest=expected.inputs_digest, prompts=prompts,
                      failures=[f for p in prompts for f in p.failures])
