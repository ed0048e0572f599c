"""A Hugging Face Llama checkpoint folder held in memory, so that a fault can edit it and write a copy.

A fault is written into the checkpoint itself (config.json and model.safetensors) rather than patched
into one backend's code, so that every backend that reads the folder (hf, vLLM, Levanter on the HF
export) loads the same fault, and the gate is tested as a user would meet the engine bug.

Tensors are edited as float32 copies and written back in the dtype and order the source file has,
with its metadata, through kit.core.model.safetensors_io; every other file of the folder is copied as is.
"""

from __future__ import annotations

import json
import shutil
import struct
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from kit.core.errors import BadInput
from kit.core.model.safetensors_io import read_tensors, write_tensors

WEIGHTS = "model.safetensors"
CONFIG = "config.json"


@dataclass
class Checkpoint:
    config: dict
    tensors: dict[str, np.ndarray]  # float32, writable, in the source file's order
    dtypes: dict[str, str]  # each tensor's safetensors dtype in the source file
    metadata: dict | None

    @property
    def n_layers(self) -> int:
        """The model's number of decoder layers."""
        return int(self.config["num_hidden_layers"])

    @property
    def n_heads(self) -> int:
        """The model's number of attention heads."""
        return int(self.config["num_attention_heads"])

    @property
    def n_kv_heads(self) -> int:
        """The model's number of key and value heads (the attention heads where the config names none)."""
        return int(self.config.get("num_key_value_heads") or self.n_heads)

    @property
    def head_dim(self) -> int:
        """The size of one attention head (the config's, else the hidden size over the heads)."""
        return int(self.config.get("head_dim") or self.config["hidden_size"] // self.n_heads)

    def layer(self, index: int, name: str) -> np.ndarray:
        """One decoder layer's weight, e.g. ``layer(1, "self_attn.o_proj")``."""
        return self.tensors[f"model.layers.{index}.{name}.weight"]

    def set_layer(self, index: int, name: str, value: np.ndarray) -> None:
        """Replace one weight of decoder layer ``index`` (``self_attn.q_proj`` and the like)."""
        self.set(f"model.layers.{index}.{name}.weight", value)

    def set(self, name: str, value: np.ndarray) -> None:
        """Replace a weight by name, refusing another shape: a fault edits values, never the architecture."""
        if value.shape != self.tensors[name].shape:
            raise ValueError(f"{name}: shape {value.shape}, the checkpoint has {self.tensors[name].shape}")
        self.tensors[name] = np.asarray(value, dtype=np.float32)

    def norm_names(self) -> list[str]:
        """Every RMSNorm weight: each layer's two and the final one."""
        return [n for n in self.tensors if n.endswith("layernorm.weight") or n == "model.norm.weight"]


def load_checkpoint(folder: str | Path) -> Checkpoint:
    """A Hugging Face Llama checkpoint (config.json and one model.safetensors) read into memory as float32
    arrays, for a fault to edit; anything else is refused in one line."""
    folder = Path(folder)
    config_path, weights = folder / CONFIG, folder / WEIGHTS
    if not config_path.is_file() or not weights.is_file():
        raise BadInput(f"{folder}: a fault needs a Hugging Face checkpoint with {CONFIG} and one {WEIGHTS}")
    config = json.loads(config_path.read_text())
    if config.get("model_type") != "llama":
        raise BadInput(f"{config_path}: model_type {config.get('model_type')!r}; the fault catalogue edits "
                       "Llama checkpoints")
    with open(weights, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    metadata = header.pop("__metadata__", None)
    order = sorted(header, key=lambda name: header[name]["data_offsets"][0])
    raw = read_tensors(weights)
    tensors = {name: np.array(raw[name], dtype=np.float32) for name in order}
    return Checkpoint(config, tensors, {name: header[name]["dtype"] for name in order}, metadata)


def write_checkpoint(checkpoint: Checkpoint, source: str | Path, out: str | Path) -> Path:
    """The source folder's other files, with this checkpoint's config and weights, in ``out`` (created)."""
    source, out = Path(source), Path(out)
    out.mkdir(parents=True)
    for item in sorted(source.iterdir()):
        if item.name in (CONFIG, WEIGHTS):
            continue
        if item.is_dir():
            shutil.copytree(item, out / item.name)
        else:
            shutil.copy2(item, out / item.name)
    (out / CONFIG).write_text(json.dumps(checkpoint.config, indent=2, sort_keys=True) + "\n")
    with open(out / WEIGHTS, "wb") as f:
        write_tensors(f, [(name, checkpoint.dtypes[name], tuple(t.shape),
                           partial(_stored, t, checkpoint.dtypes[name]))
                          for name, t in checkpoint.tensors.items()], checkpoint.metadata)
    return out


def _stored(tensor: np.ndarray, dtype: str) -> bytes:
    if dtype == "F32":
        return np.ascontiguousarray(tensor, dtype="<f4").tobytes()
    if dtype == "F16":
        return np.ascontiguousarray(tensor, dtype="<f2").tobytes()
    if dtype == "BF16":
        import ml_dtypes

        return np.ascontiguousarray(tensor.astype(ml_dtypes.bfloat16)).tobytes()
    raise BadInput(f"a faulted tensor cannot be stored as {dtype}")
