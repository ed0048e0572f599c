"""The prompt fixture and the model folder it is made for: `fixture make|verify|report` and `digest`."""

from __future__ import annotations

import json
from pathlib import Path

from kit.cli.common import exits
from kit.core.errors import BadInput
from kit.core.records import paths


def _add_fixture(sub) -> None:
    f = sub.add_parser("fixture", help="make, verify or report on a prompt fixture",
                       epilog=exits("done (make: the fixture's path on stdout; verify: it is intact)"))
    f = f.add_subparsers(required=True, metavar="ACTION")
    fm = f.add_parser("make", help="tokenize a JSONL of {id, prompt} into fixtures/<sha256>.json",
                      epilog=exits("made: the fixture's path on stdout, then its buckets"))
    fm.add_argument("--prompts", required=True, help="JSONL file, one {\"id\", \"prompt\"} per line")
    fm.add_argument("--model", required=True, help="model folder whose tokenizer.json and bos token to use")
    fm.add_argument("--out", default="fixtures", help="folder for the fixture (default: fixtures)")
    fm.add_argument("--buckets", default="128,256,512,1024", help="bucket sizes in tokens, comma separated")
    fm.set_defaults(func=_fixture_make)
    fv = f.add_parser("verify", help="check a fixture's digest (and its tokenizer, given --model)",
                      epilog=exits("the fixture is intact (and made with that tokenizer)"))
    fv.add_argument("fixture", help="fixture JSON (fixtures/<sha256>.json)")
    fv.add_argument("--model", help="model folder whose tokenizer.json the fixture must have been made with")
    fv.set_defaults(func=_fixture_verify)
    fr = f.add_parser("report", help="which share of the vocabulary, token classes and positions the prompts exercise",
                      epilog=exits("reported (the fixture is intact and its tokens lie in the model's vocabulary)"))
    fr.add_argument("fixture", help="fixture JSON (fixtures/<sha256>.json)")
    fr.add_argument("--model", help="model folder (the fixture's tokenizer): vocabulary size, token classes, context")
    fr.add_argument("--json", help="also write the report as JSON to this file ('-': JSON on stdout instead of tables)")
    fr.set_defaults(func=_fixture_report)


def _add_digest(sub) -> None:
    d = sub.add_parser("digest", help="print the model digest of a folder", epilog=exits("printed"))
    d.add_argument("model", help="model folder")
    d.set_defaults(func=_digest)


def _fixture_make(args) -> int:
    from kit.core.model.tokenizer import make_fixture
    from kit.core.records.fixture import load_fixture, read_prompts

    paths.check_dir_target(args.out, "--out")
    prompts = read_prompts(args.prompts)
    try:
        buckets = [int(b) for b in args.buckets.split(",")]
    except ValueError:
        raise BadInput(f"--buckets {args.buckets!r}: expected integers separated by commas") from None
    path = make_fixture(prompts, args.model, args.out, buckets)
    print(path)
    _print_buckets(load_fixture(path))
    return 0


def _print_buckets(fixture) -> None:
    from kit.core.records.fixture import summary_rows

    for row in summary_rows(fixture):
        print(f"  bucket {row['bucket']:>5}: {row['cases']:>3} cases, {row['min_tokens']}-{row['max_tokens']} tokens")


def _fixture_verify(args) -> int:
    from kit.core.model.tokenizer import verify_fixture

    fixture = verify_fixture(args.fixture, args.model)
    print(f"ok: {args.fixture}: sha256 {fixture.sha256}, {len(fixture.prompts)} prompts, tokenizer {fixture.tokenizer}")
    _print_buckets(fixture)
    return 0


def _fixture_report(args) -> int:
    from kit.core.model.tokenizer import verify_fixture
    from kit.core.noise.vocabcoverage import fixture_coverage
    from kit.views.coverage import check_json_target, print_report, write_report_json

    fixture = verify_fixture(args.fixture, args.model)  # a model with another tokenizer would misclassify
    cov = fixture_coverage(fixture, args.model)
    if cov.out_of_vocab:
        shown = ", ".join(map(str, cov.out_of_vocab[:3])) + (", ..." if len(cov.out_of_vocab) > 3 else "")
        raise BadInput(f"fixture {args.fixture} holds token ids outside the vocabulary of model {args.model} "
                       f"({cov.vocab_size} tokens, {cov.vocab_source}): {shown}")
    if args.json == "-":
        print(json.dumps(cov.to_dict(), indent=1))
        return 0
    if args.json:
        check_json_target(args.json)  # before the tables go out, not after
    print_report(cov, Path(args.fixture).name)
    if args.json:
        print(f"written: {write_report_json(cov, args.json)}")
    return 0


def _digest(args) -> int:
    from kit.core.model.modeldigest import model_digest

    print(model_digest(args.model))
    return 0


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"fixture": _add_fixture, "digest": _add_digest}
