"""parity-kit: a Jupyter-native parity gate for LLM inference engine releases."""

__version__ = "0.1.0"
