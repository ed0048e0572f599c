"""The residual stream of one prompt through the jax Llama (for `parity-kit localize`).

The same scan and decoder block as the backend's scoring forward (kit.backends.jax.llama), reading the
stream after the embeddings, after each block's attention and after its MLP, at the attention the case
would use for the prompt's length. The prompt runs alone and unpadded, so every position is a real one.
"""

from __future__ import annotations

from kit.backends.jax.choices import Platform
from kit.core.noise.localize import Point, stream


def placement(options: dict) -> dict:
    """Where a jax case runs, said as the reference's device: its platform (a GPU is cuda to torch)."""
    return {"device": "cuda" if options.get("platform") == Platform.GPU else "cpu"}


def residual_stream(backend, token_ids) -> list[tuple[Point, "object"]]:
    """Every point's hidden states, [positions, hidden] float32 numpy arrays, in forward order.

    ``backend`` is an open kit.backends.jax.runtime.JaxBackend."""
    from functools import partial

    import numpy as np

    from kit.backends.jax.llama import residual_stream as scan_stream
    from kit.backends.jax.runtime import choose_attention

    jax = backend._jax
    ids = np.asarray([list(token_ids)], dtype=np.int32)
    attention = choose_attention(backend.attention, backend.dtype, backend.platform, ids.shape[1])
    where = backend.device if backend.tp is None else backend.tp.replicated()
    embedded, attn, mlp = jax.jit(partial(scan_stream, shape=backend.shape, attention=attention, tp=backend.tp))(
        backend.params, jax.device_put(ids, where))

    def host(a):
        return np.asarray(a, dtype=np.float32)

    return stream(host(embedded)[0], host(attn)[:, 0], host(mlp)[:, 0])
