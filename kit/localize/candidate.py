"""The candidate model folder `localize --model` reads, refused in one line before anything runs unless it can
stand for the case's own model with other weights.

Localize compares residual streams point by point (kit.case.localize): the reference and the clean run on the
case's own model, the candidate on this folder. A folder that is not the same network (another architecture, a
GPT-2 config, zero layers, another width), that holds no weights, whose config is broken, or that is a native
Levanter checkpoint the Hugging Face loaders cannot read, would fail deep in an engine with a traceback, after
the case had run. One whose context is shorter than the prompts the case scores is worse: an engine may cut or
wrap the longer prompts and still hand back curves to compare.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from kit.core.errors import BadInput
from kit.core.records.fixture import Prompt
from kit.core.model.modelconfig import (HF_CONFIG, LEVANTER_CONFIG, SHAPE_KEYS, check_prompts_fit, hf_config,
                                        model_limits)
from kit.core.records.paths import display
from kit.core.records.spec import CaseSpec

# The weight files the localizable backends read (jax and Levanter read safetensors only; hf either).
WEIGHTS = ("*.safetensors", "pytorch_model*.bin")


def check_candidate(spec: CaseSpec, folder: Path, prompts: Sequence[Prompt]) -> None:
    """Refuse ``folder`` as the candidate for ``spec`` unless it is a Hugging Face folder of the case's own network,
    holding weights as the case's model does, with a context that holds every prompt in ``prompts``."""
    where = f"--model {display(folder)}"
    config = _config(folder, where)
    _same_network(config, hf_config(spec.model_path) or {}, spec.name, where)
    _weights(folder, Path(spec.model_path), where)
    check_prompts_fit(((p.id, p.n_tokens) for p in prompts), model_limits(folder), display(folder),
                      prefix=f"{where}: ")


def _config(folder: Path, where: str) -> dict:
    if not folder.is_dir():
        raise BadInput(f"{where}: no such model folder")
    config = hf_config(folder)  # a broken config.json is refused here, naming it
    if config is not None:
        return config
    if (folder / LEVANTER_CONFIG).is_file():
        raise BadInput(f"{where} is a native Levanter checkpoint ({LEVANTER_CONFIG}, no {HF_CONFIG}), which the "
                       "float32 reference cannot load: give the candidate in the HF format")
    raise BadInput(f"{where} has no {HF_CONFIG}: not a Hugging Face model folder")


def _same_network(config: dict, own: dict, case: str, where: str) -> None:
    """Each shape the case's own config states, stated alike (a key the case's model leaves out is not held)."""
    for key in SHAPE_KEYS:
        if key in own and config.get(key) != own[key]:
            found = f"{key} {config[key]!r}" if key in config else f"no {key}"
            raise BadInput(f"{where}: its {HF_CONFIG} has {found}, where case {case}'s model has {own[key]!r}: a "
                           "candidate is the case's own network with other weights")


def _weights(folder: Path, own: Path, where: str) -> None:
    wanted = [pattern for pattern in WEIGHTS if any(own.glob(pattern))] or list(WEIGHTS)
    if not any(any(folder.glob(pattern)) for pattern in wanted):
        raise BadInput(f"{where} holds no weights (no {' or '.join(wanted)} file, as the case's model has)")
