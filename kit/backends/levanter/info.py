"""The levanter backend's registry record (its entry point names it through the package, kit.backends.levanter)."""

from kit.backends.base import BackendInfo

BACKEND = BackendInfo(
    name="levanter", summary="Levanter 1.1 (JAX), an HF export or a native checkpoint",
    runtime="kit.backends.levanter.runtime", options="kit.backends.levanter.options:LevanterOptions",
    notebook="parity_levanter.ipynb", kernel="parity-kit-levanter", makes_goldens=True,
    # Checked in the main environment only when a case runs there; its own kernel is checked by the preflight.
    requires=("levanter",), install="scripts/ensure-levanter-env.sh (its own venv and kernel)",
    exact_runtime="kit.core.host.runtime:xla_runtime_of",
    golden_options="kit.backends.levanter.golden:golden_options",
    golden_flags="kit.backends.levanter.golden:golden_flags",
    # Read in its kernel's interpreter (its kernel is its own), with the reference on the same weights.
    activations="kit.backends.levanter.activations",
    kernel_env="kit.backends.levanter.runtime:xla_env",
    # JAX's settings come from kernel_env, so a warm process may import JAX and Levanter's model before any case.
    warm_imports=("jax", "equinox", "haliax", "levanter.models.llama", "kit.backends.levanter.runtime"),
)
