"""The `parity-kit` command.

Subcommands import what they need when they run, so `--help` and bad-input
refusals answer without loading torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kit import __version__, paths
from kit.errors import BadInput
from kit.results import EXIT_BAD_INPUT, EXIT_CODES


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except BadInput as exc:
        print(f"parity-kit: bad input: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("parity-kit: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="parity-kit", description=__doc__)
    p.add_argument("--version", action="version", version=f"parity-kit {__version__}")
    sub = p.add_subparsers(required=True, metavar="COMMAND")

    g = sub.add_parser("gate", help="run every case of a descriptor and write a run directory")
    g.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                   help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    g.add_argument("--out", help="run directory to create (default: runs/<name>-<time>-<id>)")
    g.add_argument("--jobs", type=int,
                   help="cases run side by side with the local executor (default: the number of cores); "
                        "Ray places cases by their resources instead")
    g.add_argument("--case", action="append", dest="cases", help="run only this case (repeatable)")
    g.add_argument("--no-summary", action="store_true", help="skip the summary notebook and its HTML")
    g.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local: cases side by side on this machine (default); ray: each case a Ray task with "
                        "its descriptor's resources, on the cluster at $RAY_ADDRESS or a Ray started for the run")
    g.add_argument("--resume", metavar="RUN_DIR",
                   help="rerun into an earlier run directory: reuse each finished case whose inputs are "
                        "unchanged, run the rest")
    g.set_defaults(func=_gate)

    f = sub.add_parser("fixture", help="make or verify a prompt fixture")
    f = f.add_subparsers(required=True, metavar="ACTION")
    fm = f.add_parser("make", help="tokenize a JSONL of {id, prompt} into fixtures/<sha256>.json")
    fm.add_argument("--prompts", required=True, help="JSONL file, one {\"id\", \"prompt\"} per line")
    fm.add_argument("--model", required=True, help="model folder whose tokenizer.json and bos token to use")
    fm.add_argument("--out", default="fixtures", help="folder for the fixture (default: fixtures)")
    fm.add_argument("--buckets", default="128,256,512,1024", help="bucket sizes in tokens, comma separated")
    fm.set_defaults(func=_fixture_make)
    fv = f.add_parser("verify", help="check a fixture's digest (and its tokenizer, given --model)")
    fv.add_argument("fixture")
    fv.add_argument("--model", help="model folder whose tokenizer.json the fixture must have been made with")
    fv.set_defaults(func=_fixture_verify)

    gl = sub.add_parser("golden", help="make, verify or diff goldens").add_subparsers(required=True, metavar="ACTION")
    gm = gl.add_parser("make", help="score the fixture with hf and write a golden (never over an existing one)")
    gm.add_argument("--model", required=True)
    gm.add_argument("--fixture", required=True)
    gm.add_argument("--kind", choices=["semantic", "exact"], required=True)
    gm.add_argument("--top-k", type=int, default=25)
    gm.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    gm.add_argument("--attn-implementation", default="sdpa", choices=["sdpa", "eager"])
    gm.add_argument("--out", default="goldens", help="folder for the golden (default: goldens)")
    gm.set_defaults(func=_golden_make)
    gv = gl.add_parser("verify", help="check a golden against its fixture (and model)")
    gv.add_argument("golden")
    gv.add_argument("--fixture", required=True)
    gv.add_argument("--model", help="model folder whose digest the golden must carry")
    gv.set_defaults(func=_golden_verify)
    gd = gl.add_parser("diff", help="how far each case moved between two goldens")
    gd.add_argument("old")
    gd.add_argument("new")
    gd.add_argument("--threshold", type=float, default=0.0, help="list only cases that moved more than this")
    gd.set_defaults(func=_golden_diff)

    d = sub.add_parser("digest", help="print the model digest of a folder")
    d.add_argument("model")
    d.set_defaults(func=_digest)
    return p


def _digest(args) -> int:
    from kit.modeldigest import model_digest

    print(model_digest(args.model))
    return 0


def _gate(args) -> int:
    from kit.gate import run_gate

    if args.resume and args.out and Path(args.out).resolve() != Path(args.resume).resolve():
        raise BadInput(f"--out {args.out} and --resume {args.resume}: a resumed run writes into the directory "
                       "it resumes")
    run = run_gate(args.descriptor, out=args.out, jobs=args.jobs, only=args.cases,
                   command=["parity-kit", "gate", *sys.argv[2:]] if sys.argv[1:2] == ["gate"] else None,
                   summary=not args.no_summary, executor=args.executor, resume=args.resume)
    print(run.run_dir)  # stdout carries only the run directory, for scripts: RUN=$(parity-kit gate ...)
    return EXIT_CODES[run.verdict]


def _fixture_make(args) -> int:
    from kit.fixture import load_fixture, make_fixture

    prompts = []
    for n, line in enumerate(Path(args.prompts).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                prompts.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise BadInput(f"{args.prompts}:{n}: not JSON: {exc}") from None
    try:
        buckets = [int(b) for b in args.buckets.split(",")]
    except ValueError:
        raise BadInput(f"--buckets {args.buckets!r}: expected integers separated by commas") from None
    path = make_fixture(prompts, args.model, args.out, buckets)
    print(path)
    _print_buckets(load_fixture(path))
    return 0


def _print_buckets(fixture) -> None:
    from kit.fixture import summary_rows

    for row in summary_rows(fixture):
        print(f"  bucket {row['bucket']:>5}: {row['cases']:>3} cases, {row['min_tokens']}-{row['max_tokens']} tokens")


def _fixture_verify(args) -> int:
    from kit.fixture import verify_fixture

    fixture = verify_fixture(args.fixture, args.model)
    print(f"ok: {args.fixture}: sha256 {fixture.sha256}, {len(fixture.cases)} cases, tokenizer {fixture.tokenizer}")
    _print_buckets(fixture)
    return 0


def _golden_make(args) -> int:
    from kit.backends.hf import HfBackend
    from kit.fixture import verify_fixture
    from kit.golden import golden_document, golden_filename, provenance, write_golden
    from kit.modeldigest import model_digest

    fixture = verify_fixture(args.fixture, args.model)
    digest = model_digest(args.model)
    backend = HfBackend(args.model, dtype=args.dtype, attn_implementation=args.attn_implementation)
    observations = backend.observe(fixture.cases, args.top_k)
    prov = provenance("hf", backend.release(), args.dtype, args.attn_implementation, ["parity-kit", *sys.argv[1:]])
    doc = golden_document(args.kind, fixture, digest, args.top_k, observations, prov)
    name = golden_filename(fixture, Path(args.model).resolve().name, digest, args.kind)
    print(write_golden(Path(args.out) / name, doc))
    return 0


def _golden_verify(args) -> int:
    from kit.fixture import load_fixture
    from kit.golden import check_golden_matches_fixture, load_golden
    from kit.modeldigest import model_digest

    golden = load_golden(args.golden)
    check_golden_matches_fixture(golden, load_fixture(args.fixture))
    if args.model:
        actual = model_digest(args.model)
        if actual != golden.model_digest:
            raise BadInput(f"golden {args.golden} was made from model {golden.model_digest}, "
                           f"but {args.model} is {actual}")
    p = golden.provenance
    print(f"ok: {args.golden}: {golden.kind}, top-{golden.top_k}, {len(golden.cases)} cases, "
          f"made by {p.get('backend')} {p.get('dtype')} on {p.get('hardware')} at {p.get('created_at')}")
    return 0


def _golden_diff(args) -> int:
    from kit.golden import diff_goldens, load_golden

    rows = diff_goldens(load_golden(args.old), load_golden(args.new))
    moved = [r for r in rows if r.max_probability_delta > args.threshold or r.winner_changed]
    for r in sorted(moved, key=lambda r: -r.max_probability_delta):
        win = f"  winner {r.winner_before} -> {r.winner_after}" if r.winner_changed else ""
        print(f"{r.id:<32} {r.max_probability_delta:.4g}{win}")
    worst = max((r.max_probability_delta for r in rows), default=0.0)
    changed = sum(r.winner_changed for r in rows)
    print(f"{len(moved)} of {len(rows)} cases moved; largest move {worst:.4g}; {changed} winners changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
