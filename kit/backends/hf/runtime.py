"""transformers + torch: the reference backend that also makes the goldens.

Only the last position's logits are computed: the full [seq, vocab] matrix is
what runs long prompts out of memory (32K tokens x 128K vocabulary in float32 is
16 GiB). A lone prompt goes through ``logits_to_keep=1``; a padded batch runs the
decoder alone and projects only each row's last real position.

Batches hold prompts of one bucket, so that padding never grows a prompt past
its bucket. Padding is exact, not approximate: padded key positions are masked
out, and with left padding the position ids are counted from each row's first
real token, so every real token sees the same positions and keys as it would
alone. What can still differ is float rounding: a padded batch may take another
attention kernel (a masked one instead of the causal fast path) and another
matmul blocking, which moves results by float32 rounding, not more.
"""

from __future__ import annotations

import contextlib
import platform
import time
from enum import StrEnum
from itertools import groupby
from typing import Sequence

from kit.backends.hf import attention as hf_attention
from kit.backends.hf import kernels
from kit.core.records.fixture import Prompt
from kit.core.host.portable import PORTABLE_DTYPE, margin_of, rounded_top
from kit.core.records.records import Continuation, Observation
from kit.core.records.spec import CaseSpec


class PaddingSide(StrEnum):
    """Where a batch pads its shorter prompts, as the case's ``padding_side`` option spells it."""

    LEFT = "left"
    RIGHT = "right"


# Candidates a float64 case keeps beyond its top-n before rounding: the cut must not fall inside a tie that the
# rounding makes and the token-id order then decides.
PORTABLE_SPARE = 8


class SdpaBackend(StrEnum):
    """Which torch SDPA kernel to prefer, as the case's ``sdpa_backend`` option spells it (auto: torch's own)."""

    AUTO = "auto"
    FLASH = "flash"
    CUDNN = "cudnn"
    EFFICIENT = "efficient"
    MATH = "math"


def compile_layers(model, dynamic: bool | None = True) -> None:
    """``torch.compile`` each decoder layer of ``model`` in place.

    Layers, not the whole decoder: the causal mask is then decided outside compiled code, where
    transformers can still drop it for an unpadded prompt and let attention take its causal fast
    path. Compiling the decoder whole made it build a [seq, seq] mask, which halved the speed at
    32K tokens and added 7 GiB (docs/gpu-figures.md). The layers share one code object, so one
    compiled graph serves all of them; ``dynamic=True`` makes that graph serve every prompt length.

    dynamo's graphs are forgotten first: they are cached by that shared code object, not by model, so a
    second model in one process (a calibration's next variant) would reuse graphs traced under the first
    one's SDPA kernel choice.
    """
    import torch

    torch._dynamo.reset()
    for layer in model.get_decoder().layers:
        layer.compile(dynamic=dynamic)


def plan_batches(prompts: Sequence[Prompt], batch_size: int) -> list[list[int]]:
    """Indices of ``cases`` grouped into batches of one bucket each, at most ``batch_size`` long.

    Within a bucket the longest prompts go together, so that a batch pads as little as possible.
    """
    by_bucket = sorted(range(len(prompts)), key=lambda i: (prompts[i].bucket, -prompts[i].n_tokens, i))
    batches = []
    for _, members in groupby(by_bucket, key=lambda i: prompts[i].bucket):
        members = list(members)
        batches += [members[k:k + batch_size] for k in range(0, len(members), batch_size)]
    return batches


class HfBackend:
    name = "hf"

    def __init__(self, model_path: str, dtype: str = "float32",
                 attn_implementation: str = hf_attention.AttnImplementation.SDPA,
                 device: str = "cpu", threads: int = 1, batch_size: int = 1, padding_side: str = PaddingSide.RIGHT,
                 sdpa_backend: str = SdpaBackend.AUTO, compile: bool = False,
                 cpu_kernels: str = kernels.CpuKernels.NATIVE):
        kernels.apply_pin({"cpu_kernels": cpu_kernels, "device": device})
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        if padding_side not in tuple(PaddingSide):
            raise ValueError(f"padding_side must be one of {', '.join(PaddingSide)}, got {padding_side!r}")
        if sdpa_backend not in tuple(SdpaBackend):
            raise ValueError(f"sdpa_backend must be one of {', '.join(SdpaBackend)}, got {sdpa_backend!r}")
        hf_logging.disable_progress_bar()  # a per-load progress bar only clutters notebooks and logs
        if attn_implementation == hf_attention.NAME:
            hf_attention.register()
        self._torch = torch
        self.cpu_kernels = cpu_kernels
        kernels.check_pin({"cpu_kernels": cpu_kernels, "device": device}, torch.backends.cpu.get_cpu_capability())
        if device == "cpu":
            # Cases run side by side, one core each; more threads per case only contend.
            torch.set_num_threads(threads)
        self.dtype, self.attn_implementation, self.device = dtype, attn_implementation, device
        self.batch_size, self.padding_side, self.sdpa_backend = batch_size, padding_side, sdpa_backend
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=getattr(torch, dtype), attn_implementation=attn_implementation
        ).to(device).eval()
        self.compile = compile
        if compile:
            compile_layers(self.model)
        self._batches: list[dict] = []
        self._candidates: list[tuple[list[float], int]] = []  # a float64 case's values before rounding

    @property
    def portable(self) -> bool:
        """Computed in float64 and reported rounded to float32 (kit.core.host.portable)."""
        return self.dtype == PORTABLE_DTYPE

    def release(self) -> dict:
        """What identifies this build of the engine for the record: transformers, torch, Python, dtype,
        attention and device (on a CPU its kernels' capability, for float64 the portable margin)."""
        import torch
        import transformers

        out = {"backend": self.name, "transformers": transformers.__version__, "torch": torch.__version__,
               "python": platform.python_version(), "dtype": self.dtype,
               "attention": self.attn_implementation, "device": self.device}
        if self.compile:  # another code path than eager: the provenance must tell the two apart
            out["compile"] = "torch.compile per layer"
        if self.device == "cpu":  # which kernels computed it: what a float32 exact golden's bits depend on
            out["cpu_kernels"] = self.cpu_kernels
            out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        # how far another host's float64 values may move (kit.core.host.portable)
        if self.portable and self._candidates:
            out["portable_margin"] = margin_of(self._candidates).to_dict()
        if self.device.startswith("cuda"):
            out["device_name"] = torch.cuda.get_device_name(self.device)
            out["cuda"] = torch.version.cuda
        return out

    def details(self) -> dict:
        """How the prompts were run (attention, SDPA kernel, padding, batching, compile, the batches
        themselves), for the case's record."""
        return {"attention": self.attn_implementation, "sdpa_backend": self.sdpa_backend,
                "padding_side": self.padding_side, "batch_size": self.batch_size, "compile": self.compile,
                "batches": self._batches}

    def observe(self, prompts: Sequence[Prompt], top_n: int) -> list[Observation]:
        """Each prompt's top ``top_n`` next-token logprobs, scored in batches of one bucket at a time under
        the chosen SDPA kernel."""
        torch = self._torch
        out: list[Observation | None] = [None] * len(prompts)
        self._batches, self._candidates = [], []
        with torch.inference_mode(), self._sdpa_context():
            for batch in plan_batches(prompts, self.batch_size):
                t0 = time.perf_counter()
                rows = [prompts[i] for i in batch]
                for i, prompt, top in zip(batch, rows, self._tops(self.last_logits(rows), top_n)):
                    out[i] = Observation(prompt.id, top, prompt.n_tokens)
                # Per batch, so that a compiled case shows where its compiling went (the first batches).
                self._batches.append({"bucket": rows[0].bucket, "rows": len(rows),
                                      "padded_to": max(c.n_tokens for c in rows),
                                      "seconds": round(time.perf_counter() - t0, 4)})
        return out  # type: ignore[return-value]

    def decode(self, prompts: Sequence[Prompt], steps: int, top_n: int) -> list[Continuation]:
        """Each prompt continued greedily through ``generate`` with its KV cache: the decode path of
        transformers, one prompt at a time (no padding, so every position is the prompt's own). The
        logprobs are the log-softmax of the raw logits at each step (no logits processor touches them)."""
        torch = self._torch
        out = []
        with torch.inference_mode(), self._sdpa_context():
            for prompt in prompts:
                ids = torch.tensor([prompt.prompt_token_ids], dtype=torch.long, device=self.device)
                generated = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                                generation_config=self._greedy(steps))
                tokens = generated.sequences[0, ids.shape[1]:].tolist()
                per_step = []
                for token, logits in zip(tokens, generated.logits):
                    per_step.append((int(token), self._tops(logits, top_n)[0]))
                out.append(Continuation(prompt.id, tuple(per_step)))
        return out

    def _tops(self, logits, top_n: int) -> list[tuple[tuple[int, float], ...]]:
        """Each row's ``top_n`` (token, logprob) pairs, most likely first: the log-softmax in float32, or for a
        float64 case in float64, rounded to float32 and tied values ordered by token id
        (kit.core.host.portable)."""
        torch = self._torch
        if not self.portable:
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            values, indices = torch.topk(logprobs, min(top_n, logprobs.shape[-1]), dim=-1)
            return [tuple(zip(idx, val)) for idx, val in zip(indices.tolist(), values.tolist())]
        logprobs = torch.log_softmax(logits.double(), dim=-1)
        values, indices = torch.topk(logprobs, min(top_n + PORTABLE_SPARE, logprobs.shape[-1]), dim=-1)
        tops = []
        for idx, val in zip(indices.tolist(), values.tolist()):
            self._candidates.append((val, top_n))
            tops.append(rounded_top(val, idx, top_n))
        return tops

    def _greedy(self, steps: int):
        """Exactly ``steps`` greedy tokens and nothing else: no end-of-sequence stop (the comparison needs
        every step, and an engine's ignore-EOS continues past it too), no processor that would move the
        chosen token away from the raw logits' most likely one."""
        from transformers import GenerationConfig

        return GenerationConfig(max_new_tokens=steps, do_sample=False, num_beams=1, use_cache=True,
                                eos_token_id=None, pad_token_id=self.model.config.pad_token_id or 0,
                                output_logits=True, return_dict_in_generate=True)

    def last_logits(self, rows: Sequence[Prompt]):
        """[rows, vocab] logits at each prompt's last real position."""
        torch = self._torch
        if len(rows) == 1:
            ids = torch.tensor([rows[0].prompt_token_ids], dtype=torch.long, device=self.device)
            return self.model(input_ids=ids, logits_to_keep=1, use_cache=False).logits[:, -1]
        ids, mask, positions, last = self.pad(rows)
        hidden = self.model.get_decoder()(input_ids=ids, attention_mask=mask, position_ids=positions,
                                          use_cache=False).last_hidden_state
        picked = hidden[torch.arange(len(rows), device=self.device), last]
        return self.model.get_output_embeddings()(picked)

    def pad(self, rows: Sequence[Prompt]):
        """Token ids, attention mask, position ids and last real index for a padded batch."""
        torch = self._torch
        width = max(c.n_tokens for c in rows)
        pad_id = self.model.config.pad_token_id or 0  # any id will do: padded positions are masked
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, prompt in enumerate(rows):
            span = slice(width - prompt.n_tokens,
                         width) if self.padding_side == PaddingSide.LEFT else slice(0, prompt.n_tokens)
            ids[r, span] = torch.tensor(prompt.prompt_token_ids)
            mask[r, span] = 1
        # Positions count real tokens only; padded slots get 0 (their outputs are never read).
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        last = (torch.full((len(rows),), width - 1) if self.padding_side == PaddingSide.LEFT
                else torch.tensor([c.n_tokens - 1 for c in rows]))
        to = self.device
        return ids.to(to), mask.to(to), positions.to(to), last.to(to)

    def _sdpa_context(self):
        sdpa = (hf_attention.AttnImplementation.SDPA, hf_attention.AttnImplementation.SDPA_REPEAT_KV)
        if self.sdpa_backend == SdpaBackend.AUTO or self.attn_implementation not in sdpa:
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        chosen = {SdpaBackend.FLASH: SDPBackend.FLASH_ATTENTION, SdpaBackend.CUDNN: SDPBackend.CUDNN_ATTENTION,
                  SdpaBackend.EFFICIENT: SDPBackend.EFFICIENT_ATTENTION,
                  SdpaBackend.MATH: SDPBackend.MATH}[self.sdpa_backend]
        # A padded batch carries a mask, which flash refuses: the memory-efficient kernel takes
        # masks without materializing [seq, seq] scores, math is the last resort.
        fallbacks = [b for b in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH) if b != chosen]
        return sdpa_kernel([chosen, *fallbacks])

    def close(self) -> None:
        """Drop the model, so that the next case in a warm kernel gets its memory back."""
        self.model = None


def open_backend(spec: CaseSpec) -> HfBackend:
    """The hf backend of a case. The options arrive resolved: every default was applied by the descriptor's
    schema, the one place they are stated."""
    return HfBackend(spec.model_path, **spec.options)
