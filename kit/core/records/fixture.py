"""The prompt fixture: build, canonicalize, hash, verify, bucket.

A fixture is a canonical JSON file named by its own SHA-256; readers re-hash it
and refuse a file whose bytes do not match its name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import (NESTED_TOO_DEEP, canonical_bytes, lone_surrogate_at, read_input_bytes,
                                     sha256_bytes, sha256_file, surrogate_place, write_canonical)
from kit.core.model.modelconfig import check_prompt_tokens, check_prompts_fit, hf_config, model_limits
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


def make_fixture(
    prompts: Sequence[dict],
    tokenizer_dir: str | Path,
    out_dir: str | Path,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
) -> Path:
    """Tokenize ``[{"id", "prompt"}]`` with the model folder's tokenizer and write
    ``<out_dir>/<sha256>.json``. The bos token (when the tokenizer has one) is prepended,
    because that is what every backend will be fed."""
    from tokenizers import Tokenizer  # only fixture making needs it

    tokenizer_dir = Path(tokenizer_dir)
    tok_file = tokenizer_dir / "tokenizer.json"
    if not tok_file.is_file():
        raise BadInput(f"{tok_file} does not exist: the fixture needs the model folder's tokenizer.json")
    tok = Tokenizer.from_file(str(tok_file))
    bos = _bos_id(tokenizer_dir)
    limits = model_limits(tokenizer_dir)
    seen: set[str] = set()
    cases = []
    for i, p in enumerate(prompts):
        if set(p) != {"id", "prompt"}:
            raise BadInput(f"prompt #{i + 1}: expected keys id and prompt, got {sorted(p)}")
        _check_encodable(p["id"], p["prompt"], f"prompt #{i + 1}")
        if p["id"] in seen:
            raise BadInput(f"prompt #{i + 1}: duplicate id {p['id']!r}")
        seen.add(p["id"])
        ids = tok.encode(p["prompt"], add_special_tokens=False).ids
        if bos is not None:
            ids = [bos, *ids]
        if not ids:
            raise BadInput(f"prompt #{i + 1} ({printable(p['id'])}): it encodes to no token (an empty prompt has no "
                           "next token to score)")
        check_prompts_fit([(p["id"], len(ids))], limits, tokenizer_dir)
        check_prompt_tokens([(p["id"], ids)], limits, tokenizer_dir)
        cases.append(Prompt(p["id"], bucket_for(len(ids), buckets), p["prompt"], tuple(ids)))
    doc = fixture_document(tokenizer_dir.name, sha256_file(tok_file), cases)
    digest = sha256_bytes(canonical_bytes(doc))
    return write_canonical(Path(out_dir) / f"{digest}.json", doc)


def _check_encodable(prompt_id, prompt, where: str) -> None:
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


def _bos_id(tokenizer_dir: Path) -> int | None:
    config = hf_config(tokenizer_dir)  # one that is not a JSON object is bad input naming the file
    bos = (config or {}).get("bos_token_id")
    return bos if isinstance(bos, int) and not isinstance(bos, bool) else None


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


def verify_fixture(path: str | Path, tokenizer_dir: str | Path | None = None) -> Fixture:
    """Load (which checks the digest) and, given the model folder, check the tokenizer too, and that every token id
    lies in the model's vocabulary."""
    fixture = load_fixture(path)
    if tokenizer_dir is not None:
        check_prompt_tokens(((c.id, c.prompt_token_ids) for c in fixture.prompts), model_limits(tokenizer_dir),
                            tokenizer_dir, f"fixture {path}: ")
        tok_file = Path(tokenizer_dir) / "tokenizer.json"
        if not tok_file.is_file():
            raise BadInput(f"{tok_file} does not exist: the fixture's tokenizer is checked against the model "
                           "folder's tokenizer.json")
        actual = sha256_file(tok_file)
        if actual != fixture.tokenizer_digest:
            raise BadInput(
                f"fixture {path} was tokenized with tokenizer {fixture.tokenizer_digest[:16]}..., "
                f"but {tok_file} is {actual[:16]}..."
            )
    return fixture


def summary_rows(fixture: Fixture) -> list[dict]:
    """Per-bucket counts, for `fixture verify` output."""
    rows = []
    for b in fixture.buckets:
        cs = [c for c in fixture.prompts if c.bucket == b]
        rows.append({"bucket": b, "cases": len(cs), "min_tokens": min(c.n_tokens for c in cs),
                     "max_tokens": max(c.n_tokens for c in cs)})
    return rows

