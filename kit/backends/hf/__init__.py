"""hf: transformers + torch, the reference backend that makes the semantic goldens."""

from kit.backends.hf.info import BACKEND

__all__ = ["BACKEND"]
