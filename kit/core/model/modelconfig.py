"""What a model folder's config says about the inputs it takes: its vocabulary and its context.

Fixture making, golden making and the gate's preflight hold prompts and goldens to these before any
engine starts. Otherwise a token id beyond the vocabulary surfaces as the backend's failure ("64/64
failed"), and a prompt beyond the context is truncated or wraps its positions and may still pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from kit.core.errors import BadInput
from kit.core.records.jsonio import read_json_input

HF_CONFIG = "config.json"
LEVANTER_CONFIG = "levanter_config.json"  # a Levanter-native checkpoint's own config
# Where Hugging Face configs state the context, in the order architectures use them.
HF_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
# What makes two configs one network, whose activations line up point by point: the architecture and every shape.
SHAPE_KEYS = ("model_type", "architectures", "num_hidden_layers", "hidden_size", "intermediate_size",
              "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size")


@dataclass(frozen=True)
class ModelLimits:
    source: Path  # the config file the numbers come from
    vocab_size: int | None
    context: int | None
    context_key: str | None  # the config key that states the context, for messages

    def where(self, key: str | None) -> str:
        """Where a limit was read (``key in file``), so a refusal that rests on it names its source."""
        return f"{key} in {self.source}"


def _positive(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def hf_config(model_dir: str | Path) -> dict | None:
    """A Hugging Face folder's config.json, a multimodal config's text part merged in (where its language model's
    shapes are); None when the folder has none. One that is not a JSON object is bad input naming the file."""
    path = Path(model_dir) / HF_CONFIG
    if not path.is_file():
        return None
    doc = read_json_input(path, f"model config {path}")
    if not isinstance(doc, dict):
        raise BadInput(f"model config {path} is not a JSON object")
    text = doc.get("text_config")
    return {**(text if isinstance(text, dict) else {}), **{k: v for k, v in doc.items() if k != "text_config"}}


def model_limits(model_dir: str | Path) -> ModelLimits | None:
    """The limits a model folder's config states; None when it has no config the kit reads."""
    model_dir = Path(model_dir)
    hf, lev = model_dir / HF_CONFIG, model_dir / LEVANTER_CONFIG
    merged = hf_config(model_dir)
    if merged is not None:
        key = next((k for k in HF_CONTEXT_KEYS if _positive(merged.get(k))), None)
        return ModelLimits(hf, _positive(merged.get("vocab_size")), _positive(merged.get(key)) if key else None, key)
    if lev.is_file():
        doc = read_json_input(lev, f"model config {lev}")
        if not isinstance(doc, dict):
            raise BadInput(f"model config {lev} is not a JSON object")
        arch = next((v for v in doc.values() if isinstance(v, dict) and "seq_len" in v), {})
        return ModelLimits(lev, _positive(doc.get("vocab_size")), _positive(arch.get("seq_len")), "seq_len")
    return None


def check_prompts_fit(prompts: Iterable[tuple[str, int]], limits: ModelLimits | None, model: str | Path,
                      prefix: str = "") -> None:
    """Refuse the first prompt (id, token count) longer than the model's context."""
    if limits is None or limits.context is None:
        return
    for prompt_id, n_tokens in prompts:
        if n_tokens > limits.context:
            raise BadInput(f"{prefix}prompt {prompt_id} has {n_tokens} tokens, more than the context of model "
                           f"{model} ({limits.context}, {limits.where(limits.context_key)})")


def check_prompt_tokens(prompts: Iterable[tuple[str, Sequence[int]]], limits: ModelLimits | None, model: str | Path,
                        prefix: str = "") -> None:
    """Refuse the first prompt (id, token ids) holding a token id outside the model's vocabulary: an engine's
    embedding lookup fails on it (an IndexError in the golden maker), or blames the backend for the input."""
    if limits is None or limits.vocab_size is None:
        return
    for prompt_id, ids in prompts:
        outside = next((t for t in ids if not 0 <= t < limits.vocab_size), None)
        if outside is not None:
            raise BadInput(f"{prefix}prompt {prompt_id}: token id {outside} (position {list(ids).index(outside)}) is "
                           f"outside the vocabulary of model {model} ({limits.vocab_size} tokens, "
                           f"{limits.where('vocab_size')})")


def check_top_k_fits(top_k: int, limits: ModelLimits | None, model: str | Path) -> None:
    """A golden cannot keep more tokens than the model's vocabulary holds."""
    if limits is not None and limits.vocab_size is not None and top_k > limits.vocab_size:
        raise BadInput(f"--top-k {top_k} is more than the vocabulary of model {model} "
                       f"({limits.vocab_size} tokens, {limits.where('vocab_size')})")
