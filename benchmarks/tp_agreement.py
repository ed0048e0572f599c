"""How far a sharded case moves from the same case on one device, prompt by prompt, from a gate run.

Both cases score the same prompts against the same golden, and each prompt's result keeps the case's
own top tokens with their logprobs (``backend_top``, the top 5). For every prompt this compares the two
cases' probabilities of the tokens both have among their top 5: the largest and the mean absolute
difference, whether the top token is the same, and each case's error against the golden. The summary
line is "the sharded case's agreement with the single-device case" that docs/gpu-figures.md records.

    python benchmarks/tp_agreement.py RUN_DIR [--single jax-bf16] [--sharded jax-bf16-tp2] [--json OUT]

Exit code 3 when the run lacks either case or they share no prompt.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class PromptAgreement:
    id: str
    bucket: int
    n_tokens: int
    max_difference: float  # largest |p_single - p_sharded| over the tokens both have in their top 5
    mean_difference: float
    shared_tokens: int
    same_top_token: bool
    single_error: float  # each case's largest probability error against the golden
    sharded_error: float


def compare(single: dict, sharded: dict) -> list[PromptAgreement]:
    """Per prompt of both case results (``result.json``'s case entries), in the single case's order."""
    theirs = {p["id"]: p for p in sharded.get("prompts", [])}
    out = []
    for a in single.get("prompts", []):
        b = theirs.get(a["id"])
        if b is None:
            continue
        pa = {int(t): math.exp(lp) for t, lp in a["backend_top"]}
        pb = {int(t): math.exp(lp) for t, lp in b["backend_top"]}
        diffs = [abs(pa[t] - pb[t]) for t in pa if t in pb]
        out.append(PromptAgreement(
            id=a["id"], bucket=a["bucket"], n_tokens=a["n_tokens"],
            max_difference=max(diffs) if diffs else math.nan,
            mean_difference=statistics.fmean(diffs) if diffs else math.nan, shared_tokens=len(diffs),
            same_top_token=a["backend_top_token"] == b["backend_top_token"],
            single_error=a["max_probability_error"], sharded_error=b["max_probability_error"]))
    return out


def summary(rows: list[PromptAgreement]) -> dict:
    """Over all prompts and per bucket: the largest and the mean of the per-prompt largest differences."""
    def over(rs: list[PromptAgreement]) -> dict:
        worst = max(rs, key=lambda r: r.max_difference)
        return {"prompts": len(rs), "max_difference": worst.max_difference, "worst_prompt": worst.id,
                "mean_max_difference": statistics.fmean(r.max_difference for r in rs),
                "mean_difference": statistics.fmean(r.mean_difference for r in rs),
                "top_token_changed": sum(not r.same_top_token for r in rs)}

    buckets = sorted({r.bucket for r in rows})
    return {"all": over(rows), "buckets": {str(b): over([r for r in rows if r.bucket == b]) for b in buckets}}


def case_line(name: str, case: dict) -> str:
    devices = ", ".join(f"GPU {d['index']}" for d in case.get("devices") or []) or "no GPU of its own"
    tp = (case.get("release") or {}).get("tensor_parallel", 1)
    return (f"{name}: {case.get('status')}, tensor_parallel {tp}, {devices}, "
            f"duration {case.get('duration_s') or 0:.1f} s, scoring {case.get('scoring_s') or 0:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--single", default="jax-bf16")
    parser.add_argument("--sharded", default="jax-bf16-tp2")
    parser.add_argument("--json", type=Path, help="also write the rows and the summary here")
    args = parser.parse_args(argv)
    result = args.run_dir / "result.json"
    if not result.is_file():
        print(f"error: {result} does not exist (a finished gate run's folder holds it)", file=sys.stderr)
        return 3
    cases = json.loads(result.read_text())["cases"]
    for name in (args.single, args.sharded):
        if not cases.get(name, {}).get("prompts"):
            print(f"error: {result}: case {name} has no scored prompts (cases: {', '.join(cases)})", file=sys.stderr)
            return 3
    rows = compare(cases[args.single], cases[args.sharded])
    if not rows:
        print(f"error: {result}: {args.single} and {args.sharded} share no prompt", file=sys.stderr)
        return 3
    print(case_line(args.single, cases[args.single]))
    print(case_line(args.sharded, cases[args.sharded]))
    print(f"{'prompt':<18} {'bucket':>6} {'tokens':>6} {'max |dp|':>10} {'mean |dp|':>10} {'top-1':>6} "
          f"{'err single':>10} {'err sharded':>11}")
    for r in rows:
        print(f"{r.id:<18} {r.bucket:>6} {r.n_tokens:>6} {r.max_difference:>10.3g} {r.mean_difference:>10.3g} "
              f"{'same' if r.same_top_token else 'moved':>6} {r.single_error:>10.3g} {r.sharded_error:>11.3g}")
    s = summary(rows)
    for bucket, b in s["buckets"].items():
        print(f"bucket {bucket}: {b['prompts']} prompts, largest {b['max_difference']:.3g} ({b['worst_prompt']}), "
              f"mean of per-prompt largest {b['mean_max_difference']:.3g}")
    a = s["all"]
    print(f"{args.sharded} against {args.single}: largest probability difference {a['max_difference']:.3g} "
          f"({a['worst_prompt']}), mean of per-prompt largest {a['mean_max_difference']:.3g}, mean "
          f"{a['mean_difference']:.3g} over {a['prompts']} prompts; top token changed on {a['top_token_changed']}")
    if args.json:
        args.json.write_text(json.dumps({"single": args.single, "sharded": args.sharded, "summary": s,
                                         "prompts": [asdict(r) for r in rows]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
