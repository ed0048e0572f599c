"""Tensor parallelism for the plain JAX Llama: which weights are split over the case's devices, and why.

The split is Megatron's: each block costs one all-reduce of the hidden state after attention and one
after the MLP, and nothing else moves between devices.

* Attention: the q, k and v projections are split by their output rows, that is by heads
  (column-parallel), so each device holds whole heads and attends with them alone. The o projection is
  split by its input columns, the same heads (row-parallel): each device's product is a partial sum of
  the hidden state, and one all-reduce adds them. With grouped-query attention a device's query heads
  must read only its own key/value heads, so the degree must divide both the query and the key/value
  head counts (heads are laid out in order, so device j holds query heads j*n/tp.. and the key/value
  heads j*kv/tp.. that serve them).
* MLP: gate and up are split by their output rows (column-parallel), so the SiLU gate is applied to
  whole elements on each device; down is split by its input columns (row-parallel) and its partial sums
  are added by the second all-reduce.
* Embeddings are replicated: the lookup stays local. A vocabulary-split table would need a mask and an
  all-reduce of the whole [batch, seq, hidden] activation (128 MiB at 32K tokens of a 2048-wide bfloat16
  model) to save one table's memory (0.5 GiB for the 1B model's 128K vocabulary).
* The LM head is split by vocabulary rows when the vocabulary divides evenly (else replicated): each
  logit is still one whole dot product over the hidden size, so its value does not depend on the split;
  only the last position is projected, so gathering the logits moves [batch, vocab] floats.
* Norm weights are replicated (they are applied to the all-reduced, replicated hidden state).

What the split changes numerically is the two row-parallel products: each device rounds its partial
sum to the activation dtype before the all-reduce adds them, where one device rounds the whole sum
once. In float32 that is float32 rounding; in bfloat16 it is one more bfloat16 rounding per block,
which is the noise a sharded case shows against the single-device one.

The collectives are not written here: the weights are placed with ``NamedSharding`` and the activations
constrained where the split must hold (q, k and v by heads, a replicated residual stream), and XLA's
partitioner inserts the all-reduces under ``jit``. The attention itself runs under ``shard_map`` on each
device's own heads, so that it needs no partitioning rule of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

AXIS = "tp"

# Our weight name -> the axis of its stacked [layers, out, in] array that is split (None: replicated).
_LAYER_SPLIT = {"wq": 1, "wk": 1, "wv": 1, "wo": 2, "w_gate": 1, "w_up": 1, "w_down": 2,
                "attn_norm": None, "mlp_norm": None}


def tensor_parallel_problem(tp: int, heads: int, kv_heads: int) -> str | None:
    """Why the model cannot be split ``tp`` ways by heads, or None when it can."""
    if tp < 1:
        return f"tensor_parallel = {tp}: must be 1 or more"
    if heads % tp or kv_heads % tp:
        return (f"tensor_parallel = {tp} does not divide the model's {heads} attention heads and {kv_heads} "
                "key/value heads (each device holds whole heads)")
    return None


def layer_split(name: str) -> int | None:
    """Which dimension of a Llama weight is split over the tensor-parallel devices (None: replicated), by the
    weight's name."""
    return _LAYER_SPLIT[name]


@dataclass(frozen=True)
class TensorParallel:
    """A one-axis mesh over the case's devices and where each weight and activation lies on it."""

    mesh: object  # jax.sharding.Mesh
    vocab_split: bool

    @classmethod
    def over(cls, devices, vocab: int) -> "TensorParallel":
        """Tensor parallelism over ``devices``: one mesh axis, the vocabulary split only where the device
        count divides it."""
        import numpy as np
        from jax.sharding import Mesh

        return cls(Mesh(np.array(devices), (AXIS,)), vocab_split=vocab % len(devices) == 0)

    @property
    def size(self) -> int:
        """How many devices the model is split over."""
        return self.mesh.size

    def _named(self, *spec):
        from jax.sharding import NamedSharding, PartitionSpec

        return NamedSharding(self.mesh, PartitionSpec(*spec))

    def replicated(self):
        """The sharding of a value every device holds whole."""
        return self._named()

    def param(self, name: str):
        """The sharding of one entry of ``load_params``: ``layers.wq``, ``embed``, ``lm_head``, ``norm``."""
        if name.startswith("layers."):
            axis = layer_split(name.removeprefix("layers."))
            if axis is None:
                return self.replicated()
            return self._named(*[AXIS if i == axis else None for i in range(3)])
        if name == "lm_head" and self.vocab_split:
            return self._named(AXIS, None)
        return self.replicated()

    def on_own_heads(self, attention):
        """``attention(q, k, v)`` run on each device with its own heads only (``shard_map``): the kernel sees
        local [batch, seq, heads / tp, head_dim] arrays, so no kernel's own partitioning rules (cuDNN's custom
        call has some) decide whether heads move between devices; none do."""
        import jax

        from jax.sharding import PartitionSpec

        spec = PartitionSpec(None, None, AXIS, None)
        return jax.shard_map(attention, mesh=self.mesh, in_specs=(spec, spec, spec), out_specs=spec, check_vma=False)

    # Constraints inside the forward: they pin the split where the partitioner must keep it.
    def heads(self, x):
        """[batch, seq, heads, head_dim] split by heads: attention runs on each device's own heads."""
        import jax

        return jax.lax.with_sharding_constraint(x, self._named(None, None, AXIS, None))

    def whole(self, x):
        """Replicated on every device: the residual stream after each block's all-reduce."""
        import jax

        return jax.lax.with_sharding_constraint(x, self.replicated())
