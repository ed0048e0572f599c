"""The gate over time: `publish` (a finished run copied to a store) and `history` (every run of a store, indexed
and shown)."""

from __future__ import annotations

import json

from kit.cli.common import exits, publish_target
from kit.core.errors import BadInput
from kit.core.exitcodes import epilog, ExitCode
from kit.core.records import paths


def _add_publish(sub) -> None:
    pb = sub.add_parser("publish", help="copy a finished run or control directory to a store: URL/<its name>/",
                        description="Copies a finished gate run or control directory to URL/<its name>/ (an\n"
                                    "s3:// prefix, gs://, or a folder) and records it in its published.json; a\n"
                                    "destination that exists already is refused. What gate --publish does, again.",
                        epilog=exits("published: the URL on stdout"))
    pb.add_argument("run_dir", help="a finished gate run or control directory")
    pb.add_argument("url", nargs="?", help="the store (default: $PARITY_KIT_PUBLISH)")
    pb.set_defaults(func=_publish)


def _add_history(sub) -> None:
    h = sub.add_parser("history", help="the gate over time: each case and bucket's errors, bounds and margins "
                                       "across every run of a store, releases and baseline changes marked",
                       description="Indexes every run directory of a store (a folder, or an fsspec URL such as\n"
                                   "s3://bucket/prefix; only what changed is read again) and renders the history\n"
                                   "notebook to history.html in a new folder; --markdown and --json print the\n"
                                   "margin table (bound - largest error) instead, without a kernel. A run that\n"
                                   "cannot be read is a line in the output, never a refusal; bad input (3) is a\n"
                                   "store that cannot be read or holds no run, or a selection that matches none.",
                       epilog=epilog(ExitCode.PASSED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                                     meanings={ExitCode.PASSED: "shown",
                                               ExitCode.INCOMPLETE: "indexed, but the notebook did not run"}))
    h.add_argument("descriptor", nargs="?", help="only the runs of this descriptor (by its name; default: every "
                                                 "descriptor's runs)")
    h.add_argument("--runs", metavar="URL", help="the store of run directories: a folder or an fsspec URL "
                                                 "(default: runs/)")
    h.add_argument("--case", action="append", dest="cases", default=[], metavar="NAME",
                   help="this case only (repeatable)")
    h.add_argument("--since", metavar="DATE", help="only runs started on or after this date (ISO, UTC)")
    h.add_argument("--rebuild", action="store_true", help="rebuild the index from every run directory")
    shown = h.add_mutually_exclusive_group()
    shown.add_argument("--markdown", action="store_true", help="print the margin table as Markdown (no notebook)")
    shown.add_argument("--json", action="store_true", help="print the history as JSON (no notebook)")
    shown.add_argument("--out", metavar="DIR", help="folder to render into (default: runs/history-<descriptor>-<time>)")
    h.set_defaults(func=_history)


def _publish(args) -> int:
    from kit.history.publish import PUBLISH_ENV, publish_run

    url = publish_target(args.url)
    if not url:
        raise BadInput(f"publish: say where: a URL, or ${PUBLISH_ENV}")
    done = publish_run(args.run_dir, url)
    if done.error:
        raise BadInput(done.error)
    print(done.url)
    return ExitCode.PASSED


def _history(args) -> int:
    from kit.history.command import gather, markdown, render

    found = gather(args.runs, args.descriptor, args.cases, args.since, args.rebuild)
    if args.json:
        print(json.dumps(found.to_dict(), indent=2))
        return ExitCode.PASSED
    if args.markdown:
        print(markdown(found), end="")
        return ExitCode.PASSED
    render(found, args.out)
    assert found.out_dir is not None
    print(paths.display(found.out_dir / "history.html"))
    return ExitCode.INCOMPLETE if found.notebook_error else ExitCode.PASSED


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"publish": _add_publish, "history": _add_history}
