#!/usr/bin/env python
"""Build the tiny Llama fixture and its prompt set, from nothing, on CPU.

Outputs (paths relative to the current directory, normally the repo root):

* ``fixtures/tiny-llama/``: a 2-layer Llama (float32 safetensors, config,
  generation config) plus a byte-level BPE tokenizer (vocab 768) trained here.
* ``fixtures/tiny-prompts.jsonl``: 64 prompts, 16 in each length bucket of
  128 / 256 / 512 / 1024 tokens (bos included).

Why it looks the way it does:

* A randomly initialised model has nearly flat next-token distributions, so
  any parity bound on logits or top-k agreement between two engines is
  trivially met or meaningless.  The model is therefore *trained*, briefly,
  on a synthetic corpus of highly templated text (tool calls, fact sentences,
  code, chat turns, arithmetic).
* Saturated distributions are no better: when the top-1 probability is ~1.0,
  a real fault (wrong rope_theta, a mis-scaled projection) barely moves any
  probability, and the gate passes it.  So most prompts are cut where the
  corpus itself continues in a few ways and the context sets the odds, and the
  prompts are chosen with the trained model in the loop: a fixed mix of top-1
  bands per bucket (median top-1 about 0.5-0.75, a few confident template
  points), bfloat16 must stay well inside the gate's bound, and among fitting
  candidates the one most moved by two small probe faults wins.  See "Prompts".
  ``--prompts-only`` redoes just this step against an existing model.
* ``head_dim`` is 32 because vLLM's CPU attention backend refuses 16.
* ``num_key_value_heads == num_attention_heads`` because Levanter 1.1 has no
  grouped-query attention.
* Sequences of up to 1024 tokens are trained on so that every position the
  prompts use has been seen.
* Everything is seeded and single-configuration (2 threads): the same command
  on the same machine writes byte-identical files.

No network access is needed; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import itertools
import json
import math
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

CORPUS_SEED = 1234
PROMPT_SEED = 98765
TORCH_SEED = 0

VOCAB_SIZE = 768
SPECIAL_TOKENS = ["<|bos|>", "<|eos|>", "<|pad|>"]  # ids 0, 1, 2
BOS_ID, EOS_ID, PAD_ID = 0, 1, 2
MAX_LEN = 1024

BUCKETS = [128, 256, 512, 1024]
PROMPTS_PER_BUCKET = 16
FIRST_BUCKET_MIN = 40

CATEGORIES = ["tool", "knowledge", "code", "chat", "math"]
SOURCES = {
    "tool": "atlas",
    "knowledge": "longbench",
    "code": "humaneval",
    "chat": "sharegpt",
    "math": "gsm",
}

# ---------------------------------------------------------------------------
# Synthetic corpus
# ---------------------------------------------------------------------------

# river, city it flows through, country whose capital that city is
PLACES = [
    ("Sava", "Zagreb", "Croatia"),
    ("Danube", "Vienna", "Austria"),
    ("Seine", "Paris", "France"),
    ("Thames", "London", "England"),
    ("Tiber", "Rome", "Italy"),
    ("Vltava", "Prague", "Czechia"),
    ("Spree", "Berlin", "Germany"),
    ("Tagus", "Lisbon", "Portugal"),
    ("Vistula", "Warsaw", "Poland"),
    ("Liffey", "Dublin", "Ireland"),
    ("Manzanares", "Madrid", "Spain"),
    ("Amstel", "Amsterdam", "Netherlands"),
]
ELEMENTS = [
    ("Hydrogen", 1), ("Helium", 2), ("Carbon", 6), ("Nitrogen", 7),
    ("Oxygen", 8), ("Neon", 10), ("Sodium", 11), ("Iron", 26),
    ("Copper", 29), ("Silver", 47), ("Gold", 79), ("Lead", 82),
]
CITIES = ["Lyon", "Oslo", "Quito", "Lima", "Cairo", "Kyoto", "Perth", "Tunis",
          "Bergen", "Porto", "Malmo", "Graz"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"]
UNITS = ["km", "mi"]
NAMES = ["Tom", "Ana", "Liam", "Mia", "Omar", "Zoe", "Ivan", "Lea"]
ITEMS = ["apples", "books", "coins", "cards", "pens", "shells"]

# function name -> (argument, operator) for the code generator
CODE_OPS = {
    "scale": ("factor", "*"),
    "shift": ("offset", "+"),
    "reduce": ("amount", "-"),
    "split": ("parts", "//"),
}


class Snippet:
    """Text assembled piece by piece, remembering where a prompt may be cut.

    Both kinds of mark name the position right *after* ``text``:

    * ``add(text, cut=True)``: a *fixed* point; the continuation there is fixed
      by the template (structure, a memorised fact or a value copied from
      earlier in the snippet).
    * ``add(text, choice=True)``: a *choice* point; the corpus continues in a
      few different ways there and the context sets the odds, so even a
      perfect model spreads its probability over several tokens, and gets
      the spread right only by reading the context: whether a number, a
      count or a list of sentences goes on, thanks or a new question, and at
      the start of every snippet, which kind of snippet comes next (the
      document's topic makes one likely).

    Coin flips whose odds never depend on the context (which tool, which
    function, which city) are not marked: there the model returns the corpus
    prior whatever it reads, so a fault in attention or positions cannot show.

    Marks only record offsets: the text, and so the corpus, never depends on them.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.cuts: list[int] = []
        self.choices: list[int] = [0]
        self._len = 0

    def add(self, text: str, cut: bool = False, choice: bool = False) -> "Snippet":
        assert not (cut and choice), "a cut point is either fixed or a choice"
        self.parts.append(text)
        self._len += len(text)
        if cut:
            self.cuts.append(self._len)
        if choice:
            self.choices.append(self._len)
        return self

    def add_number(self, text: str) -> "Snippet":
        """A random number, one character at a time: after each digit it may go on or stop."""
        for ch in text:
            self.add(ch, choice=ch.isdigit())
        return self

    @property
    def text(self) -> str:
        return "".join(self.parts)


def gen_tool(rng: random.Random) -> Snippet:
    s = Snippet()
    fn = rng.choice(["lookup", "weather", "route"])
    city = rng.choice(CITIES)
    s.add('{"tool', cut=True).add('": "atlas.').add(fn).add('", "args', cut=True)
    s.add('": {"', cut=True)
    if fn == "lookup":
        unit = rng.choice(UNITS)
        s.add("city", cut=True).add('": "').add(city).add('", "unit', cut=True).add('": "')
        s.add(unit).add('"}}', cut=True).add("\n")
        s.add("result", cut=True).add(': {"ok', cut=True).add('": true, "city', cut=True)
        s.add('": "', cut=True).add(city, cut=True).add('", "distance": ')
        s.add_number(str(rng.randint(10, 999))).add(', "unit": "', cut=True).add(unit).add('"}\n')
    elif fn == "weather":
        day = rng.choice(DAYS)
        s.add("city", cut=True).add('": "').add(city).add('", "day', cut=True).add('": "')
        s.add(day).add('"}}', cut=True).add("\n")
        s.add("result", cut=True).add(': {"ok', cut=True).add('": true, "city', cut=True)
        s.add('": "', cut=True).add(city, cut=True).add('", "day": "', cut=True).add(day)
        s.add('", "temp": ').add_number(str(rng.randint(-5, 35))).add("}\n")
    else:
        dest = rng.choice([c for c in CITIES if c != city])
        s.add("origin", cut=True).add('": "').add(city).add('", "destination', cut=True)
        s.add('": "').add(dest).add('"}}', cut=True).add("\n")
        s.add("result", cut=True).add(': {"ok', cut=True).add('": true, "origin', cut=True)
        s.add('": "', cut=True).add(city, cut=True).add('", "destination": "', cut=True)
        s.add(dest, cut=True).add('", "hours": ').add_number(str(rng.randint(1, 30))).add("}\n")
    return s


def gen_knowledge(rng: random.Random) -> Snippet:
    s = Snippet()
    for _ in range(rng.randint(2, 4)):
        kind = rng.randrange(4)
        if kind == 3:
            element, number = rng.choice(ELEMENTS)
            s.add("The element").add(f" {element} has", cut=True)
            s.add(" atomic", cut=True).add(" number", cut=True).add(f" {number}.", cut=False)
            s.add("\n", choice=True)
            continue
        river, city, country = rng.choice(PLACES)
        if kind == 0:
            s.add("The river").add(f" {river} flows", cut=True).add(" through", cut=True)
            s.add(f" {city}", cut=True).add(".\n", choice=True)
        elif kind == 1:
            s.add(f"{city} is", cut=True).add(" the", cut=True).add(" capital", cut=True)
            s.add(" of", cut=True).add(f" {country}", cut=True).add(".\n", choice=True)
        else:
            s.add("The capital", cut=True).add(" of").add(f" {country} is", cut=True)
            s.add(f" {city}", cut=True).add(".\n", choice=True)
    return s


def gen_code(rng: random.Random) -> Snippet:
    s = Snippet()
    fn, (arg, op) = rng.choice(sorted(CODE_OPS.items()))
    suffix = rng.choice(CITIES).lower()
    s.add("def").add(f" {fn}_{suffix}(values", cut=True).add(f", {arg}", cut=True)
    s.add("):\n", cut=True).add('    """Return', cut=True).add(" values", cut=True)
    s.add(f' {fn}d by {arg}.', cut=True).add('"""\n', cut=True)
    s.add("    result", cut=True).add(" =", cut=True).add(" []\n", cut=True)
    s.add("    for", cut=True).add(" item", cut=True).add(" in", cut=True).add(" values", cut=True)
    s.add(":\n", cut=True).add("        result", cut=True).add(".append", cut=True)
    s.add("(item", cut=True).add(f" {op}", cut=True).add(f" {arg}", cut=True).add(")\n", cut=True)
    s.add("    return", cut=True).add(" result", cut=True).add("\n\n")
    return s


def gen_chat(rng: random.Random) -> Snippet:
    s = Snippet()
    river, city, country = rng.choice(PLACES)
    if rng.random() < 0.5:
        s.add("User", cut=True).add(":", choice=True).add(" What is the capital of")
        s.add(f" {country}", cut=False).add("?", cut=True).add("\n", cut=True).add("Assistant", cut=True)
        s.add(":", cut=True).add(" The", cut=True).add(" capital", cut=True).add(" of", cut=True)
        s.add(f" {country}", cut=True).add(" is", cut=True).add(f" {city}", cut=True).add(".\n")
    else:
        s.add("User", cut=True).add(":", choice=True).add(" Which river flows through")
        s.add(f" {city}", cut=False).add("?", cut=True).add("\n", cut=True).add("Assistant", cut=True)
        s.add(":", cut=True).add(" The", cut=True).add(" river", cut=True).add(f" {river}", cut=True)
        s.add(" flows", cut=True).add(" through", cut=True).add(f" {city}", cut=True).add(".\n")
    if rng.random() < 0.5:
        s.add("User", cut=True).add(":", choice=True).add(" Thank", cut=True).add(" you", cut=True)
        s.add("!\n", cut=True).add("Assistant", cut=True).add(":", cut=True).add(" You", cut=True)
        s.add(" are", cut=True).add(" welcome", cut=True).add(".\n")
    return s


def gen_math(rng: random.Random) -> Snippet:
    s = Snippet()
    kind = rng.randrange(3)
    if kind == 0:
        for _ in range(rng.randint(2, 4)):
            a, b = rng.randint(1, 49), rng.randint(1, 49)
            s.add(f"{a} +").add(f" {b}", cut=True).add(" =", cut=True).add(f" {a + b}", cut=True)
            s.add(".\n")
    elif kind == 1:
        start = rng.randint(1, 80)
        s.add("Count", cut=True).add(":")
        for i in range(rng.randint(5, 9)):
            s.add(("," if i else "") + f" {start + i}", cut=2 <= i < 4, choice=i >= 4)
        s.add(".\n")
    else:
        name, item = rng.choice(NAMES), rng.choice(ITEMS)
        a, b = rng.randint(2, 20), rng.randint(2, 20)
        s.add(f"{name} has ").add_number(str(a)).add(f" {item}", cut=True).add(".", cut=True)
        s.add(" Then", cut=True).add(" they buy ").add_number(str(b))
        s.add(" more", cut=True).add(".", cut=True)
        s.add(" Now", cut=True).add(f" {name}", cut=True).add(" has", cut=True)
        s.add(f" {a + b} {item}", cut=False).add(".\n")
    return s


GENERATORS = {
    "tool": gen_tool,
    "knowledge": gen_knowledge,
    "code": gen_code,
    "chat": gen_chat,
    "math": gen_math,
}


def pick_category(rng: random.Random, topic: str) -> str:
    """Snippets mostly follow the document's topic, with some of the others mixed in."""
    return topic if rng.random() < 0.7 else rng.choice(CATEGORIES)


def gen_document(rng: random.Random, n_chars: int) -> str:
    topic = rng.choice(CATEGORIES)
    parts, size = [], 0
    while size < n_chars:
        text = GENERATORS[pick_category(rng, topic)](rng).text
        parts.append(text)
        size += len(text)
    return "".join(parts)


def gen_corpus(seed: int, n_docs: int, n_chars: int) -> list[str]:
    rng = random.Random(seed)
    return [gen_document(rng, n_chars) for _ in range(n_docs)]


# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------


def train_tokenizer(corpus: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [BOS_ID, EOS_ID, PAD_ID]
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    return tok


def save_tokenizer(tok: Tokenizer, out: Path) -> None:
    """Write tokenizer.json (merges as "a b" strings) and the HF side files."""
    data = json.loads(tok.to_str())
    data["post_processor"] = None
    data["model"]["merges"] = [
        m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]
    ]
    assert all(len(m.split(" ")) == 2 for m in data["model"]["merges"])
    write_json(out / "tokenizer.json", data, indent=2, sort_keys=False)

    bos, eos, pad = SPECIAL_TOKENS
    write_json(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": pad,
        "model_max_length": MAX_LEN,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
    })
    write_json(out / "special_tokens_map.json",
               {"bos_token": bos, "eos_token": eos, "pad_token": pad})


def check_tokenizer(out: Path, samples: list[str]) -> Tokenizer:
    """Reload with both `tokenizers` and `transformers`; they must agree and round-trip."""
    from transformers import AutoTokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(str(out))
    assert hf.bos_token_id == BOS_ID and hf.eos_token_id == EOS_ID and hf.pad_token_id == PAD_ID
    for text in samples:
        ids = tok.encode(text).ids
        assert BOS_ID not in ids and EOS_ID not in ids, "tokenizer must not add special tokens"
        assert tok.decode(ids) == text, "tokenizers round-trip failed"
        hf_ids = hf(text)["input_ids"]
        assert hf_ids == ids, "transformers and tokenizers disagree"
        assert hf.decode(hf_ids) == text, "transformers round-trip failed"
    return tok


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------


def make_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=MAX_LEN,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        dtype="float32",
        attention_bias=False,
    )
    torch.manual_seed(TORCH_SEED)
    return LlamaForCausalLM(config).to(torch.float32)


def batch_shape(step: int) -> tuple[int, int]:
    """Mostly 16 x 256; every 5th step 4 x 1024 so late positions get trained too."""
    return (4, MAX_LEN) if step % 5 == 4 else (16, 256)


def make_batch(docs: list[list[int]], rng: random.Random, shape: tuple[int, int]) -> torch.Tensor:
    """bos + the start of randomly drawn documents (prompts also start at a doc start)."""
    n, length = shape
    rows = []
    for _ in range(n):
        doc = docs[rng.randrange(len(docs))]
        rows.append([BOS_ID] + doc[: length - 1])
    return torch.tensor(rows, dtype=torch.long)


def lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def train(model, docs: list[list[int]], steps: int, t0: float) -> tuple[float, float]:
    """AdamW with warmup and cosine decay; returns (last loss, mean of the last 50)."""
    rng = random.Random(CORPUS_SEED + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95),
                            weight_decay=0.01, eps=1e-8)
    model.train()
    history: list[float] = []
    recent: list[float] = []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, peak=3e-3, warmup=20)
        batch = make_batch(docs, rng, batch_shape(step))
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = loss.item()
        history.append(loss_value)
        recent.append(loss_value)
        if step % 50 == 0 or step == steps - 1:
            avg = sum(recent) / len(recent)
            print(f"  step {step:4d}  loss {loss_value:.4f}  (avg {avg:.4f})  "
                  f"{time.time() - t0:6.1f}s", flush=True)
            recent = []
    model.eval()
    tail = history[-50:]
    return history[-1], sum(tail) / len(tail)


def save_model(model, out: Path) -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model.save_pretrained(str(out), safe_serialization=True)


# ---------------------------------------------------------------------------
# Prompts
# ---------------------------------------------------------------------------

# Where prompts end.  A parity gate compares next-token probabilities, and an
# error of d in the logits moves a probability p by about p * (1 - p) * d: at a
# saturated cut point (top-1 ~ 1.0) even a real fault (a wrong rope_theta, a
# mis-scaled projection) barely moves anything, and the gate cannot see it.  So
# most prompts end where the next token is genuinely open (a choice point, see
# Snippet), and each prompt is kept only if the trained model's top-1
# probability there falls in the band its slot asks for.  Every bucket gets the
# same mix, which puts the median top-1 between 0.5 and 0.75.
#
# Within its band, a slot takes the candidate a parity gate learns the most
# from: the one whose probabilities move most under two small faults typical of
# inference engines (PROBES).  They are deliberately not the faults the set is
# validated with (rope_theta, v_proj / o_proj scale), so that validation stays
# honest.


@dataclass(frozen=True)
class Band:
    name: str
    lo: float  # the float32 model's top-1 probability must lie in [lo, hi]
    hi: float
    slots: int  # prompts per bucket
    kinds: tuple[str, ...]  # eligible cut points: "choice" and/or "fixed"


BANDS = [
    Band("split", 0.25, 0.50, 4, ("choice",)),  # near-even among a few continuations
    Band("favourite", 0.50, 0.75, 5, ("choice",)),  # one continuation ahead
    Band("lean", 0.75, 0.95, 4, ("choice", "fixed")),  # confident, not saturated
    Band("sure", 0.95, 1.00, 3, ("fixed",)),  # pure template: catches gross faults
]
assert sum(b.slots for b in BANDS) == PROMPTS_PER_BUCKET

# A healthy backend in bfloat16 must pass the gate (bound 0.075 on the top-25
# probabilities) with room to spare, so a cut point where bfloat16 rounding
# alone already moves a probability by more than this (a near tie) is skipped.
GATE_TOP_K = 25
BF16_MAX_ERROR = 0.03

MAX_TRIES = 200  # bodies tried per slot before giving up
CANDIDATES_PER_SLOT = 8  # fitting prompts compared per slot
SCREEN_SLACK = 0.01  # Scorer.screen and a prompt's own forward differ only by rounding

# Small faults used to rank candidates: name -> (parameter suffix, factor),
# applied in every layer.
PROBES = {
    "softmax scale 10% off": ("self_attn.q_proj.weight", 1.1),
    "MLP input norm 10% off": ("post_attention_layernorm.weight", 1.1),
}

# Reported: prompts whose next token is genuinely uncertain.  Enforced: the
# median top-1, below which the set has drifted back towards saturation.
UNCERTAIN = (0.2, 0.8)
MIN_MEDIAN_TOP1 = 0.3


def perturbed(model, suffix: str, factor: float):
    """A copy of ``model`` with every parameter named ``*suffix`` scaled by ``factor``."""
    copy_ = copy.deepcopy(model)
    with torch.no_grad():
        for name, param in copy_.named_parameters():
            if name.endswith(suffix):
                param.mul_(factor)
    return copy_.eval()


class Scorer:
    """Last-position next-token probabilities, computed the way a golden is
    (bos + prompt, no cache), of the float32 model and of variants of it: a
    bfloat16 copy (healthy) and the PROBES (faulty)."""

    def __init__(self, model, tok: Tokenizer) -> None:
        self.tok = tok
        self.f32 = model.eval()
        self.bf16 = copy.deepcopy(model).to(torch.bfloat16).eval()
        self.probes = [perturbed(model, *probe) for probe in PROBES.values()]
        self._golden: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def probs(self, prompt: str, model=None) -> torch.Tensor:
        ids = torch.tensor([[BOS_ID] + self.tok.encode(prompt).ids])
        logits = (model or self.f32)(input_ids=ids, logits_to_keep=1).logits[0, -1]
        return torch.softmax(logits.float(), dim=-1)

    @torch.no_grad()
    def screen(self, text: str, max_tokens: int) -> list[float]:
        """Top-1 probability at every position of bos + text, from one forward
        pass: the model is causal, so position i sees what a prompt of i + 1
        tokens would (up to rounding; ``fits`` re-checks the real prompt)."""
        ids = torch.tensor([([BOS_ID] + self.tok.encode(text).ids)[:max_tokens]])
        logits = self.f32(input_ids=ids).logits[0].float()
        return torch.softmax(logits, dim=-1).max(dim=-1).values.tolist()

    def golden(self, prompt: str) -> torch.Tensor:
        if prompt not in self._golden:
            self._golden[prompt] = self.probs(prompt)
        return self._golden[prompt]

    def top1(self, prompt: str) -> float:
        return self.golden(prompt).max().item()

    def error(self, prompt: str, model) -> float:
        """Max |p_model - p_f32| over the float32 top-k, as the gate measures it."""
        golden = self.golden(prompt)
        top = torch.topk(golden, GATE_TOP_K).indices
        return (self.probs(prompt, model)[top] - golden[top]).abs().max().item()

    def bf16_error(self, prompt: str) -> float:
        return self.error(prompt, self.bf16)

    def sensitivity(self, prompt: str) -> float:
        """How far the PROBES move the prompt's probabilities, summed."""
        return sum(self.error(prompt, probe) for probe in self.probes)

    def fits(self, prompt: str, band: Band) -> bool:
        return (band.lo <= self.top1(prompt) <= band.hi
                and self.bf16_error(prompt) <= BF16_MAX_ERROR)


def n_tokens(tok: Tokenizer, text: str) -> int:
    return 1 + len(tok.encode(text).ids)  # bos + text


def aligned_cuts(tok: Tokenizer, snippet: Snippet, prefix: str,
                 kinds: tuple[str, ...]) -> list[tuple[int, int]]:
    """(cut, token count incl. bos) for the cut points of the given kinds whose
    prompt tokenises as a prefix of the uncut text.

    Otherwise the prompt would end in a token the model never saw there.
    """
    marks = ((snippet.cuts if "fixed" in kinds else [])
             + (snippet.choices if "choice" in kinds else []))
    full_ids = tok.encode(prefix + snippet.text).ids
    good = []
    for cut in sorted(set(marks)):
        ids = tok.encode(prefix + snippet.text[:cut]).ids
        if ids == full_ids[: len(ids)] and len(ids) < len(full_ids):
            good.append((cut, 1 + len(ids)))
    return good


def make_body(tok: Tokenizer, rng: random.Random, category: str, target: int) -> str:
    """Whole snippets, mostly of ``category`` (as in a corpus document on that
    topic), until about ``target`` tokens."""
    body = ""
    while True:
        text = GENERATORS[pick_category(rng, category)](rng).text
        if n_tokens(tok, body + text) > target - 24:
            return body
        body += text


def candidates(tok: Tokenizer, rng: random.Random, scorer: Scorer, category: str,
               band: Band, lo: int, hi: int) -> Iterator[str]:
    """Prompts that fit a slot: a body of whole snippets, then one snippet of
    ``category`` cut at an eligible point of ``band``; token count (bos incl.)
    in (lo, hi].  At most one per body, for variety."""
    for _ in range(MAX_TRIES):
        body = make_body(tok, rng, category, rng.randint(lo + 1 + (hi - lo) // 4, hi))
        tail = GENERATORS[category](rng)
        cuts = [(cut, n) for cut, n in aligned_cuts(tok, tail, body, band.kinds) if lo < n <= hi]
        if not cuts:
            continue
        top1 = scorer.screen(body + tail.text, hi)
        rng.shuffle(cuts)
        for cut, n in cuts:
            prompt = body + tail.text[:cut]
            screened = band.lo - SCREEN_SLACK <= top1[n - 1] <= band.hi + SCREEN_SLACK
            if screened and scorer.fits(prompt, band):
                yield prompt
                break


def make_prompt(tok: Tokenizer, rng: random.Random, scorer: Scorer, category: str,
                band: Band, lo: int, hi: int) -> str:
    """The most fault-sensitive of the first few candidates for a slot."""
    found = list(itertools.islice(candidates(tok, rng, scorer, category, band, lo, hi),
                                  CANDIDATES_PER_SLOT))
    if not found:
        raise RuntimeError(f"could not build a {category} prompt in ({lo}, {hi}] "
                           f"with top-1 in [{band.lo}, {band.hi}]")
    return max(found, key=scorer.sensitivity)


def make_prompts(tok: Tokenizer, scorer: Scorer) -> list[dict]:
    """16 prompts per bucket: categories rotate over all 64 slots, bands repeat
    per bucket, so each band meets different categories in different buckets."""
    rng = random.Random(PROMPT_SEED)
    slot_bands = [band for band in BANDS for _ in range(band.slots)]
    counters = {c: 0 for c in CATEGORIES}
    prompts = []
    lo = FIRST_BUCKET_MIN - 1
    for b, hi in enumerate(BUCKETS):
        for i, band in enumerate(slot_bands):
            category = CATEGORIES[(b * PROMPTS_PER_BUCKET + i) % len(CATEGORIES)]
            pid = f"{category}-{SOURCES[category]}-{counters[category]:02d}"
            counters[category] += 1
            prompt = make_prompt(tok, rng, scorer, category, band, lo, hi)
            prompts.append({"id": pid, "prompt": prompt, "bucket": hi,
                            "category": category, "band": band.name})
        lo = hi
    return prompts


def write_prompts(prompts: list[dict], path: Path) -> None:
    rows = sorted(({"id": p["id"], "prompt": p["prompt"]} for p in prompts),
                  key=lambda r: r["id"])
    assert len({r["id"] for r in rows}) == len(rows) == len(BUCKETS) * PROMPTS_PER_BUCKET
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")


def summary(values: list[float]) -> str:
    q1, med, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (f"min {min(values):.3f}  q1 {q1:.3f}  median {med:.3f}  q3 {q3:.3f}  "
            f"max {max(values):.3f}")


def report_confidence(prompts: list[dict], probs: list[float], bf16: list[float]) -> float:
    """Print the top-1 distribution, overall and per bucket / category / band;
    return its median."""

    def uncertain(vals: list[float]) -> int:
        return sum(UNCERTAIN[0] <= v <= UNCERTAIN[1] for v in vals)

    print(f"top-1 next-token probability over {len(probs)} prompts: {summary(probs)}")
    print(f"  {uncertain(probs)} prompts with top-1 in [{UNCERTAIN[0]}, {UNCERTAIN[1]}]; "
          f"bfloat16 max error {max(bf16):.4f} (median {statistics.median(bf16):.4f})")
    groups = ([(f"bucket {hi:4d}", "bucket", hi) for hi in BUCKETS]
              + [(f"{cat:11s}", "category", cat) for cat in CATEGORIES]
              + [(f"{band.name:11s}", "band", band.name) for band in BANDS])
    for label, key, value in groups:
        vals = [pr for p, pr in zip(prompts, probs) if p[key] == value]
        print(f"  {label}: median {statistics.median(vals):.3f}  min {min(vals):.3f}  "
              f"max {max(vals):.3f}  uncertain {uncertain(vals):2d}  (n={len(vals)})")
    return statistics.median(probs)


# ---------------------------------------------------------------------------


def write_json(path: Path, obj, indent: int = 2, sort_keys: bool = True) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=False) + "\n")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_fixture(out: Path, steps: int, t0: float) -> str:
    """Corpus, tokenizer and trained model, written to ``out``; returns a loss line."""
    corpus = gen_corpus(CORPUS_SEED, n_docs=1500, n_chars=4500)
    print(f"corpus: {len(corpus)} docs, {sum(map(len, corpus))} chars  "
          f"{time.time() - t0:.1f}s", flush=True)

    save_tokenizer(train_tokenizer(corpus), out)
    samples = [doc[:2000] for doc in corpus[:20]] + ['{"tool": "atlas.', "17 + 25 =", ""]
    tok = check_tokenizer(out, samples)
    docs = [enc.ids for enc in tok.encode_batch(corpus)]
    n_tok = sum(map(len, docs))
    print(f"tokenizer: vocab {tok.get_vocab_size()}, {n_tok} corpus tokens "
          f"({sum(map(len, corpus)) / n_tok:.2f} chars/token), "
          f"shortest doc {min(map(len, docs))} tokens  {time.time() - t0:.1f}s", flush=True)

    model = make_model()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters; training {steps} steps", flush=True)
    last_loss, tail_loss = train(model, docs, steps, t0)
    save_model(model, out)
    return f"final loss {last_loss:.4f} (mean of last 50 steps {tail_loss:.4f})"


def load_fixture(out: Path):
    """Tokenizer and float32 model as written to ``out``.

    Prompts are always chosen with the model read back from disk, so that a
    full run and ``--prompts-only`` pick the same prompts.
    """
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    model = LlamaForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    return tok, model.eval()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="fixtures/tiny-llama", type=Path)
    ap.add_argument("--prompts", default="fixtures/tiny-prompts.jsonl", type=Path)
    ap.add_argument("--steps", default=300, type=int)
    ap.add_argument("--prompts-only", action="store_true",
                    help="keep the model in --out as it is; only choose and write the prompts")
    args = ap.parse_args(argv)

    t0 = time.time()
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    random.seed(CORPUS_SEED)
    if args.prompts_only:
        trained = "model kept as it was"
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        trained = build_fixture(args.out, args.steps, t0)

    tok, model = load_fixture(args.out)
    scorer = Scorer(model, tok)
    prompts = make_prompts(tok, scorer)
    write_prompts(prompts, args.prompts)
    print(f"prompts: {len(prompts)} chosen  {time.time() - t0:.1f}s", flush=True)
    median = report_confidence(prompts, [scorer.top1(p["prompt"]) for p in prompts],
                               [scorer.bf16_error(p["prompt"]) for p in prompts])

    print(f"{trained}; total {time.time() - t0:.1f}s")
    for path in sorted(args.out.iterdir()) + [args.prompts]:
        print(f"  {path}  {path.stat().st_size:>9d} B  sha256 {sha256(path)[:16]}")
    if median < MIN_MEDIAN_TOP1:
        print(f"FAIL: median top-1 probability {median:.3f} < {MIN_MEDIAN_TOP1}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
