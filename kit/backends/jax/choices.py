"""The closed sets of words a jax case's options choose from, each one StrEnum (docs/architecture.md,
"Enumerations: one style"): the option schema (kit.backends.jax.options) types its fields with them and the
runtime and the model (kit.backends.jax.runtime, kit.backends.jax.llama) branch on them. A module of its own, so
that both sides import it and neither imports the other back. Stdlib only: it runs in the case's kernel.
"""

from __future__ import annotations

from enum import StrEnum


class Platform(StrEnum):
    """Where a case computes, as its ``platform`` option spells it."""

    CPU = "cpu"
    GPU = "gpu"


class Attention(StrEnum):
    """The attention a case asks for, as its ``attention`` option spells it: the runtime's choice per prompt
    (``choose_attention``), XLA's reference or cuDNN kernel, or the exact query-chunked one
    (kit.backends.jax.llama)."""

    AUTO = "auto"
    XLA = "xla"
    CUDNN = "cudnn"
    CHUNKED = "chunked"


class Padding(StrEnum):
    """How far a prompt is padded, as a case's ``padding`` option spells it: the runtime's choice
    (``choose_padding``), to its bucket's length, or in long buckets to the next quarter of it (``padded_length``)."""

    AUTO = "auto"
    BUCKET = "bucket"
    STEPS = "steps"
