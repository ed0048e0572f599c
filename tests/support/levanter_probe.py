"""Run by the tests in the Levanter environment (.venv-levanter/bin/python), where JAX and Levanter live.

    probe.py compare MODEL FIXTURE        padded vs unpadded, flash vs reference: JSON on stdout
    probe.py tamper NATIVE OUT TENSOR F   a native checkpoint with one tensor scaled by F
    probe.py run-case SPEC_JSON           kit.case.runner.run_case on a spec; the BadInput line if refused
"""

from __future__ import annotations

import json
import math
import sys


def _max_probability_delta(a, b) -> float:
    other = dict(b.top_logprobs)
    return max(abs(math.exp(lp) - math.exp(other[t])) for t, lp in a.top_logprobs if t in other)


def compare(model: str, fixture_path: str) -> dict:
    from kit.backends.levanter.runtime import LevanterBackend
    from kit.core.records.fixture import load_fixture

    fixture = load_fixture(fixture_path)
    # The shortest prompt of each bucket: the most padding (unpadded, each length compiles anew).
    cases = [min((c for c in fixture.prompts if c.bucket == b), key=lambda c: c.n_tokens) for b in fixture.buckets]
    top = 25
    padded_backend, unpadded_backend = LevanterBackend(model), LevanterBackend(model, pad_to_bucket=False)
    padded = padded_backend.observe(cases, top)
    unpadded = unpadded_backend.observe(cases, top)
    everything_flash = LevanterBackend(model, flash_above=0)
    flash = everything_flash.observe(cases, top)
    return {
        "prompts": [c.id for c in cases],
        "padding_same_tokens": [[t for t, _ in a.top_logprobs] == [t for t, _ in b.top_logprobs]
                                for a, b in zip(padded, unpadded)],
        "padding_max_delta": max(_max_probability_delta(a, b) for a, b in zip(padded, unpadded)),
        "flash_same_tokens": [[t for t, _ in a.top_logprobs] == [t for t, _ in b.top_logprobs]
                              for a, b in zip(padded, flash)],
        "flash_max_delta": max(_max_probability_delta(a, b) for a, b in zip(padded, flash)),
        "padded_details": padded_backend.details(),
        "unpadded_details": unpadded_backend.details(),
        "flash_details": everything_flash.details(),
        "n_tokens": {str(c.bucket): c.n_tokens for c in cases},
    }


def tamper(native: str, out: str, tensor: str, factor: float) -> dict:
    import equinox as eqx

    from kit.backends.levanter.runtime import load_native, save_native

    model = load_native(native)
    where = {"lm_head": lambda m: m.lm_head.weight, "embeddings": lambda m: m.embeddings.token_embeddings}[tensor]
    model = eqx.tree_at(where, model, where(model) * factor)
    save_native(model, out)
    return {"written": out}


def run_case(spec_json: str) -> dict:
    from kit.case.runner import run_case as run
    from kit.core.errors import BadInput
    from kit.core.records.spec import CaseSpec

    try:
        result = run(CaseSpec.from_dict(json.loads(spec_json)))
    except BadInput as exc:
        return {"refused": str(exc)}
    return {"status": result.status}


def main(argv: list[str]) -> int:
    command, *args = argv
    if command == "compare":
        out = compare(*args)
    elif command == "tamper":
        out = tamper(args[0], args[1], args[2], float(args[3]))
    elif command == "run-case":
        out = run_case(args[0])
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
