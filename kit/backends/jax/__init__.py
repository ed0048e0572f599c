"""jax: a plain JAX Llama over the same safetensors, an implementation that shares no code with hf."""

from kit.backends.jax.info import BACKEND

__all__ = ["BACKEND"]
