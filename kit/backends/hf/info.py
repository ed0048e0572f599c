"""The hf backend's registry record (its entry point names it through the package, kit.backends.hf)."""

from kit.backends.base import BackendInfo

BACKEND = BackendInfo(
    name="hf", summary="transformers + torch; the reference that makes the goldens",
    runtime="kit.backends.hf.runtime", options="kit.backends.hf.options:HfOptions",
    notebook="parity_hf.ipynb", makes_goldens=True, decodes=True, requires=("torch", "transformers"),
    install="pip install 'parity-kit[hf]'", exact_runtime="kit.backends.hf.kernels:exact_runtime",
    legacy_runtime="kit.backends.hf.kernels:legacy_runtime",
    kernel_env="kit.backends.hf.kernels:pin_env",
    warm_imports=("torch", "transformers.models.llama.modeling_llama", "kit.backends.hf.runtime"),
    golden_options="kit.backends.hf.golden:golden_options", golden_flags="kit.backends.hf.golden:golden_flags",
    activations="kit.backends.hf.activations",
)
