"""Levanter 1.1 (JAX): the training stack's own forward pass, from an HF export or a native checkpoint.

Runs only in the Levanter kernel (``.venv-levanter``): Levanter's pins conflict with
the main environment's. Prompts are padded to their bucket's length so that XLA
compiles once per bucket instead of once per prompt length; the causal mask keeps
the padding out of every real position, and the last real position is gathered
before the vocabulary projection.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from pathlib import Path
from typing import Mapping, Sequence

from kit.core.errors import BadInput
from kit.core.records.fixture import Prompt
from kit.core.records.records import Observation
from kit.core.records.spec import CaseSpec


class LevanterAttention(StrEnum):
    """A bucket's attention implementation, as a case's ``attention`` option (bucket -> implementation) spells it."""

    REFERENCE = "reference"
    FLASH = "flash"


class CheckpointFormat(StrEnum):
    """A model folder's format, as a case's ``checkpoint`` option spells it: an HF export or a Levanter
    tensorstore checkpoint."""

    HF = "hf"
    NATIVE = "native"


# The real gate's rule: materialized attention is fine through 4K tokens; beyond, only flash fits.
FLASH_ABOVE = 4096
FLASH_BLOCK_SIZE = 128
ROPE_BASE = 10000.0  # Levanter 1.1's LlamaRotaryEmbedding default, which its Llama never overrides
NATIVE_CONFIG = "levanter_config.json"  # written beside a native checkpoint: the template's shape


def attention_for(bucket: int, overrides: Mapping[str, str] | None = None, flash_above: int = FLASH_ABOVE) -> str:
    """The attention implementation one bucket runs with: the descriptor's choice, else the rule."""
    chosen = (overrides or {}).get(str(bucket))
    if chosen is not None:
        return chosen
    return LevanterAttention.FLASH if bucket > flash_above else LevanterAttention.REFERENCE


def checkpoint_format(folder: str | Path) -> str:
    """``native`` for a Levanter tensorstore checkpoint, ``hf`` for an HF export."""
    root = Path(folder)
    if (root / "metadata.json").is_file() and (root / "model").is_dir():
        return CheckpointFormat.NATIVE
    if (root / "config.json").is_file():
        return CheckpointFormat.HF
    raise BadInput(f"model folder {folder} holds neither an HF export (config.json) "
                   "nor a Levanter checkpoint (metadata.json and model/)")


class LevanterBackend:
    name = "levanter"

    def __init__(self, model_path: str, checkpoint: str = CheckpointFormat.HF,
                 attention: Mapping[str, str] | None = None,
                 flash_above: int = FLASH_ABOVE, flash_block_size: int = FLASH_BLOCK_SIZE,
                 pad_to_bucket: bool = True, threads: int = 1, device: str = "cpu"):
        found = checkpoint_format(model_path)
        if found != checkpoint:
            raise BadInput(f"model folder {model_path} is a {found} checkpoint, but the case asks for {checkpoint}")
        bad = {b: a for b, a in (attention or {}).items() if a not in tuple(LevanterAttention)}
        if bad:
            raise BadInput(f"attention {bad}: expected one of {', '.join(LevanterAttention)}")
        _configure_xla(threads, device)
        self.model_path, self.checkpoint, self.device = str(model_path), checkpoint, device
        self.attention, self.flash_above = dict(attention or {}), flash_above
        self.flash_block_size, self.pad_to_bucket = flash_block_size, pad_to_bucket
        t0 = time.perf_counter()
        self.model = load_native(model_path) if checkpoint == CheckpointFormat.NATIVE else load_hf(model_path)
        self.load_s = time.perf_counter() - t0
        self._variants: dict[str, object] = {}  # built from the loaded weights, whatever their config says
        self._details: dict = {}

    def release(self) -> dict:
        """What identifies this build for the record: levanter, jax, jaxlib, haliax, equinox and Python
        versions, the checkpoint kind and the device."""
        import jax

        versions = {dist: _version(dist) for dist in ("levanter", "jax", "jaxlib", "haliax", "equinox")}
        return {"backend": self.name, **versions, "python": platform.python_version(),
                "dtype": "float32", "checkpoint": self.checkpoint,
                "device": str(jax.devices()[0].platform)}

    def details(self) -> dict:
        """How each bucket's prompts were run (attention and padding), for the case's record."""
        return self._details

    def attention_of(self, bucket: int) -> str:
        """The attention a bucket's prompts run with: the descriptor's choice for that bucket, else flash
        above the case's length threshold and the reference one up to it."""
        return attention_for(bucket, self.attention, self.flash_above)

    def observe(self, prompts: Sequence[Prompt], top_n: int) -> list[Observation]:
        """Each prompt's top ``top_n`` next-token logprobs, each bucket under the attention its length takes."""
        import numpy as np

        per_bucket: dict[str, dict] = {}
        out = []
        for prompt in prompts:
            impl = self.attention_of(prompt.bucket)
            length = prompt.bucket if self.pad_to_bucket else prompt.n_tokens
            if prompt.n_tokens > length:
                raise BadInput(f"prompt {prompt.id} has {prompt.n_tokens} tokens, more than its bucket {prompt.bucket}")
            if length > self.model.config.seq_len:  # the rotary tables stop there
                raise BadInput(f"prompt {prompt.id}: length {length} exceeds the model's context "
                               f"{self.model.config.seq_len}")
            if impl == LevanterAttention.FLASH and length % self.flash_block_size:
                raise BadInput(f"prompt {prompt.id}: flash attention needs a length that is a multiple of its block "
                               f"size {self.flash_block_size}, got {length} (bucket {prompt.bucket}); "
                               "pad to the bucket or choose reference attention for it")
            ids = np.zeros(length, dtype=np.int32)
            ids[: prompt.n_tokens] = prompt.prompt_token_ids
            t0 = time.perf_counter()
            logprobs = self._last_logprobs(self._variant(impl), ids, prompt.n_tokens - 1)
            elapsed = time.perf_counter() - t0
            stats = per_bucket.setdefault(str(prompt.bucket), {"attention": impl, "length": length, "prompts": 0,
                                                             "first_call_s": elapsed, "rest_s": 0.0})
            stats["prompts"] += 1
            stats["length"] = max(stats["length"], length)
            if stats["prompts"] > 1:
                stats["rest_s"] += elapsed
            order = np.argsort(-logprobs, kind="stable")[: min(top_n, logprobs.shape[0])]
            top = tuple((int(t), float(logprobs[t])) for t in order)
            out.append(Observation(prompt.id, top, prompt.n_tokens))
        self._details = {
            "attention": {b: s["attention"] for b, s in per_bucket.items()},
            "flash_block_size": self.flash_block_size,
            "padded_to_bucket": self.pad_to_bucket,
            # The longest sequence each bucket ran at: its bucket when padded, its longest prompt if not.
            "length": {b: s["length"] for b, s in per_bucket.items()},
            "checkpoint": self.checkpoint,
            "load_s": round(self.load_s, 3),
            # The first call of a bucket compiles; the rest show what a compiled call costs.
            "timing_s": {b: {"first_call": round(s["first_call_s"], 3),
                             "per_prompt_after": round(s["rest_s"] / max(1, s["prompts"] - 1), 4)}
                         for b, s in per_bucket.items()},
        }
        return out

    def _variant(self, impl: str):
        """The same weights under another attention setting (the setting is static model structure)."""
        if impl not in self._variants:
            import dataclasses

            import equinox as eqx
            import jax
            from levanter.models.llama import LlamaLMHeadModel

            config = dataclasses.replace(self.model.config, use_flash_attention=impl == LevanterAttention.FLASH,
                                         flash_attention_block_size=self.flash_block_size)
            shape = eqx.filter_eval_shape(LlamaLMHeadModel.init, self.model.Vocab, config, key=jax.random.PRNGKey(0))
            leaves = jax.tree_util.tree_leaves(self.model)
            self._variants[impl] = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), leaves)
        return self._variants[impl]

    def _last_logprobs(self, model, ids, last: int):
        import haliax as hax
        import jax.numpy as jnp
        import numpy as np

        Pos = model.config.Pos.resize(len(ids))
        # Levanter 1.1's flash attention prints its blocks while it is traced; keep notebooks readable.
        with contextlib.redirect_stdout(io.StringIO()):
            result = _jitted()(model, hax.named(jnp.asarray(ids), Pos), jnp.asarray(last, dtype=jnp.int32))
        return np.asarray(result)

    def close(self) -> None:
        """Drop the model and its variants, so that the next case in a warm kernel gets the memory back."""
        self.model = None
        self._variants = {}


_JIT = None


def _jitted():
    """One jitted scorer per process; jax compiles it once per (model structure, padded length)."""
    global _JIT
    if _JIT is None:
        import equinox as eqx
        import jax
        import jax.numpy as jnp
        from levanter.models.attention import AttentionMask

        @eqx.filter_jit
        def last_logprobs(model, ids, last):
            x = model.embeddings.embed(ids)
            x = model.transformer(x, attn_mask=AttentionMask.causal(), key=None)
            logits = model.lm_head(x["position", last], key=None)  # the vocabulary projection of one position
            return jax.nn.log_softmax(logits.array.astype(jnp.float32))

        _JIT = last_logprobs
    return _JIT


def check_hf_config(folder: str | Path) -> None:
    """Refuse what Levanter 1.1's Llama cannot represent, instead of silently computing another model."""
    doc = json.loads((Path(folder) / "config.json").read_text())
    rope = doc.get("rope_parameters") or doc.get("rope_scaling") or {}
    theta = rope.get("rope_theta", doc.get("rope_theta", ROPE_BASE))
    heads = doc.get("num_attention_heads")
    problems = []
    if float(theta) != ROPE_BASE:
        problems.append(f"RoPE base {theta:g} (Levanter 1.1 hard-codes {ROPE_BASE:g})")
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        problems.append(f"RoPE scaling {rope.get('rope_type', rope.get('type'))!r} (Levanter 1.1 has none)")
    if doc.get("num_key_value_heads", heads) != heads:
        problems.append(f"{doc['num_key_value_heads']} key/value heads for {heads} heads "
                        "(Levanter 1.1 has no grouped-query attention)")
    if doc.get("head_dim") not in (None, doc["hidden_size"] // heads):
        problems.append(f"head_dim {doc['head_dim']} != hidden_size / heads")
    if problems:
        raise BadInput(f"model folder {folder}: config.json asks for {'; '.join(problems)}")


def load_hf(folder: str | Path):
    """An HF export through Levanter's own converter, built from the folder (no hub access)."""
    import transformers

    check_hf_config(folder)
    from levanter.compat.hf_checkpoints import HFCheckpointConverter
    from levanter.models.llama import LlamaConfig, LlamaLMHeadModel

    folder = str(folder)
    converter = HFCheckpointConverter(LlamaConfig, reference_checkpoint=folder,
                                      HfConfigClass=transformers.LlamaConfig, tokenizer=folder)
    # The model's vocabulary is what is scored; never resize it to the tokenizer's.
    return converter.load_pretrained(LlamaLMHeadModel, folder, resize_vocab_to_match_tokenizer=False)


def native_template(config_path: str | Path):
    """The model's shape (no weights) from the config written beside a native checkpoint."""
    import equinox as eqx
    import haliax as hax
    import jax
    from levanter.models.llama import LlamaConfig, LlamaLMHeadModel

    doc = json.loads(Path(config_path).read_text())
    config = LlamaConfig(**doc["llama"])
    Vocab = hax.Axis("vocab", int(doc["vocab_size"]))
    return eqx.filter_eval_shape(LlamaLMHeadModel.init, Vocab, config, key=jax.random.PRNGKey(0))


def load_native(folder: str | Path):
    """A native (tensorstore) Levanter checkpoint loaded onto one device, its model template built from the
    folder's config; a folder without one is refused in one line."""
    import jax
    import numpy as np
    from levanter.checkpoint import load_checkpoint

    config_path = Path(folder) / NATIVE_CONFIG
    if not config_path.is_file():
        raise BadInput(f"native checkpoint {folder} has no {NATIVE_CONFIG} to build the model template from")
    # A shape-only template carries no placement: name one device, every array on it whole.
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    template = native_template(config_path)
    # The reader calls asyncio.run, which refuses to run inside a notebook kernel's event loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        loaded = pool.submit(load_checkpoint, template, None, str(folder), discover_latest=False,
                             axis_mapping={}, mesh=mesh).result()
    if loaded is None:
        raise BadInput(f"native checkpoint {folder} could not be read by levanter.checkpoint.load_checkpoint")
    return loaded[0]


def save_native(model, folder: str | Path) -> Path:
    """Write ``model`` as a Levanter checkpoint plus the config its template is built from."""
    import dataclasses

    from levanter.checkpoint import save_checkpoint

    folder = Path(folder)
    if folder.exists():
        raise BadInput(f"{folder} exists; a native checkpoint is written once (move it away first)")
    save_checkpoint(model, None, 0, str(folder))
    doc = {"llama": dataclasses.asdict(model.config), "vocab_size": model.Vocab.size}
    (folder / NATIVE_CONFIG).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return folder


ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def xla_env(options: Mapping) -> dict[str, str]:
    """What a case kernel with ``options`` starts with: JAX's platform and, on one thread, XLA's single-threaded
    CPU flags, where the environment does not set them already (a user's own settings win). JAX reads its
    ``JAX_*`` settings when it is imported, so they are in the kernel's environment from its start, as the
    backend's ``kernel_env``; a warm process that imports JAX for the kernels it forks then reads the same."""
    env = {}
    if "JAX_PLATFORMS" not in os.environ:
        env["JAX_PLATFORMS"] = str(options.get("device", "cpu"))
    if int(options.get("threads", 1)) == 1 and "XLA_FLAGS" not in os.environ:
        env["XLA_FLAGS"] = ONE_THREAD_XLA
    return env


def _configure_xla(threads: int, device: str) -> None:
    """Must run before JAX creates its backend: a case runs beside others, one core each. In a case kernel the
    settings are there from its start (``xla_env``); this covers the runtime opened outside one."""
    os.environ.update(xla_env({"threads": threads, "device": device}))


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def open_backend(spec: CaseSpec) -> LevanterBackend:
    """The Levanter backend of a case. The options arrive resolved: every default was applied by the
    descriptor's schema, the one place they are stated."""
    return LevanterBackend(spec.model_path, **spec.options)
