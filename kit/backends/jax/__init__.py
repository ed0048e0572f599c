"""jax: a plain JAX Llama over the same safetensors, an implementation that shares no code with hf."""

from kit.backends.base import BackendInfo

BACKEND = BackendInfo(
    name="jax", summary="a plain JAX Llama, independent of transformers",
    runtime="kit.backends.jax.runtime", options="kit.backends.jax.options:JaxOptions",
    notebook="parity_jax.ipynb", requires=("jax",), install="pip install 'parity-kit[jax]'",
    exact_runtime="kit.core.host.runtime:xla_runtime_of",
    activations="kit.backends.jax.activations", placement="kit.backends.jax.activations:placement",
)
