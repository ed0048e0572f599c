"""The jax backend's registry record (its entry point names it through the package, kit.backends.jax)."""

from kit.backends.base import BackendInfo

BACKEND = BackendInfo(
    name="jax", summary="a plain JAX Llama, independent of transformers",
    runtime="kit.backends.jax.runtime", options="kit.backends.jax.options:JaxOptions",
    notebook="parity_jax.ipynb", requires=("jax",), install="pip install 'parity-kit[jax]'",
    exact_runtime="kit.core.host.runtime:xla_runtime_of",
    activations="kit.backends.jax.activations", placement="kit.backends.jax.activations:placement",
)
