"""`parity-kit golden make|verify|diff|regen`: the reference observations a case is judged against."""

from __future__ import annotations

import sys

from kit.backends.hf.attention import AttnImplementation
from kit.backends.hf.kernels import CpuKernels
from kit.backends.levanter.runtime import CheckpointFormat
from kit.cli.common import exits, jobs
from kit.core.errors import BadInput
from kit.core.exitcodes import epilog, ExitCode
from kit.core.records import paths
from kit.core.records.records import GoldenMode
from kit.core.records.text import printable


def _add_golden(sub) -> None:
    gl = sub.add_parser("golden", help="make, verify or diff goldens",
                        epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                                      meanings={ExitCode.PASSED: "done", ExitCode.FAILED: "regen: refused (fewer "
                                                "than two backends agree with the new golden)"}))
    gl = gl.add_subparsers(required=True, metavar="ACTION")
    gm = gl.add_parser("make", help="score the fixture with a backend and write a golden (never over an existing one)",
                       epilog=exits("made: the golden's path on stdout"))
    gm.add_argument("--model", required=True, help="model folder to score the fixture with")
    reference, makers = _golden_makers()
    gm.add_argument("--backend", default=reference, choices=makers,
                    help=f"a backend that can make goldens (default: {reference}); levanter runs in its own "
                         "environment: its parity-kit, e.g. .venv-levanter/bin/parity-kit golden make ...")
    gm.add_argument("--checkpoint", default=CheckpointFormat.HF.value, choices=[c.value for c in CheckpointFormat],
                    help="levanter: an HF export or a native tensorstore checkpoint (default: hf)")
    gm.add_argument("--fixture", required=True, help="fixture JSON whose prompts the golden scores")
    gm.add_argument("--kind", choices=[g.value for g in GoldenMode], required=True,
                    help="semantic: judged within a bound; exact: bit for bit, on this runtime only")
    gm.add_argument("--top-k", type=int, default=25, help="golden tokens kept per prompt (default 25)")
    gm.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "float64"],
                    help="the dtype the backend scores in (default float32); hf float64 reports its logprobs "
                         "rounded to float32, so an exact golden made so holds on every host "
                         "(docs/exact-baselines.md)")
    gm.add_argument("--attn-implementation", default=AttnImplementation.SDPA.value,
                    choices=[a.value for a in AttnImplementation],
                    help="hf: the attention implementation (default sdpa)")
    gm.add_argument("--device", default="cpu", help="torch device: cpu (default), cuda, cuda:N")
    gm.add_argument("--cpu-kernels", default=CpuKernels.NATIVE.value, choices=[k.value for k in CpuKernels],
                    help="hf on a CPU: native (default) runs the widest kernels this CPU has; avx2 pins torch's, "
                         "oneDNN's and MKL's to their AVX2 code, so an exact golden holds on every AVX2 host")
    gm.add_argument("--batch-size", type=int, default=1, help="same-bucket prompts scored together (default 1)")
    gm.add_argument("--decode", type=int, default=0, metavar="N",
                    help="also continue every prompt N greedy steps with the backend's decode path and keep the "
                         "top-k of each step (a decode golden, format 2; default 0: none)")
    gm.add_argument("--out", default="goldens", help="folder for the golden (default: goldens)")
    gm.set_defaults(func=_golden_make)
    gv = gl.add_parser("verify", help="check a golden against its fixture (and model)",
                       epilog=exits("the golden matches the fixture (and the model)"))
    gv.add_argument("golden", help="golden JSON")
    gv.add_argument("--fixture", required=True, help="the fixture the golden must have been made from")
    gv.add_argument("--model", help="model folder whose digest the golden must carry")
    gv.set_defaults(func=_golden_verify)
    gd = gl.add_parser("diff", help="how far each case moved between two goldens",
                       epilog=exits("compared (moving is not an error: read the lines)"))
    gd.add_argument("old", help="the golden before")
    gd.add_argument("new", help="the golden after")
    gd.add_argument("--threshold", type=float, default=0.0, help="list only cases that moved more than this")
    gd.set_defaults(func=_golden_diff)

    gr = gl.add_parser("regen", help="make a replacement for a stale golden, diff it, and place it beside the "
                                     "old one only when two backends agree with it",
                       description="Makes a new golden, diffs it against the stale one and checks it with the\n"
                                   "descriptor's cases. The old golden is never touched.",
                       epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                                     meanings={ExitCode.PASSED: "placed beside the old golden for review",
                                               ExitCode.FAILED: "refused: fewer than two backends agree with it"}))
    gr.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                    help="descriptor TOML whose golden to replace (default: the embedded tiny-cpu descriptor)")
    gr.add_argument("--kind", default=GoldenMode.SEMANTIC.value, metavar="GOLDEN",
                    help="the [goldens] entry to replace (default: semantic); semantic goldens only")
    gr.add_argument("--release", help="check against this release's kernels (default: the cases' own)")
    gr.add_argument("--out", help="work directory (default: runs/regen-<name>-<time>-<id>)")
    gr.add_argument("--jobs", type=jobs, help="checking cases run side by side (default: the cores)")
    gr.set_defaults(func=_golden_regen)


def _golden_makers() -> tuple[str, list[str]]:
    """`golden make --backend`'s default (the reference) and its choices (the backends that make goldens)."""
    from kit.backends import registry

    try:
        return registry.REFERENCE, registry.golden_makers()
    except BadInput:
        return registry.REFERENCE, [registry.REFERENCE]


def _golden_make(args) -> int:
    from kit.goldens.make import GoldenRequest, make_golden

    print(make_golden(args.out, GoldenRequest(
        args.model, args.fixture, args.kind, args.top_k, ["parity-kit", *sys.argv[1:]], args.dtype,
        args.attn_implementation, backend=args.backend, checkpoint=args.checkpoint, device=args.device,
        batch_size=args.batch_size, decode=args.decode, cpu_kernels=args.cpu_kernels)))
    return 0


def _golden_regen(args) -> int:
    from kit.goldens.regen import regen_golden, regen_report

    outcome = regen_golden(args.descriptor, args.kind, args.release, args.out, args.jobs,
                           ["parity-kit", "golden", *sys.argv[2:]] if sys.argv[1:3] == ["golden", "regen"] else None)
    print(regen_report(outcome), file=sys.stderr)
    print(outcome.placed or outcome.new_golden)
    return 0 if outcome.accepted else 1


def _golden_verify(args) -> int:
    from kit.core.records.fixture import load_fixture
    from kit.core.baselines.golden import check_golden_matches_fixture, check_golden_vocabulary, load_golden
    from kit.core.model.modelconfig import model_limits
    from kit.core.model.modeldigest import model_digest

    golden = load_golden(args.golden)
    check_golden_matches_fixture(golden, load_fixture(args.fixture))
    if args.model:
        actual = model_digest(args.model)
        if actual != golden.model_digest:
            raise BadInput(f"golden {args.golden} was made from model {golden.model_digest}, "
                           f"but {args.model} is {actual}")
        limits = model_limits(args.model)  # the gate refuses a golden naming a token the model does not have
        if limits is not None and limits.vocab_size is not None:
            check_golden_vocabulary(golden, limits.vocab_size, args.model, limits.where("vocab_size"))
    p = golden.provenance
    steps = f", continued {golden.decode_steps} steps (format {golden.format})" if golden.continuations else ""
    print(f"ok: {args.golden}: {golden.kind}, top-{golden.top_k}, {len(golden.prompts)} prompts{steps}, "
          f"made by {p.get('backend')} {p.get('dtype')} on {p.get('hardware')} at {p.get('created_at')}")
    return 0


def _golden_diff(args) -> int:
    from kit.core.baselines.golden import diff_goldens, load_golden

    rows = diff_goldens(load_golden(args.old), load_golden(args.new))
    moved = [r for r in rows if r.max_probability_delta > args.threshold or r.winner_changed]
    for r in sorted(moved, key=lambda r: -r.max_probability_delta):
        win = f"  winner {r.winner_before} -> {r.winner_after}" if r.winner_changed else ""
        print(f"{printable(r.id):<32} {r.max_probability_delta:.4g}{win}")
    worst = max((r.max_probability_delta for r in rows), default=0.0)
    changed = sum(r.winner_changed for r in rows)
    print(f"{len(moved)} of {len(rows)} cases moved; largest move {worst:.4g}; {changed} winners changed")
    return 0


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"golden": _add_golden}
