"""vllm: the engine whose releases the gate qualifies, offline or as its OpenAI server."""

from kit.backends.vllm.info import BACKEND

__all__ = ["BACKEND"]
