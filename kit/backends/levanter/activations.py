"""The residual stream of one prompt through Levanter's own Llama (for `parity-kit localize`).

Levanter lives in an environment of its own (its pins conflict with the main one's), so the localizer runs
this module there, in the interpreter of the case's kernel, with a request file naming the model, the case's
options and the prompts, and reads back an ``.npz`` of every point. The stream is read by running each
decoder block's own submodules in the block's order (norm, attention, residual add; norm, MLP, residual add)
under haliax's scan over the stacked layers: the same modules, weights and attention setting the case
scores with. Each prompt is padded to its bucket when the case pads (causal attention keeps the padding
out of the real positions), and only its real positions are kept.

    python -m kit.backends.levanter.activations REQUEST.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kit.backends.levanter.runtime import CheckpointFormat
from kit.core.noise.localize import Point, points, stream


def unlocalizable(options: dict) -> str | None:
    """Why a case with ``options`` cannot be localized: the reference cannot load a native checkpoint."""
    if options.get("checkpoint") == CheckpointFormat.NATIVE:
        return ("reads a native Levanter checkpoint, which the hf float32 reference cannot load: localize a case of "
                "the same weights in the HF format")
    return None


def residual_stream(backend, token_ids, bucket: int) -> list[tuple[Point, "object"]]:
    """Every point's hidden states, [positions, hidden] float32 numpy arrays, in forward order.

    ``backend`` is an open kit.backends.levanter.runtime.LevanterBackend."""
    import haliax as hax
    import jax.numpy as jnp
    import numpy as np
    from levanter.models.attention import AttentionMask

    n = len(token_ids)
    length = max(bucket, n) if backend.pad_to_bucket else n
    model = backend._variant(backend.attention_of(bucket))
    ids = np.zeros(length, dtype=np.int32)
    ids[:n] = token_ids
    x0 = model.embeddings.embed(hax.named(jnp.asarray(ids), model.config.Pos.resize(length)))
    mask = AttentionMask.causal()

    def block(x, layer):
        x = x + layer.self_attn(x=layer.input_layernorm(x), mask=mask, key=None)
        after_attention = x
        x = x + layer.mlp(layer.post_attention_layernorm(x), key=None)
        return x, (after_attention, x)

    stack = model.transformer.layers
    _, (attn, mlp) = hax.scan(block, stack.Block)(x0, stack.stacked)

    def real(a) -> np.ndarray:
        return np.asarray(a.array, dtype=np.float32)

    return stream(real(x0)[:n], real(attn)[:, :n], real(mlp)[:, :n])


def write_request(path: Path, model_path: str, options: dict, prompts, out: Path) -> None:
    """The request the localizer hands this module: what to load, with which options, and which prompts."""
    path.write_text(json.dumps({"model_path": model_path, "options": options, "out": str(out),
                                "prompts": [{"id": p.id, "bucket": p.bucket, "ids": list(p.prompt_token_ids)}
                                            for p in prompts]}))


def read_streams(out: Path, count: int) -> list[list[tuple[Point, "object"]]]:
    """What ``main`` wrote: per prompt, its points in forward order (an embeddings point, then two a layer)."""
    import numpy as np

    with np.load(out) as saved:
        order = points((len(saved.files) // count - 1) // 2)
        return [[(p, saved[f"{i}:{k}"]) for k, p in enumerate(order)] for i in range(count)]


def main(argv: list[str]) -> int:
    """Read one localize request (a JSON file), run the prompts through Levanter in its own environment and write
    each point's activations: Levanter cannot run in the main kernel's process."""
    import numpy as np

    from kit.backends.levanter.runtime import LevanterBackend

    request = json.loads(Path(argv[0]).read_text())
    backend = LevanterBackend(request["model_path"], **request["options"])
    try:
        arrays = {}
        for i, prompt in enumerate(request["prompts"]):
            for k, (_, state) in enumerate(residual_stream(backend, prompt["ids"], prompt["bucket"])):
                arrays[f"{i}:{k}"] = state
        np.savez(request["out"], **arrays)
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
