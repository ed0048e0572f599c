"""levanter: Levanter 1.1's own forward pass, in an environment of its own (its pins conflict with vLLM's)."""

from kit.backends.levanter.info import BACKEND

__all__ = ["BACKEND"]
