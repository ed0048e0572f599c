"""The prompt fixture: its format, canonicalized, hashed, read back and verified, its buckets.

A fixture is a canonical JSON file named by its own SHA-256; readers re-hash it
and refuse a file whose bytes do not match its name. Making one with a model folder's tokenizer, and checking one
against that folder, read the folder: kit.core.model.tokenizer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import (NESTED_TOO_DEEP, canonical_bytes, lone_surrogate_at, read_input_bytes,
                                     sha256_bytes, surrogate_place)
from kit.core.records.text import lone_surrogate, printable

DEFAULT_BUCKETS = (128, 256, 512, 1024)


@dataclass(frozen=True)
class Prompt:
    id: str
    bucket: int
    prompt: str
    prompt_token_ids: tuple[int, ...]

    @property
    def n_tokens(self) -> int:
        """The prompt's length in tokens: what its bucket must hold."""
        return len(self.prompt_token_ids)


@dataclass(frozen=True)
class Fixture:
    path: Path
    sha256: str
    tokenizer: str
    tokenizer_digest: str
    prompts: tuple[Prompt, ...]

    @property
    def ids(self) -> list[str]:
        """The fixture's prompt ids, in the file's order."""
        return [c.id for c in self.prompts]

    @property
    def buckets(self) -> list[int]:
        """The fixture's buckets, smallest first: the order the gate runs and reports them in."""
        return sorted({c.bucket for c in self.prompts})

    def prompt(self, prompt_id: str) -> Prompt:
        """The prompt named ``prompt_id``; KeyError for a name the fixture does not hold (a caller's mistake,
        not the user's)."""
        for c in self.prompts:
            if c.id == prompt_id:
                return c
        raise KeyError(prompt_id)

    def select(self, ids: Sequence[str] | None = None, buckets: Sequence[int] | None = None) -> list[Prompt]:
        """The prompts a case runs: those named in ``ids`` and in ``buckets`` (None: no restriction), in the
        fixture's order."""
        chosen = list(self.prompts)
        if ids is not None:
            wanted = set(ids)
            chosen = [c for c in chosen if c.id in wanted]
        if buckets is not None:
            wanted_b = set(buckets)
            chosen = [c for c in chosen if c.bucket in wanted_b]
        return chosen


def bucket_for(n_tokens: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds the prompt."""
    for b in sorted(buckets):
        if n_tokens <= b:
            return b
    raise BadInput(f"a prompt of {n_tokens} tokens exceeds the largest bucket {max(buckets)}")


def fixture_document(tokenizer: str, tokenizer_digest: str, cases: Iterable[Prompt]) -> dict:
    """A fixture as its file holds it, prompts sorted by id: the canonical document whose SHA-256 names the fixture."""
    return {
        "tokenizer": tokenizer,
        "tokenizer_digest": tokenizer_digest,
        "cases": [
            {"id": c.id, "bucket": c.bucket, "prompt": c.prompt, "prompt_token_ids": list(c.prompt_token_ids)}
            for c in sorted(cases, key=lambda c: c.id)
        ],
    }


def check_encodable(prompt_id, prompt, where: str) -> None:
    """A prompt's id and text must be strings UTF-8 can write: a lone surrogate (JSON's "\\ud800") reads
    from a file, then fails every write of a fixture, result or report that names it."""
    bad = _not_a_string(prompt_id, prompt) or _lone_surrogate(prompt_id, prompt)
    if bad:
        raise BadInput(f"{where}: {bad}")


def _not_a_string(prompt_id, prompt) -> str | None:
    for what, value in (("id", prompt_id), ("prompt", prompt)):
        if not isinstance(value, str):
            return f"its {what} {printable(repr(value))} is not a string"
    return None


def _integer(value, what: str) -> int:
    """A JSON integer as it is, never converted: 3.5, true and "5" are not token ids (int() made them 3, 1 and 5)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} {value!r} is not an integer")
    return value


def _not_tokens(ids: Sequence[int]) -> str | None:
    """Why a prompt's token ids cannot be scored: none (no position predicts a next token), or a negative one."""
    if not ids:
        return "it has no token ids (an empty prompt has no next token to score)"
    negative = next((t for t in ids if t < 0), None)
    return f"token id {negative} is negative" if negative is not None else None


def _lone_surrogate(prompt_id: str, prompt: str) -> str | None:
    """What holds a lone surrogate, the id or the prompt, in words; None when neither does."""
    for what, value in (("id", prompt_id), ("prompt", prompt)):
        bad = lone_surrogate(value)
        if bad:
            shown = f"id '{printable(value)}'" if what == "id" else "prompt"
            return f"its {shown} holds a lone surrogate ({bad}), which UTF-8 cannot encode"
    return None


def read_prompts(path: str | Path) -> list[dict]:
    """The prompts of a JSON-lines file for `fixture make`, one object a line (blank lines skipped); a line that
    is not JSON, or whose id or prompt UTF-8 cannot write, is refused naming ``path:line`` (and its column)."""
    try:
        text = read_input_bytes(path, f"--prompts {path}").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"--prompts {path} is not UTF-8 (byte {exc.start})") from None
    prompts = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}:{n}: not JSON: {exc}") from None
        except RecursionError:
            raise BadInput(f"{path}:{n}: not JSON: {NESTED_TOO_DEEP}") from None
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("prompt"), str):
            bad = _lone_surrogate(entry["id"], entry["prompt"])
            if bad:
                column = (lone_surrogate_at(line) or (1, 1))[1]
                raise BadInput(f"{path}:{n}:{column}: {bad}")
        prompts.append(entry)
    return prompts


def load_fixture(path: str | Path) -> Fixture:
    """Read and verify: the file's SHA-256 must equal its name, and its shape must hold."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"fixture {path} does not exist")
    data = read_input_bytes(path, f"fixture {path}")
    actual = sha256_bytes(data)
    if path.stem != actual:
        raise BadInput(f"fixture {path} is tampered: its bytes hash to {actual}, but its name says {path.stem}")
    try:
        doc = json.loads(data)
        cases = tuple(
            Prompt(c["id"], _integer(c["bucket"], "bucket"), c["prompt"],
                   tuple(_integer(t, "token id") for t in c["prompt_token_ids"]))
            for c in doc["cases"]
        )
        fixture = Fixture(path, actual, doc["tokenizer"], doc["tokenizer_digest"], cases)
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInput(f"fixture {path} is malformed: {type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise BadInput(f"fixture {path} is malformed: {NESTED_TOO_DEEP}") from None
    for n, c in enumerate(fixture.prompts, start=1):
        wrong = _not_a_string(c.id, c.prompt) or _not_tokens(c.prompt_token_ids) or (
            f"bucket {c.bucket} is smaller than its {c.n_tokens} tokens" if c.bucket < c.n_tokens else None)
        if wrong:
            raise BadInput(f"fixture {path}: case #{n}: {wrong}")
        bad = _lone_surrogate(c.id, c.prompt)
        if bad:
            raise BadInput(f"fixture {surrogate_place(path, data)}: case #{n}: {bad}")
    try:
        canonical = canonical_bytes(doc)
    except ValueError:  # NaN or an infinity, which strict JSON does not allow
        raise BadInput(f"fixture {path} holds NaN or Infinity, which JSON does not allow") from None
    if canonical != data:
        raise BadInput(f"fixture {path} is not canonical JSON (sorted keys, compact separators, one newline)")
    if len(set(fixture.ids)) != len(fixture.ids):
        raise BadInput(f"fixture {path} has duplicate case ids")
    return fixture


def summary_rows(fixture: Fixture) -> list[dict]:
    """Per-bucket counts, for `fixture verify` output."""
    rows = []
    for b in fixture.buckets:
        cs = [c for c in fixture.prompts if c.bucket == b]
        rows.append({"bucket": b, "cases": len(cs), "min_tokens": min(c.n_tokens for c in cs),
                     "max_tokens": max(c.n_tokens for c in cs)})
    return rows

