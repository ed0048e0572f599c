"""Which torch kernel settings reproduce which exact hf golden, bit for bit, on this host.

Run on a host of another CPU class than the goldens' to test a pin (docs/exact-baselines.md): each
configuration runs in a fresh interpreter (the settings are read once, when torch starts) and prints,
per golden, how many of its prompts differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures/44a3d799c03bd48c42dbda1f1b3a1739f398158ff2523764f33599ec2e872c8f.json"
GOLDENS = sorted((ROOT / "goldens").glob("44a3d799c03b-tiny-llama-1163a351b5ae-exact*.json"))
CONFIGS = {
    "native": {},
    "aten+onednn avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "aten+onednn avx2, mkl instructions avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                                                "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "pinned (aten+onednn avx2, mkl cbwr avx2)": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                                                 "MKL_CBWR": "AVX2"},
}


def one_config() -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    from kit.backends.hf.runtime import HfBackend
    from kit.core.records.fixture import load_fixture
    from kit.core.baselines.golden import load_golden

    fixture = load_fixture(FIXTURE)
    engine = HfBackend(str(ROOT / "fixtures/tiny-llama"), dtype="float32")
    observed = {o.prompt_id: o.top_logprobs for o in engine.observe(fixture.prompts, 25)}
    out = {"capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__}
    for path in GOLDENS:
        golden = load_golden(path)
        out[path.name] = sum(tuple(observed[i][: golden.top_k]) != golden.prompts[i] for i in golden.ids)
    print(json.dumps(out))


def main() -> None:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown")
    print(f"CPU: {cpu}")
    for label, env in CONFIGS.items():
        proc = subprocess.run([sys.executable, __file__, "--one"], env={**os.environ, **env}, capture_output=True,
                              text=True)
        result = proc.stdout.strip().splitlines()[-1:] or [proc.stderr.strip()[-400:]]
        print(f"{label}: {result[0]}")


if __name__ == "__main__":
    one_config() if sys.argv[1:] == ["--one"] else main()
