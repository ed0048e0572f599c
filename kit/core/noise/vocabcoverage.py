"""How much of the model's vocabulary, and which kinds of token, a fixture's prompts exercise.

A gate compares next-token distributions on the fixture's prompts and nothing else. A fault confined
to tokens no prompt contains (an embedding row, a byte-fallback path, a tokenizer special case for
digits or another script) moves none of those distributions, so the gate cannot see it; likewise a
fault at positions past the longest prompt. This module counts what the prompts do reach, so the
fixture report and the summary can say plainly what they do not.

Stdlib only, like the rest of kit.core: the tokenizer is read from its ``tokenizer.json`` as JSON,
and each token is turned back into the bytes it stands for, so that tokens are classified by their
text rather than by how one tokenizer family spells them.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import read_json_input
from kit.core.model.modelconfig import model_limits

TOKENIZER_FILE = "tokenizer.json"
EXAMPLES = 5  # never-seen tokens shown per class

# Every vocabulary id falls into exactly one class, tried in this order (see ``classify``).
CLASSES: dict[str, str] = {
    "special": "special tokens (bos, eos, pad, markers)",
    "byte": "no text on its own: control characters, pieces of a multi-byte character",
    "whitespace": "spaces, tabs and newlines only",
    "digits": "ASCII digits",
    "punctuation": "ASCII punctuation and symbols",
    "ascii-word": "ASCII letters: words and word pieces",
    "code": "ASCII mixing letters, digits and symbols: identifiers, operators, markup",
    "non-ascii": "text outside ASCII: other scripts, accents, symbols, emoji",
    "unassigned": "ids of the model's vocabulary that the tokenizer never produces",
}
# Whitespace a token may carry around its text ("Ġthe", "▁(", "\n   return") without changing its class.
_EDGE_SPACE = " \t\n\r\x0b\x0c"
_PUNCT = frozenset(string.punctuation)
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece byte fallback
_METASPACE = "\u2581"  # SentencePiece's visible space


@dataclass(frozen=True)
class TokenVocab:
    """A tokenizer's tokens as the bytes they stand for, and which ids are special."""

    pieces: Mapping[int, bytes]
    special: frozenset[int] = frozenset()

    @property
    def size(self) -> int:
        """One past the largest id the tokenizer knows."""
        return max([*self.pieces, *self.special], default=-1) + 1


def _byte_level_alphabet() -> dict[str, int]:
    """The printable stand-in character for each byte that byte-level BPE (GPT-2 and its heirs) writes
    its tokens in: printable Latin-1 bytes stand for themselves, the rest take 256, 257, ... in order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
            *range(ord("\u00ae"), ord("\u00ff") + 1)]
    kept = set(keep)
    moved = [b for b in range(256) if b not in kept]
    return {**{chr(b): b for b in keep}, **{chr(256 + i): b for i, b in enumerate(moved)}}


def _has_type(node, kind: str) -> bool:
    """Whether a tokenizer.json component (or a Sequence of them) is of ``kind``."""
    if isinstance(node, dict):
        return node.get("type") == kind or any(_has_type(v, kind) for v in node.values()
                                               if isinstance(v, (list, dict)))
    if isinstance(node, list):
        return any(_has_type(v, kind) for v in node)
    return False


def _piece_bytes(token: str, byte_level: dict[str, int] | None, byte_fallback: bool, subword_prefix: str) -> bytes:
    if byte_level is not None:
        if all(ch in byte_level for ch in token):
            return bytes(byte_level[ch] for ch in token)
        return token.encode("utf-8")  # a token outside the alphabet is stored as plain text
    if byte_fallback:
        m = _BYTE_PIECE.fullmatch(token)
        if m:
            return bytes([int(m.group(1), 16)])
    if subword_prefix and token.startswith(subword_prefix) and len(token) > len(subword_prefix):
        token = token[len(subword_prefix):]
    return token.replace(_METASPACE, " ").encode("utf-8")


def token_vocab(doc: dict) -> TokenVocab:
    """The vocabulary of a parsed ``tokenizer.json`` (BPE, WordPiece, WordLevel or Unigram model;
    byte-level, SentencePiece-style or plain spelling) with its added tokens."""
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or "vocab" not in model:
        raise ValueError("no model.vocab")
    byte_level = _byte_level_alphabet() if (_has_type(doc.get("pre_tokenizer"), "ByteLevel")
                                            or _has_type(doc.get("decoder"), "ByteLevel")) else None
    fallback = bool(model.get("byte_fallback")) or _has_type(doc.get("decoder"), "ByteFallback")
    prefix = (model.get("continuing_subword_prefix") or "") if model.get("type") == "WordPiece" else ""
    vocab = model["vocab"]
    # Unigram lists [piece, score] by id; the other models map piece to id.
    entries = [(i, e[0]) for i, e in enumerate(vocab)] if isinstance(vocab, list) else \
        [(i, t) for t, i in vocab.items()]
    pieces = {int(i): _piece_bytes(str(t), byte_level, fallback, prefix) for i, t in entries}
    special = set()
    for added in doc.get("added_tokens") or []:
        i = int(added["id"])
        pieces[i] = str(added["content"]).encode("utf-8")  # added tokens are stored as their text
        if added.get("special"):
            special.add(i)
    return TokenVocab(pieces, frozenset(special))


def load_token_vocab(model_dir: str | Path) -> TokenVocab | None:
    """The vocabulary of a model folder's ``tokenizer.json``; None when the folder has none."""
    path = Path(model_dir) / TOKENIZER_FILE
    if not path.is_file():
        return None
    doc = read_json_input(path, f"tokenizer {path}")
    try:
        return token_vocab(doc)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise BadInput(f"tokenizer {path} is not a tokenizer.json the kit reads: {type(exc).__name__}: {exc}") from None


def token_class(piece: bytes | None, special: bool = False) -> str:
    """The class (a key of ``CLASSES``) of a token that stands for ``piece``; None means no token."""
    if special:
        return "special"
    if piece is None:
        return "unassigned"
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError:
        return "byte"
    if not text or any(unicodedata.category(ch) == "Cc" and ch not in _EDGE_SPACE for ch in text):
        return "byte"
    if text.isspace():  # Unicode spaces too: an ideographic space is layout, not another script
        return "whitespace"
    core = text.strip(_EDGE_SPACE)
    if not core.isascii():
        return "non-ascii"
    if core.isdigit():
        return "digits"
    if all(ch in _PUNCT for ch in core):
        return "punctuation"
    if core.isalpha():
        return "ascii-word"
    return "code"


def shown(piece: bytes) -> str:
    """A token as a reader can see it: its text quoted, escapes for what does not print."""
    try:
        return repr(piece.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(piece)[1:]  # b'\xc3' -> '\xc3'


@dataclass(frozen=True)
class ClassCoverage:
    """One token class: how many vocabulary tokens are in it and how many the prompts contain."""

    name: str
    description: str
    vocab: int  # tokens of the vocabulary in this class
    seen: int  # of those, tokens some prompt contains
    occurrences: int  # how often tokens of this class occur over all prompts
    unseen_examples: tuple[str, ...] = ()  # a few tokens no prompt contains, as shown()

    @property
    def share(self) -> float | None:
        """The share of the class's tokens the prompts contain (None for an empty class)."""
        return self.seen / self.vocab if self.vocab else None

    @property
    def blind(self) -> bool:
        """A class whose tokens no prompt contains, although the tokenizer can produce them."""
        return self.vocab > 0 and self.seen == 0 and self.name != "unassigned"

    def to_dict(self) -> dict:
        """The class's coverage as the fixture report's JSON holds it, with examples of tokens no prompt contains."""
        return {"name": self.name, "description": self.description, "vocab": self.vocab, "seen": self.seen,
                "share": self.share, "occurrences": self.occurrences, "unseen_examples": list(self.unseen_examples)}


@dataclass(frozen=True)
class BucketCoverage:
    """The prompts of one bucket: how many tokens, how many distinct, how long the longest."""

    bucket: int
    prompts: int
    tokens: int
    distinct: int
    share: float | None  # distinct / vocabulary size; None when the size is unknown
    max_tokens: int

    def to_dict(self) -> dict:
        """One bucket's coverage as the fixture report's JSON holds it."""
        return {"bucket": self.bucket, "prompts": self.prompts, "tokens": self.tokens, "distinct": self.distinct,
                "share": self.share, "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class VocabCoverage:
    """What a fixture's prompts exercise of a model's vocabulary and context."""

    fixture_sha256: str
    prompts: int
    tokens: int
    distinct: int
    vocab_size: int | None  # the model's; None when neither a config nor a tokenizer says
    vocab_source: str | None  # where vocab_size comes from, for the reader
    max_tokens: int  # the longest prompt: positions 0 .. max_tokens - 1 are exercised
    context: int | None  # the model's context, when its config states one
    buckets: tuple[BucketCoverage, ...]
    classes: tuple[ClassCoverage, ...] = ()  # empty without a tokenizer
    out_of_vocab: tuple[int, ...] = field(default=())  # prompt token ids at or past vocab_size

    @property
    def share(self) -> float | None:
        """The share of the vocabulary the prompts contain (None where the vocabulary's size is unknown)."""
        return self.distinct / self.vocab_size if self.vocab_size else None

    @property
    def unseen(self) -> int | None:
        """How many vocabulary tokens no prompt contains: a fault confined to them moves no distribution the
        gate compares."""
        return self.vocab_size - self.distinct if self.vocab_size else None

    @property
    def unseen_share(self) -> float | None:
        """The unseen tokens' share of the vocabulary."""
        unseen = self.unseen
        return unseen / self.vocab_size if unseen is not None and self.vocab_size else None

    @property
    def context_share(self) -> float | None:
        """The longest prompt's share of the model's context: positions past it are never exercised."""
        return self.max_tokens / self.context if self.context else None

    @property
    def blind_classes(self) -> list[ClassCoverage]:
        """The token classes no prompt touches: where the gate cannot see a fault at all."""
        return [c for c in self.classes if c.blind]

    def to_dict(self) -> dict:
        """The coverage as `fixture report --json` writes it, every derived share with it so a reader needs
        no arithmetic."""
        return {
            "fixture_sha256": self.fixture_sha256, "prompts": self.prompts, "tokens": self.tokens,
            "distinct": self.distinct, "vocab_size": self.vocab_size, "vocab_source": self.vocab_source,
            "share": self.share, "unseen": self.unseen, "unseen_share": self.unseen_share,
            "max_tokens": self.max_tokens, "context": self.context, "context_share": self.context_share,
            "buckets": [b.to_dict() for b in self.buckets], "classes": [c.to_dict() for c in self.classes],
            "blind_classes": [c.name for c in self.blind_classes], "out_of_vocab": list(self.out_of_vocab),
        }

    def headline(self) -> str:
        """One sentence a reader can act on: the share exercised and what is left blind."""
        if self.vocab_size:
            text = (f"the prompts use {self.distinct} of {self.vocab_size} vocabulary tokens ({self.share:.1%}); "
                    f"{self.unseen} ({self.unseen_share:.1%}) never appear, and a fault on them cannot be seen")
        else:
            text = f"the prompts use {self.distinct} distinct tokens (vocabulary size unknown)"
        blind = self.blind_classes
        if blind:
            text += "; no prompt holds a token of class " + ", ".join(f"{c.name} ({c.vocab})" for c in blind)
        return text

    def positions_line(self) -> str:
        """What the prompts' lengths leave unseen, in one line: the positions past the longest prompt,
        against the model's context where known."""
        if self.context:
            return (f"the longest prompt has {self.max_tokens} tokens, {self.context_share:.1%} of the model's "
                    f"context of {self.context}: a fault past position {self.max_tokens - 1} cannot be seen")
        return f"the longest prompt has {self.max_tokens} tokens (the model's context is unknown)"


def vocab_coverage(fixture_sha256: str, prompts: Sequence, vocab_size: int | None = None,
                   vocab: TokenVocab | None = None, context: int | None = None,
                   vocab_source: str | None = None) -> VocabCoverage:
    """Coverage of ``prompts`` (each with ``bucket`` and ``prompt_token_ids``, as a fixture's) over a
    vocabulary of ``vocab_size`` ids, classified by ``vocab`` when given. Without a size, the
    tokenizer's is taken."""
    if vocab_size is None and vocab is not None:
        vocab_size, vocab_source = vocab.size, "tokenizer"
    counts: Counter[int] = Counter(t for p in prompts for t in p.prompt_token_ids)
    seen = set(counts)
    buckets = []
    for b in sorted({p.bucket for p in prompts}):
        group = [p for p in prompts if p.bucket == b]
        distinct = len({t for p in group for t in p.prompt_token_ids})
        buckets.append(BucketCoverage(b, len(group), sum(len(p.prompt_token_ids) for p in group), distinct,
                                      distinct / vocab_size if vocab_size else None,
                                      max(len(p.prompt_token_ids) for p in group)))
    out = tuple(sorted(t for t in seen if t < 0 or (vocab_size is not None and t >= vocab_size)))
    classes = _classes(vocab, vocab_size, counts) if vocab is not None and vocab_size else ()
    return VocabCoverage(fixture_sha256, len(prompts), sum(counts.values()), len(seen), vocab_size, vocab_source,
                         max((len(p.prompt_token_ids) for p in prompts), default=0), context, tuple(buckets),
                         classes, out)


def fixture_coverage(fixture, model_dir: str | Path | None = None) -> VocabCoverage:
    """Coverage of a loaded fixture over a model folder's vocabulary (its config's size, its tokenizer's
    classes) and context; without a folder, only what the fixture alone says. The caller checks that the
    fixture was tokenized with this folder's tokenizer (``verify_fixture``)."""
    limits = model_limits(model_dir) if model_dir is not None else None
    vocab = load_token_vocab(model_dir) if model_dir is not None else None
    size = limits.vocab_size if limits is not None else None
    return vocab_coverage(fixture.sha256, fixture.prompts, size, vocab, limits.context if limits is not None else None,
                          limits.where("vocab_size") if limits is not None and size is not None else None)


def _classes(vocab: TokenVocab, vocab_size: int, counts: Mapping[int, int]) -> tuple[ClassCoverage, ...]:
    members: dict[str, list[int]] = {name: [] for name in CLASSES}
    for i in range(vocab_size):
        members[token_class(vocab.pieces.get(i), i in vocab.special)].append(i)
    return tuple(
        ClassCoverage(name, CLASSES[name], len(ids), sum(1 for i in ids if i in counts),
                      sum(counts.get(i, 0) for i in ids),
                      tuple(shown(vocab.pieces[i]) if i in vocab.pieces else f"#{i}"
                            for i in _first(ids, counts, EXAMPLES)))
        for name, ids in members.items())


def _first(ids: Iterable[int], counts: Mapping[int, int], n: int) -> list[int]:
    out = []
    for i in ids:
        if i not in counts:
            out.append(i)
            if len(out) == n:
                break
    return out
