"""A fixture made with a model folder's tokenizer, and a fixture checked against that folder.

Apart from the fixture's format (kit.core.records.fixture), which every process reads, because making and checking
one read the model folder: its tokenizer, the bos token its config names, and the vocabulary and context every
prompt must fit (kit.core.model.modelconfig).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kit.core.errors import BadInput
from kit.core.model.modelconfig import check_prompt_tokens, check_prompts_fit, hf_config, model_limits
from kit.core.records.fixture import (DEFAULT_BUCKETS, Fixture, Prompt, bucket_for, check_encodable, fixture_document,
                                      load_fixture)
from kit.core.records.jsonio import canonical_bytes, sha256_bytes, sha256_file, write_canonical
from kit.core.records.text import printable


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
        check_encodable(p["id"], p["prompt"], f"prompt #{i + 1}")
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


def _bos_id(tokenizer_dir: Path) -> int | None:
    config = hf_config(tokenizer_dir)  # one that is not a JSON object is bad input naming the file
    bos = (config or {}).get("bos_token_id")
    return bos if isinstance(bos, int) and not isinstance(bos, bool) else None


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
