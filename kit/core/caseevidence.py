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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from kit.core.errors import BadInput
from kit.core.golden import Step
from kit.core.jsonio import atomic_write_bytes, canonical_bytes, parse_json_input, read_input_bytes
from kit.core.records import Continuation, Observation, pairs_from_json, pairs_to_json
from kit.core.spec import CaseSpec
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
        return judge(self.spec, self.prompts, self.golden_tops, self.golden_continuations, self.exact,
                     self.observations, self.continuations, self.runs, self.drift)

    def to_dict(self) -> dict:
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
        return atomic_write_bytes(path, canonical_bytes(self.to_dict()))


def load_evidence(path: str | Path) -> CaseEvidence:
    """A case's evidence from its file; one line naming the file when it is not one."""
    path = Path(path)
    doc = parse_json_input(read_input_bytes(path, f"case evidence {path}"), f"case evidence {path}")
    try:
        return _from_dict(doc, path)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise BadInput(f"{path}: not the evidence of a case ({FORMAT}): {type(exc).__name__}: {exc}") from None


def _from_dict(d: Any, path: Path) -> CaseEvidence:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"format {d.get('format') if isinstance(d, dict) else None!r}")
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


