"""transformers + torch: the reference backend that also makes the goldens.

Only the last position's logits are computed (``logits_to_keep=1``): the full
[seq, vocab] matrix is what runs long prompts out of memory.
"""

from __future__ import annotations

import platform
from typing import Sequence

from kit.fixture import PromptCase
from kit.records import Observation
from kit.spec import CaseSpec


class HfBackend:
    name = "hf"

    def __init__(self, model_path: str, dtype: str = "float32", attn_implementation: str = "sdpa",
                 device: str = "cpu", threads: int = 1):
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a per-load progress bar only clutters notebooks and logs
        self._torch = torch
        if device == "cpu":
            # Cases run side by side, one core each; more threads per case only contend.
            torch.set_num_threads(threads)
        self.dtype, self.attn_implementation, self.device = dtype, attn_implementation, device
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=getattr(torch, dtype), attn_implementation=attn_implementation
        ).to(device).eval()

    def release(self) -> dict:
        import torch
        import transformers

        return {"backend": self.name, "transformers": transformers.__version__, "torch": torch.__version__,
                "python": platform.python_version(), "dtype": self.dtype,
                "attention": self.attn_implementation, "device": self.device}

    def details(self) -> dict:
        return {"attention": self.attn_implementation}

    def observe(self, cases: Sequence[PromptCase], top_n: int) -> list[Observation]:
        torch = self._torch
        out = []
        with torch.inference_mode():
            for case in cases:
                ids = torch.tensor([case.prompt_token_ids], dtype=torch.long, device=self.device)
                logits = self.model(input_ids=ids, logits_to_keep=1, use_cache=False).logits[0, -1]
                logprobs = torch.log_softmax(logits.float(), dim=-1)
                values, indices = torch.topk(logprobs, min(top_n, logprobs.shape[-1]))
                top = tuple(zip(indices.tolist(), values.tolist()))
                out.append(Observation(case.id, top, case.n_tokens))
        return out

    def close(self) -> None:
        self.model = None


def open_backend(spec: CaseSpec) -> HfBackend:
    o = spec.options
    return HfBackend(spec.model_path, dtype=o.get("dtype", "float32"),
                     attn_implementation=o.get("attn_implementation", "sdpa"),
                     device=o.get("device", "cpu"), threads=o.get("threads", 1))
