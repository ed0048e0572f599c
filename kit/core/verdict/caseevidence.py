"""What a case's verdict was judged from, kept beside its result: ``cases/<case>.evidence.json``.

A gate's verdict rests on what each case's engine observed; the engine is gone once the run ends, and a rendered
summary or a zip on an issue shows only digests and numbers. So the kernel keeps, next to its result, everything
its judge read (kit.core.verdict.judge): the case as resolved (bounds, calibration reference, options), the
prompts scored, the golden's tops (and continuations) for those prompts, what the engine observed, decoded and
repeated, and whether the drift test ran here. `parity-kit verify` judges it again with no engine and no
repository, and must reach the same result.

Canonical JSON (sorted keys, no spaces), so that its digest, which the run's manifest records, names its content.
Stdlib only, like every record format of kit.core.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

from kit.core.baselines.golden import Step
from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes
from kit.core.records.recordcheck import Wrong, formatted, listing, mapping, text
from kit.core.records.records import Continuation, Observation, pairs_from_json, pairs_to_json
from kit.core.records.spec import CaseSpec
from kit.core.verdict.judge import Judged, Scored, judge

FORMAT = "parity-kit-case-evidence/1"


@dataclass(frozen=True)
class CaseEvidence:
    spec: CaseSpec
    prompts: list[Scored]
    exact: bool
    golden_sha256: str
    golden_tops: Mapping[str, Sequence[tuple[int, float]]]
    golden_continuations: Mapping[str, Sequence[Step]]
    observations: Sequence[Observation]
    continuations: Mapping[str, Continuation]
    runs: Mapping[str, Sequence[Observation]]
    drift: str | None  # DRIFT_RAN, or why the drift test did not run here (None: the case has no calibration)
    path: Path | None = field(default=None, compare=False)

    def judged(self) -> Judged:
        """The case judged again from this evidence alone, by the function its kernel called: `verify`
        compares it with the recorded verdict."""
        return judge(self.spec, self.prompts, self.golden_tops, self.golden_continuations, self.exact,
                     self.observations, self.continuations, self.runs, self.drift)

    def to_dict(self) -> dict:
        """The evidence as ``cases/<case>.evidence.json`` holds it: the spec, the prompts, the golden's tops
        and every observation the verdict was judged from."""
        return {"format": FORMAT, "spec": self.spec.to_dict(), "exact": self.exact,
                "prompts": [[p.id, p.bucket, p.n_tokens] for p in self.prompts],
                "golden": {"sha256": self.golden_sha256,
                           "tops": {k: pairs_to_json(v) for k, v in self.golden_tops.items()},
                           "continuations": {k: [_step(s) for s in v] for k, v in self.golden_continuations.items()}},
                "observations": [o.to_dict() for o in self.observations],
                "continuations": {k: [_step(s) for s in c.steps] for k, c in self.continuations.items()},
                "runs": {k: [o.to_dict() for o in v] for k, v in self.runs.items()},
                "drift": self.drift}

    def save(self, path: str | Path) -> Path:
        """Write the evidence atomically as canonical JSON, so a run's seal covers exact bytes."""
        return atomic_write_bytes(path, canonical_bytes(self.to_dict()))


def check_evidence(doc: Any) -> None:
    """Raises Wrong at the first value of ``doc`` that a case's evidence cannot hold: every key of its format,
    the spec's fields of their types (kit.core.records.resultcheck), prompts as ``[id, bucket, tokens]``, every top list
    as ``[token, logprob]`` pairs (a logprob a number, or the name of a non-finite one), every continuation as steps of
    ``[token, top list]``."""
    from kit.core.records.resultcheck import check_fields

    d = formatted(doc, KEYS, FORMAT)
    check_fields(CaseSpec, d["spec"], "spec")
    unknown = sorted(set(d["spec"]) - {f.name for f in fields(CaseSpec)})
    if unknown:
        raise Wrong(f"spec.{unknown[0]}", "unknown key (not a field of a case's spec)")
    if not isinstance(d["exact"], bool):
        raise Wrong("exact", "expected true or false", d["exact"])
    for i, p in enumerate(listing(d["prompts"], "prompts")):
        if not (isinstance(p, list) and len(p) == 3 and isinstance(p[0], str) and _whole(p[1]) and _whole(p[2])):
            raise Wrong(f"prompts[{i}]", "expected [prompt id, bucket, tokens]", p)
    golden = mapping(d["golden"], "golden", ("sha256", "tops", "continuations"))
    text(golden["sha256"], "golden.sha256")
    for pid, top in mapping(golden["tops"], "golden.tops").items():
        _pairs(top, f"golden.tops.{pid}")
    for pid, steps in mapping(golden["continuations"], "golden.continuations").items():
        _steps(steps, f"golden.continuations.{pid}")
    for i, o in enumerate(listing(d["observations"], "observations")):
        _observation(o, f"observations[{i}]")
    for pid, steps in mapping(d["continuations"], "continuations").items():
        _steps(steps, f"continuations.{pid}")
    for pid, runs in mapping(d["runs"], "runs").items():
        for i, o in enumerate(listing(runs, f"runs.{pid}")):
            _observation(o, f"runs.{pid}[{i}]")
    if d["drift"] is not None and not isinstance(d["drift"], str):
        raise Wrong("drift", "expected a string or null", d["drift"])


KEYS = ("format", "spec", "exact", "prompts", "golden", "observations", "continuations", "runs", "drift")
NON_FINITE = ("nan", "inf", "-inf")  # how a non-finite logprob is kept (kit.core.records.records.pairs_to_json)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _pairs(value: Any, key: str) -> None:
    for i, pair in enumerate(listing(value, key)):
        ok = isinstance(pair, list) and len(pair) == 2 and _whole(pair[0]) and (
            pair[1] in NON_FINITE or (isinstance(pair[1], (int, float)) and not isinstance(pair[1], bool)))
        if not ok:
            raise Wrong(f"{key}[{i}]", "expected [token id, logprob]", pair)


def _steps(value: Any, key: str) -> None:
    for i, step in enumerate(listing(value, key)):
        if not (isinstance(step, list) and len(step) == 2 and _whole(step[0])):
            raise Wrong(f"{key}[{i}]", "expected [token id, top list]", step)
        _pairs(step[1], f"{key}[{i}][1]")


def _observation(value: Any, key: str) -> None:
    o = mapping(value, key, ("case_id", "n_tokens", "top_logprobs"))
    text(o["case_id"], f"{key}.case_id")
    if not _whole(o["n_tokens"]):
        raise Wrong(f"{key}.n_tokens", "expected a whole number", o["n_tokens"])
    _pairs(listing(o["top_logprobs"], f"{key}.top_logprobs", non_empty=True), f"{key}.top_logprobs")


def evidence_of(d: Any, path: Path | None = None) -> CaseEvidence:
    """The evidence a document holds, once ``check_evidence`` has passed it."""
    golden = d["golden"]
    return CaseEvidence(
        spec=CaseSpec.from_dict(d["spec"]), exact=bool(d["exact"]),
        prompts=[Scored(str(i), int(b), int(n)) for i, b, n in d["prompts"]],
        golden_sha256=str(golden["sha256"]),
        golden_tops={k: pairs_from_json(v) for k, v in golden["tops"].items()},
        golden_continuations={k: tuple(_from_step(s) for s in v) for k, v in golden["continuations"].items()},
        observations=[Observation.from_dict(o) for o in d["observations"]],
        continuations={k: Continuation(k, tuple(_from_step(s) for s in v)) for k, v in d["continuations"].items()},
        runs={k: [Observation.from_dict(o) for o in v] for k, v in d["runs"].items()},
        drift=d["drift"], path=path)


def _step(step: Step) -> list:
    token, top = step
    return [int(token), pairs_to_json(top)]


def _from_step(step: Sequence) -> Step:
    return int(step[0]), pairs_from_json(step[1])


