"""Goldens: make, load, verify against a fixture, diff; with provenance.

A golden holds, per fixture case, the reference top-k next-token logprobs.
``semantic`` goldens are compared under a probability bound, ``exact`` goldens
bit for bit (one native backend on one runtime).

Format 2 (``"format": 2``) adds, per case, a greedy ``continuation`` of ``decode_steps`` steps made
by the reference's own decode path, each step the chosen token and the top-k there (kit.core.verdict.decode
compares a backend's continuation with it). Every key format 1 has keeps its meaning, so a reader that
knows only format 1 reads a format-2 golden as the first-token golden it also is; a golden without
the key is format 1 and has no continuations.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from kit import __version__
from kit.core.errors import BadInput
from kit.core.records.fixture import Fixture, Prompt
from kit.core.records.jsonio import (NESTED_TOO_DEEP, canonical_bytes, read_input_bytes, sha256_bytes, surrogate_place,
                                     write_canonical)
from kit.core.records.records import Continuation, GoldenMode, Observation
from kit.core.host.runtime import hardware
from kit.core.records.text import lone_surrogate, printable

FORMAT = 2  # the newest golden format this code reads and writes (1: no "format" key, no continuations)

# One continuation step: the token the reference chose and its top-k there.
Step = tuple[int, tuple[tuple[int, float], ...]]


@dataclass(frozen=True)
class Golden:
    path: Path
    sha256: str
    kind: str
    fixture_sha256: str
    model_digest: str
    top_k: int
    provenance: dict
    prompts: dict[str, tuple[tuple[int, float], ...]]
    format: int = 1
    decode_steps: int = 0  # the length of every case's continuation; 0: the golden has none
    continuations: dict[str, tuple[Step, ...]] | None = None

    @property
    def ids(self) -> list[str]:
        """The golden's prompt ids, sorted: the order every comparison with a fixture walks them in."""
        return sorted(self.prompts)


def provenance(backend: str, release: dict, dtype: str, attention: str | dict, command: Sequence[str],
               runtime: str | None = None) -> dict:
    """Who made a golden, how and where; ``runtime``: the key of what decided its bits (exact goldens)."""
    extra = {"runtime": runtime} if runtime else {}
    return {**extra,
        "backend": backend,
        "release": release,
        "dtype": dtype,
        "attention": attention,
        "hardware": hardware(),
        "python": sys.version.split()[0],
        "command": " ".join(command),
        "created_at": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "kit_version": __version__,
    }


def golden_document(kind: str, fixture: Fixture, model_digest: str, top_k: int,
                    observations: Sequence[Observation], prov: dict,
                    continuations: Sequence[Continuation] | None = None, decode_steps: int = 0) -> dict:
    """A golden; with ``continuations`` (``decode_steps`` each) a format-2 decode golden."""
    if kind not in tuple(GoldenMode):
        raise BadInput(f"golden kind {kind!r} is not one of {', '.join(GoldenMode)}")
    by_id = {o.prompt_id: o for o in observations}
    missing = [i for i in fixture.ids if i not in by_id]
    if missing:
        raise BadInput(f"no observation for fixture cases {', '.join(missing[:5])}")
    cases: list[dict] = []
    for cid in sorted(fixture.ids):
        top = by_id[cid].top_logprobs[:top_k]
        bad = [t for t, lp in top if not math.isfinite(lp)]
        if bad:
            raise BadInput(f"case {cid}: non-finite logprob for token {bad[0]}; refusing to write a golden")
        problem = golden_top_list_problem(top, top_k)
        if problem:  # a golden that load_golden would refuse is never written
            raise BadInput(f"case {cid}: {problem}; refusing to write a golden")
        cases.append({"id": cid, "top_logprobs": _entries(top)})
    doc = {"kind": kind, "fixture_sha256": fixture.sha256, "model_digest": model_digest, "top_k": top_k,
           "provenance": prov, "cases": cases}
    if continuations is not None:
        by_cid = {c.prompt_id: c for c in continuations}
        for case in cases:
            cont = by_cid.get(case["id"])
            if cont is None or len(cont.steps) != decode_steps:
                got = "none" if cont is None else f"{len(cont.steps)} steps"
                raise BadInput(f"case {case['id']}: continuation of {decode_steps} steps expected, got {got}; "
                               "refusing to write a golden")
            steps = [(t, tuple(top[:top_k])) for t, top in cont.steps]
            problem = golden_continuation_problem(steps, top_k)
            if problem:
                raise BadInput(f"case {case['id']}: {problem}; refusing to write a golden")
            case["continuation"] = [{"token_id": int(t), "top_logprobs": _entries(top)} for t, top in steps]
        doc["format"], doc["decode_steps"] = FORMAT, decode_steps
    return doc


def reference_document(fixture: Fixture, model_digest: str, top_k: int, observations: Sequence[Observation],
                       prov: dict) -> dict:
    """An exact golden over the prompts a case scored (a subset of the fixture): the reference an exact case
    computes in its own kernel, kept beside its result as the evidence it was judged against."""
    cases = []
    for obs in sorted(observations, key=lambda o: o.prompt_id):
        top = obs.top_logprobs[:top_k]
        problem = golden_top_list_problem(top, top_k)
        if problem:
            raise BadInput(f"reference of case {obs.prompt_id}: {problem}")
        cases.append({"id": obs.prompt_id, "top_logprobs": _entries(top)})
    return {"kind": GoldenMode.EXACT, "fixture_sha256": fixture.sha256, "model_digest": model_digest, "top_k": top_k,
            "provenance": prov, "cases": cases}


def _entries(top: Sequence[tuple[int, float]]) -> list[dict]:
    return [{"token_id": int(t), "logprob": float(lp)} for t, lp in top]


def golden_continuation_problem(steps: Sequence[Step], top_k: int) -> str | None:
    """What is wrong with one case's continuation, or None: every step a valid top list whose first
    token is the one the (greedy) reference chose."""
    for n, (token, top) in enumerate(steps, start=1):
        problem = golden_top_list_problem(top, top_k)
        if problem:
            return f"continuation step {n}: {problem}"
        if token != top[0][0]:
            return f"continuation step {n}: token {token} is not the step's most likely token {top[0][0]}"
    return None


def golden_filename(fixture: Fixture, model_name: str, model_digest: str, kind: str,
                    runtime: str | None = None, decode_steps: int = 0) -> str:
    """An exact golden names the runtime (ISA level) it holds on, so that goldens of one model made on
    several runtimes sit side by side; a decode golden names its continuation length."""
    tail = (f"-decode{decode_steps}" if decode_steps else "") + (f"-{runtime}" if runtime else "")
    return f"{fixture.sha256[:12]}-{model_name}-{model_digest[:12]}-{kind}{tail}.json"


def write_golden(path: str | Path, doc: dict) -> Path:
    """Goldens are reviewed artifacts: never overwrite one in place."""
    path = Path(path)
    if path.exists():
        raise BadInput(f"golden {path} exists; goldens are never overwritten (move it away or choose --out)")
    return write_canonical(path, doc)


def load_golden(path: str | Path) -> Golden:
    """A golden read and checked whole: present, canonical JSON (never edited by hand), of a format this kit
    reads, with a known kind, provenance and sound top lists; refused in one line naming the file and the first
    problem."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"golden {path} does not exist")
    return golden_from_bytes(read_input_bytes(path, f"golden {path}"), path)


def golden_from_bytes(data: bytes, path: Path) -> Golden:
    """The golden ``data`` holds, checked as ``load_golden`` checks a file (``path``: the file it was read from,
    named in every refusal): for a reader that reads a run's files its own way (verify's bounded reads)."""
    try:
        doc = json.loads(data)  # NaN and infinities parse here: the content check names the case holding one
        cases = {c["id"]: _top_list(c["top_logprobs"]) for c in doc["cases"]}
        if len(cases) != len(doc["cases"]):
            raise ValueError("a case id is listed twice")
        fmt = _integer(doc.get("format", 1), "format")
        if fmt > FORMAT:
            raise BadInput(f"golden {path} is format {fmt}, newer than this parity-kit reads ({FORMAT}); "
                           "upgrade parity-kit")
        steps, continuations = 0, None
        if fmt >= 2 and "decode_steps" in doc:
            steps = _integer(doc["decode_steps"], "decode_steps")
            continuations = {c["id"]: tuple((_integer(s["token_id"], "token_id"), _top_list(s["top_logprobs"]))
                                            for s in c["continuation"]) for c in doc["cases"]}
        golden = Golden(path, sha256_bytes(data), doc["kind"], doc["fixture_sha256"], doc["model_digest"],
                        _integer(doc["top_k"], "top_k"), doc.get("provenance") or {}, cases, fmt, steps,
                        continuations)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"golden {path} is malformed: {type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise BadInput(f"golden {path} is malformed: {NESTED_TOO_DEEP}") from None
    if golden.kind not in tuple(GoldenMode):
        raise BadInput(f"golden {path}: kind {golden.kind!r} is not one of {', '.join(GoldenMode)}")
    if not golden.provenance:
        raise BadInput(f"golden {path} carries no provenance; make it with `parity-kit golden make`")
    _check_ids(golden, data)
    check_golden_contents(golden)
    try:
        canonical = canonical_bytes(doc)
    except ValueError:  # NaN or an infinity outside the top lists, which strict JSON does not allow
        raise BadInput(f"golden {path} holds NaN or Infinity, which JSON does not allow") from None
    if canonical != data:
        raise BadInput(f"golden {path} is not canonical JSON (was it edited by hand?)")
    return golden


def _check_ids(golden: Golden, data: bytes) -> None:
    """A prompt id UTF-8 cannot write (a lone surrogate, read from its JSON escape) is named where it stands; the
    canonical check after would otherwise fail on it and blame NaN."""
    for n, prompt_id in enumerate(golden.prompts, start=1):
        bad = lone_surrogate(prompt_id) if isinstance(prompt_id, str) else None
        if bad:
            raise BadInput(f"golden {surrogate_place(golden.path, data)}: case #{n}: its id '{printable(prompt_id)}' "
                           f"holds a lone surrogate ({bad}), which UTF-8 cannot encode")


def _integer(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} {value!r} is not an integer")
    return value


def _top_list(entries) -> tuple[tuple[int, float], ...]:
    out = []
    for e in entries:
        logprob = e["logprob"]
        if isinstance(logprob, bool) or not isinstance(logprob, (int, float)):
            raise TypeError(f"logprob {logprob!r} is not a number")
        out.append((_integer(e["token_id"], "token_id"), float(logprob)))
    return tuple(out)


def golden_top_list_problem(top: Sequence[tuple[int, float]], top_k: int) -> str | None:
    """What is wrong with one case's top list, or None: scoring reads it as the reference, so a short,
    reordered or impossible list would judge the backend against something no model produced."""
    if not top:
        return "its top_logprobs list is empty"
    if len(top) != top_k:
        return (f"its top_logprobs list holds {len(top)} token{'s' if len(top) != 1 else ''}, "
                f"but the golden's top_k is {top_k}")
    seen: set[int] = set()
    for rank, (token, logprob) in enumerate(top, start=1):
        if token < 0:
            return f"token id {token} (rank {rank}) is negative"
        if token in seen:
            return f"token id {token} is listed twice"
        seen.add(token)
        if not math.isfinite(logprob) or logprob > 0:
            return f"token {token} (rank {rank}) has logprob {logprob!r}; a logprob is finite and at most 0"
        if rank > 1 and logprob > top[rank - 2][1]:
            return (f"logprobs are not in descending order: token {token} (rank {rank}) has {logprob!r}, "
                    f"above rank {rank - 1}'s {top[rank - 2][1]!r}")
    mass = math.fsum(math.exp(logprob) for _, logprob in top)
    if mass > 1 + mass_slack(len(top)):
        return (f"its top-{len(top)} probabilities (exp of the logprobs) sum to {mass:.6g}, more than 1: "
                "no model's distribution gives that")
    return None


def mass_slack(k: int) -> float:
    """How far above 1 a top list's probabilities may sum from rounding alone. Logprobs rounded to bfloat16 (a
    relative 2^-8 each, the coarsest an engine reports) move the sum by at most 2^-8 x sum(p |log p|), which is at
    most 2^-8 x log k for k tokens (the entropy's bound); float32's own rounding adds under 1e-6."""
    return 2.0 ** -8 * max(1.0, math.log(k)) + 1e-6


def check_golden_contents(golden: Golden) -> None:
    """Refuse, naming the file and the case, a golden whose top lists could not have come from a model."""
    if golden.top_k < 1:
        raise BadInput(f"golden {golden.path}: top_k {golden.top_k} is below 1")
    for cid, top in golden.prompts.items():
        problem = golden_top_list_problem(top, golden.top_k)
        if problem:
            raise BadInput(f"golden {golden.path}: case {cid}: {problem}")
    for cid, steps in (golden.continuations or {}).items():
        if len(steps) != golden.decode_steps:
            raise BadInput(f"golden {golden.path}: case {cid}: its continuation holds {len(steps)} steps, but the "
                           f"golden's decode_steps is {golden.decode_steps}")
        problem = golden_continuation_problem(steps, golden.top_k)
        if problem:
            raise BadInput(f"golden {golden.path}: case {cid}: {problem}")


def check_golden_vocabulary(golden: Golden, vocab_size: int, model: str | Path, stated: str) -> None:
    """Every golden token id within the model's vocabulary (else the backend would be blamed for it)."""
    for cid in golden.ids:
        steps = (golden.continuations or {}).get(cid, ())
        outside = next((t for top in (golden.prompts[cid], *(s[1] for s in steps)) for t, _ in top
                        if t >= vocab_size), None)
        if outside is not None:
            raise BadInput(f"golden {golden.path}: case {cid}: token id {outside} is outside the vocabulary of "
                           f"model {model} ({vocab_size} tokens, {stated})")


def golden_tops(golden: Golden, prompts: Sequence[Prompt]) -> dict[str, tuple[tuple[int, float], ...]]:
    """The golden's top-k of each of ``prompts``: what a case's observations are judged against."""
    return {p.id: golden.prompts[p.id][: golden.top_k] for p in prompts}


def golden_continuations(golden: Golden, prompts: Sequence[Prompt], decode: int) -> dict[str, Sequence[Step]]:
    """The golden's continuation of each of ``prompts`` for a case with a decode check (none without one)."""
    return {p.id: (golden.continuations or {})[p.id] for p in prompts} if decode else {}


def check_golden_matches_fixture(golden: Golden, fixture: Fixture) -> None:
    """Refuse, before anything runs, a golden made for another fixture."""
    if golden.fixture_sha256 != fixture.sha256:
        raise BadInput(
            f"golden {golden.path} was made for fixture {golden.fixture_sha256[:16]}..., "
            f"not for {fixture.path.name[:16]}... ({fixture.sha256})"
        )
    gids, fids = set(golden.prompts), set(fixture.ids)
    if gids != fids:
        extra, missing = sorted(gids - fids), sorted(fids - gids)
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:3])}" + (" ..." if len(missing) > 3 else ""))
        if extra:
            parts.append(f"unknown {', '.join(extra[:3])}" + (" ..." if len(extra) > 3 else ""))
        raise BadInput(f"golden {golden.path} case ids disagree with fixture {fixture.path.name}: {'; '.join(parts)}")


# What a golden's provenance says of the runtime it holds on (kit.backends.registry.golden_runtime: the key it
# records, else what its backend can tell from the rest of its record).
RuntimeOf = Callable[[dict], "str | None"]


def choose_for_runtime(goldens: Sequence[Golden], runtime: str, runtime_of: RuntimeOf) -> Golden | None:
    """The golden made on ``runtime`` (its key, kit.core.host.runtime, as ``runtime_of`` reads it from a golden's
    provenance), else None: an exact golden never falls back to another runtime's, whose bits differ."""
    return next((g for g in goldens if runtime_of(g.provenance) == runtime), None)


def duplicate_runtime(goldens: Sequence[Golden], runtime_of: RuntimeOf) -> tuple[Golden, Golden] | None:
    """Two goldens of one list made on one runtime (which of them would judge is then arbitrary)."""
    seen: dict[str, Golden] = {}
    for g in goldens:
        key = runtime_of(g.provenance)
        if key is None:
            continue
        if key in seen:
            return seen[key], g
        seen[key] = g
    return None


def remake_command(golden: Golden, model: str, fixture: str, out: str, flags: Sequence[str] = (),
                   backend: str | None = None) -> str:
    """The `parity-kit golden make` line that makes a golden like this one, on the host that runs it: with
    ``backend`` where it is not `golden make`'s default, and ``flags``, the options of its backend's own that
    the golden was made with (the backend says which: kit.backends.registry.remake_command)."""
    args = ["parity-kit", "golden", "make", *(["--backend", backend] if backend else []),
            "--model", model, "--fixture", fixture, "--kind", golden.kind, "--top-k", str(golden.top_k), *flags]
    return shlex.join([*args, "--out", out])


@dataclass(frozen=True)
class PromptDiff:
    id: str
    max_probability_delta: float
    winner_before: int
    winner_after: int

    @property
    def winner_changed(self) -> bool:
        """Whether the most likely token differs between the two goldens: a move a reviewer must look at
        whatever its size."""
        return self.winner_before != self.winner_after


def diff_goldens(old: Golden, new: Golden) -> list[PromptDiff]:
    """How far each case moved between two goldens of the same fixture, over the old top-k."""
    if old.fixture_sha256 != new.fixture_sha256:
        raise BadInput(f"goldens {old.path.name} and {new.path.name} are for different fixtures")
    rows = []
    for cid in old.ids:
        if cid not in new.prompts:
            raise BadInput(f"golden {new.path} has no case {cid}")
        after = dict(new.prompts[cid])
        floor = min(lp for _, lp in new.prompts[cid])
        # A token that fell out of the new top-k moved at least down to the new floor.
        delta = max(abs(math.exp(after.get(t, floor)) - math.exp(lp)) for t, lp in old.prompts[cid])
        rows.append(PromptDiff(cid, delta, old.prompts[cid][0][0], new.prompts[cid][0][0]))
    return rows
