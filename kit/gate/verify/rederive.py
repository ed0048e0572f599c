"""One case of a finished run judged again, with no engine, from what its engine observed and nothing else of the
run: `parity-kit verify`'s work per case.

A forger who edits a run can seal it again with the kit's own sealing, so nothing the run says about how a case was
judged is taken from it. The case as resolved (its golden and whether it is exact, its bounds per bucket and decode
step, its calibration record and whether its drift test runs, its power record and limit, its prompts) comes from
the descriptor and the files it names, each read by digest, resolved for the hardware the run recorded
(kit.descriptor.host). From the case's evidence (``cases/<case>.evidence.json``) only the observations are taken:
one per prompt of the case, its decoded steps and its repeats, each held to being a distribution as the kernel
holds them. The evidence must then be, field for field, what the kernel writes for those observations; the first
field that is not is a line naming it. The observations are judged by the kernel's judge (kit.core.verdict.judge)
into the fields of a result (``Judged.result_fields``), and the executor's own rules decide its status
(kit.gate.executor.judged_again: coverage, the re-judging of recorded numbers, borrowed bounds, what the case can
detect). The result the run recorded must be that result, field for field: its status, its failures, every
prompt's and decoded prompt's numbers, its drift test and repeats.

A status no kernel wrote is held to its own rule: ``no-baseline`` only where the descriptor resolves no golden for
the recorded runtime, ``error`` and ``timeout`` only with a kind of error (kit.core.outcomes) and never where the
evidence judges the case failed (the executor keeps a failed verdict its kernel wrote, kit.gate.executor).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from kit.case.runner import other_hardware
from kit.core import outcomes
from kit.core.records import rundir
from kit.core.noise.calibration import ABSENT, first_difference
from kit.core.verdict.caseevidence import FORMAT as EVIDENCE_FORMAT, CaseEvidence, check_evidence, evidence_of
from kit.core.verdict.coverage import prompt_mismatch
from kit.core.errors import BadInput, ParityKitError
from kit.core.records.fixture import Fixture, Prompt, load_fixture
from kit.core.baselines.golden import (Golden, check_golden_matches_fixture, golden_continuations, golden_tops,
                                       golden_from_bytes, load_golden)
from kit.core.records.jsonio import canonical_bytes, parse_json_input
from kit.core.model.modelconfig import model_limits
from kit.core.records.observations import continuation_problem, observation_problem
from kit.core.records.recordcheck import Wrong
from kit.core.records.records import CaseResult, GoldenMode, Observation, Status
from kit.core.records.results import RunDir
from kit.core.records.spec import CaseSpec
from kit.core.verdict.judge import Scored, drift_decision, drift_skipped
from kit.descriptor.host import Host
from kit.gate.executor import expectation, judged_again, no_baseline_result
from kit.gate.verify.safeio import read_limited

# The fields of a case's spec that name places on the machine that ran it: the same case resolved on another
# machine names other folders, and what they hold is checked by digest instead.
LOCAL_SPEC_KEYS = ("notebook", "descriptor", "model_path", "fixture_path", "golden_path")
LOCAL_NESTED_KEYS = {"calibration": ("path",), "reference": ("model_path",), "power": ("path",)}
# What a result records of its judgement, compared field by field with the judgement again. The rest of a result
# (times, the engine's release and details, notes, triage) is the run's account of itself, not its verdict.
VERDICT_FIELDS = ("status", "golden_kind", "golden_sha256", "fixture_sha256", "model_digest", "bound",
                  "bucket_bounds", "bound_source", "drift", "drift_skipped", "drift_off", "failures", "typed_failures",
                  "prompts", "decode", "repeat_spread", "detectable")
BY_ID = ("prompts", "decode", "repeat_spread")  # lists of records compared by their ``id``


class Disagrees(ParityKitError):
    """A file of the run, well formed, that is not what the descriptor gives: a problem of the run, not bad input."""


@dataclass
class CaseCheck:
    """What judging one case again found: its status re-derived (None: it cannot be), and every problem."""

    result: CaseResult | None = None
    judged: bool = False
    problems: list[str] = field(default_factory=list)


class Rederive:
    """The cases of one run judged again (``case``), sharing what they read of the repository: the fixture and the
    goldens."""

    def __init__(self, run_dir: Path, host: Host) -> None:
        self.run_dir, self.host = run_dir, host
        self.run = RunDir.local(run_dir)
        self._fixtures: dict[str, Fixture] = {}
        self._goldens: dict[str, Golden] = {}

    def case(self, spec: CaseSpec, recorded: CaseResult | None) -> CaseCheck:
        """``spec`` (resolved from the descriptor) judged again from its evidence, and the result the run recorded,
        ``recorded`` (None: none), held to it."""
        out = CaseCheck()
        shown = self._shown(rundir.CASE_RESULT, spec.name)
        evidence = self._path(rundir.CASE_EVIDENCE, spec.name)
        if spec.no_baseline:
            return self._no_baseline(spec, recorded, evidence, out)
        if recorded is not None and recorded.status == Status.NO_BASELINE:
            out.problems.append(f"{shown}: status is {Status.NO_BASELINE}, but the descriptor resolves a golden for "
                                f"the case on the hardware the run recorded ({self._where(spec)})")
        derived = self._rederived(spec, recorded, evidence, out) if evidence is not None else None
        if recorded is None or recorded.status == Status.NO_BASELINE:
            if derived is not None and derived.status == Status.FAILED:
                out.problems.append(f"{shown}: {'missing' if recorded is None else 'no verdict'}, while its evidence "
                                    "judges the case failed")
            out.result = derived if recorded is not None else None
            return out
        if recorded.status in (Status.ERROR, Status.TIMEOUT):
            out.problems += self._unfinished(shown, recorded, derived)
            out.result = recorded
            return out
        if evidence is None:
            out.problems.append(f"{shown}: status is {recorded.status}, but its evidence "
                                f"({self._shown(rundir.CASE_EVIDENCE, spec.name)}) is not in the run: its verdict "
                                "cannot be judged again")
            return out
        if derived is not None:
            out.judged = True
            out.problems += verdict_differences(shown, recorded, derived)
        out.result = derived
        return out

    def _no_baseline(self, spec: CaseSpec, recorded: CaseResult | None, evidence: str | None,
                     out: CaseCheck) -> CaseCheck:
        """A case the descriptor resolves no golden for on the recorded runtime: no verdict, no evidence."""
        if recorded is not None and recorded.status != Status.NO_BASELINE:
            out.problems.append(f"{self._shown(rundir.CASE_RESULT, spec.name)}: status is {recorded.status}, but the "
                                f"descriptor resolves no baseline for the case on the runtime the run recorded "
                                f"({spec.runtime})")
        if evidence is not None:
            out.problems.append(f"{self._shown(rundir.CASE_EVIDENCE, spec.name)}: the evidence of a case with no "
                                f"baseline on the runtime the run recorded ({spec.runtime}): it was never judged")
        out.result = no_baseline_result(spec) if recorded is not None else None
        return out

    @staticmethod
    def _unfinished(shown: str, recorded: CaseResult, derived: CaseResult | None) -> list[str]:
        """An error or a timeout holds with its kind only, and never over a failed verdict its kernel wrote."""
        kind = outcomes.kind_of(recorded.error_kind)
        problems = []
        if kind is None or (recorded.status == Status.TIMEOUT) != (recorded.error_kind == outcomes.Outcome.TIMEOUT):
            problems.append(f"{shown}: status is {recorded.status} with error kind {recorded.error_kind!r}, which is "
                            f"not a kind of {recorded.status} (kit.core.outcomes)")
        if derived is not None and derived.status == Status.FAILED:
            problems.append(f"{shown}: status is {recorded.status}, but its evidence judges the case failed, and a "
                            "failed verdict its kernel wrote stands whatever ended the case")
        return problems

    def _rederived(self, spec: CaseSpec, recorded: CaseResult | None, name: str,
                   out: CaseCheck) -> CaseResult | None:
        """The result the gate records for the observations in the run's file ``name``; None (with the problem)
        when they cannot be judged."""
        shown = self._shown(rundir.CASE_EVIDENCE, spec.name)
        data = read_limited(self.run_dir, name)  # regular, bounded
        doc = parse_json_input(data if data is not None else b"", shown)
        try:
            check_evidence(doc)
        except Wrong as wrong:  # damaged, or of a shape no kernel writes: bad input, not a verdict to judge
            raise BadInput(f"{shown}: not the evidence of a case ({EVIDENCE_FORMAT}): {wrong.text}") from None
        fixture = self._fixture(spec)
        prompts = fixture.select(spec.prompt_ids, spec.buckets)
        try:
            golden = self._golden(spec, fixture, prompts)
        except Disagrees as exc:
            out.problems.append(str(exc))
            return None
        given = evidence_of(doc, self.run_dir / name)
        problem = observed_problem(spec, prompts, given)
        here = self.host.accelerator(spec.name, spec.options)
        try:
            elsewhere = other_hardware(spec, here) if spec.calibration is not None else None
        except ParityKitError as exc:  # the kernel ends the case there before judging it (no baseline, refused)
            elsewhere, problem = None, problem or f"{exc}: the case has no verdict on the hardware the run recorded"
        if problem:
            out.problems.append(f"{shown}: {problem}")
            return None
        by_id = {o.prompt_id: o for o in given.observations}
        skipped = drift_skipped(spec, elsewhere is not None)
        again = CaseEvidence(
            spec=spec, prompts=[Scored(p.id, p.bucket, p.n_tokens) for p in prompts],
                             exact=golden.kind == GoldenMode.EXACT,
            golden_sha256=golden.sha256, golden_tops=golden_tops(golden, prompts),
            golden_continuations=golden_continuations(golden, prompts, spec.decode),
            observations=[by_id[p.id] for p in prompts], continuations=given.continuations, runs=given.runs,
            drift=drift_decision(spec, skipped))
        differs = first_difference(_portable(doc), _portable(again.to_dict()), "")
        if differs:
            key, was, derived = differs
            out.problems.append(f"{shown}: {key.lstrip('.')} is {said(was)}; the descriptor and the files it names "
                                f"give {said(derived)}")
        judged = again.judged()
        base = recorded or CaseResult(spec.name, spec.backend, Status.PASSED)
        kernel = dataclasses.replace(
            base, case=spec.name, backend=spec.backend, **judged.result_fields(spec, golden.kind, skipped),
            golden_sha256=golden.sha256, fixture_sha256=fixture.sha256, model_digest=spec.model_digest, error=None,
            error_kind=None, detectable=None)
        # The inputs digest names the run's own folders; what it stands for is held by digest here instead.
        return judged_again(kernel, spec, expectation(spec, prompts, str(kernel.inputs_digest)), here)

    def _fixture(self, spec: CaseSpec) -> Fixture:
        if spec.fixture_path not in self._fixtures:
            self._fixtures[spec.fixture_path] = load_fixture(spec.fixture_path)
        return self._fixtures[spec.fixture_path]

    def _golden(self, spec: CaseSpec, fixture: Fixture, prompts: list[Prompt]) -> Golden:
        """What the case is compared with: the descriptor's golden for it, or the reference its kernel computed
        (kept in the run, sealed, and held to the reference model the descriptor pins)."""
        if spec.reference is None:
            if spec.golden_path not in self._goldens:
                golden = load_golden(spec.golden_path)
                check_golden_matches_fixture(golden, fixture)
                self._goldens[spec.golden_path] = golden
            return self._goldens[spec.golden_path]
        name = self._path(rundir.CASE_REFERENCE, spec.name)
        shown = self._shown(rundir.CASE_REFERENCE, spec.name)
        if name is None:
            raise Disagrees(f"{self._shown(rundir.CASE_EVIDENCE, spec.name)}: judged against its in-kernel reference, "
                            f"which is not in the run ({shown})")
        data = read_limited(self.run_dir, name)  # regular, bounded, as the evidence is
        golden = golden_from_bytes(data if data is not None else b"", self.run_dir / name)
        wanted = {"kind": GoldenMode.EXACT, "fixture_sha256": fixture.sha256,
                  "model_digest": spec.reference["model_digest"],
                  "top_k": spec.top_n}
        for key, value in wanted.items():
            if getattr(golden, key) != value:
                raise Disagrees(f"{shown}: {key} is {said(getattr(golden, key))}; the case's reference gives "
                                f"{said(value)}")
        ids = {p.id for p in prompts}
        missing = prompt_mismatch([p.id for p in prompts], [i for i in golden.prompts if i in ids])
        if missing:
            raise Disagrees(f"{shown}: prompts: {missing}")
        return golden

    def _path(self, suffix: str, case: str) -> str | None:
        """The case's file of ``suffix``, by its name in the run (None: absent), as the run's reader finds it: a
        case name or a link that leads out of the run is refused."""
        name = self.run.case_name(case, suffix)
        return name if self.run.has(name) else None

    @staticmethod
    def _shown(suffix: str, case: str) -> str:
        return f"{rundir.CASES}/{case}{suffix}"

    def _where(self, spec: CaseSpec) -> str:
        return spec.runtime or self.host.accelerator(spec.name, spec.options)["name"]


def observed_problem(spec: CaseSpec, prompts: list[Prompt], given: CaseEvidence) -> str | None:
    """Why the observations of ``given`` are not what the case's kernel judges: one per prompt of the case by id,
    each repeat and continuation the case asks, each a distribution of the case's model (kit.core.records.observations);
    None when they are."""
    ids = [p.id for p in prompts]
    wrong = prompt_mismatch(ids, [o.prompt_id for o in given.observations])
    if wrong:
        return f"observations: {wrong}"
    repeated = [p.id for p in prompts if spec.repeat_prompts is None or p.id in spec.repeat_prompts]
    wrong = prompt_mismatch(repeated, list(given.runs))
    if wrong:
        return f"runs: {wrong}"
    by_id = {o.prompt_id: o for o in given.observations}
    runs = spec.repeats * spec.repeat_launches
    for pid in repeated:
        got = given.runs[pid]
        if len(got) != runs or _same(got[0]) != _same(by_id[pid]) or any(o.prompt_id != pid for o in got):
            return (f"runs.{pid}: {len(got)} observations; the case asks {runs}, the first its observation of the "
                    "prompt, every one of that prompt")
    wrong = prompt_mismatch(ids if spec.decode else [], list(given.continuations))
    if wrong:
        return f"continuations: {wrong}"
    limits = model_limits(spec.model_path) if Path(spec.model_path).is_dir() else None
    vocab = limits.vocab_size if limits is not None else None
    lengths = {p.id: p.n_tokens for p in prompts}
    for obs in [*given.observations, *(o for r in given.runs.values() for o in r)]:
        problem = observation_problem(obs, lengths[obs.prompt_id], vocab)
        if problem:
            return f"observations: prompt {obs.prompt_id}: {problem}, which the kernel refuses before judging"
    for cont in given.continuations.values():
        problem = continuation_problem(cont, vocab)
        if problem:
            return f"continuations: prompt {cont.prompt_id}: {problem}, which the kernel refuses before judging"
    return None


def _same(obs: Observation) -> bytes:
    """An observation as its evidence writes it (a NaN logprob by its name, so that two NaNs are the same)."""
    return canonical_bytes(obs.to_dict())


def verdict_differences(shown: str, recorded: CaseResult, derived: CaseResult) -> list[str]:
    """One line per field of ``VERDICT_FIELDS`` where the recorded result is not the one judged again, naming the
    first place it differs (``prompts.chat-03.passed``)."""
    was, again = recorded.to_dict(), derived.to_dict()
    was["drift_off"] = recorded.drift_left_out  # a result written before drift_off: read from its words
    out = []
    for name in VERDICT_FIELDS:
        differs = first_difference(_comparable(name, was.get(name)), _comparable(name, again.get(name)), name)
        if differs:
            key, a, b = differs
            out.append(f"{shown}: {key} is {said(a)}; judged again from its evidence: {said(b)}")
    return out


def _comparable(name: str, value: Any) -> Any:
    if name in BY_ID and isinstance(value, list):
        ids = [v.get("id") if isinstance(v, dict) else None for v in value]
        if len(set(map(str, ids))) == len(ids):
            return {str(i): v for i, v in zip(ids, value)}
    if name in ("bound_source", "detectable") and isinstance(value, dict):  # where its record lay on that machine
        return {k: v for k, v in value.items() if k != "path"}
    return value


def _portable(doc: Mapping[str, Any]) -> Any:
    """An evidence document as JSON reads it back, less the places on the machine that ran it (``LOCAL_SPEC_KEYS``)."""
    out = json.loads(canonical_bytes(doc))
    spec = out.get("spec")
    if isinstance(spec, dict):
        for key in LOCAL_SPEC_KEYS:
            spec.pop(key, None)
        for key, inner in LOCAL_NESTED_KEYS.items():
            if isinstance(spec.get(key), dict):
                for k in inner:
                    spec[key].pop(k, None)
    return out


def said(value: Any) -> str:
    """A value as a line quotes it: short, and "absent" for a key that is not there."""
    text = "absent" if value is ABSENT else json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
