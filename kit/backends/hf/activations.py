"""The residual stream of one prompt through an hf model, read with forward hooks (for `parity-kit localize`).

Hooks read what the model computes and change nothing: the embeddings' output, the input of each block's
``post_attention_layernorm`` (the residual stream after attention, exactly as the block adds it) and each
block's output (after the MLP). The prompt runs alone and unpadded, under the backend's own dtype,
attention implementation and SDPA kernel choice, so the states are the ones its case scores.
"""

from __future__ import annotations

from kit.core.errors import BadInput
from kit.core.noise.localize import Point, Sublayer, points


def residual_stream(backend, token_ids) -> list[tuple[Point, "object"]]:
    """Every point's hidden states, [positions, hidden] float32 numpy arrays, in forward order.

    ``backend`` is an open kit.backends.hf.runtime.HfBackend."""
    torch = backend._torch
    model = backend.model
    decoder = model.get_decoder()
    layers = list(decoder.layers)
    for i, layer in enumerate(layers):
        if not hasattr(layer, "post_attention_layernorm"):
            raise BadInput(f"localize reads the residual stream of pre-norm decoder blocks (Llama's); block {i} "
                           f"of this model ({type(layer).__name__}) has no post_attention_layernorm")
    states: dict[Point, object] = {}

    def keep(point: Point, tensor) -> None:
        states[point] = tensor[0].detach().float().cpu().numpy()

    hooks = [decoder.embed_tokens.register_forward_hook(lambda m, a, out: keep(points(0)[0], out))]
    for i, layer in enumerate(layers):
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(
            lambda m, args, i=i: keep(Point(i, Sublayer.ATTENTION), args[0])))
        hooks.append(layer.register_forward_hook(
            lambda m, args, out, i=i: keep(Point(i, Sublayer.MLP), out[0] if isinstance(out, tuple) else out)))
    try:
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=backend.device)
        with torch.inference_mode(), backend._sdpa_context():
            model(input_ids=ids, logits_to_keep=1, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    order = points(len(layers))
    return [(p, states[p]) for p in order]
