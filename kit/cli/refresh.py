"""A fork's new release: `refresh` (replay onto upstream, build, qualify, control) and `bisect`, built on refresh's
build and qualify (the first overlay or upstream commit that fails)."""

from __future__ import annotations

from kit.cli.common import command_line, jobs
from kit.core.errors import BadInput
from kit.core.exitcodes import epilog, ExitCode
from kit.core.records import paths


def _add_refresh(sub) -> None:
    r = sub.add_parser("refresh", help="replay a fork onto a newer upstream, build and qualify its wheels, "
                                       "then control it against today's pin",
                       description="Build (replay the overlay, build wheels, write the release manifest),\n"
                                   "qualify (the exact wheel bytes in a fresh kernel, one parity case), then the\n"
                                   "control of the new release against today's pin. Never pushes, tags or opens\n"
                                   "anything; prints what to run next.",
                       epilog=epilog(*ExitCode))
    r.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                   help="descriptor TOML whose [releases.current] is today's pin")
    r.add_argument("--fork-repo", required=True, help="the fork's git repository")
    r.add_argument("--upstream-ref", required=True, help="the upstream commit, branch or tag to refresh onto")
    r.add_argument("--base", help="the old upstream base (default: where the fork tip meets --upstream-ref)")
    r.add_argument("--tip", help="the fork's tip (default: HEAD of --fork-repo)")
    r.add_argument("--fork", help="the fork's name in the release tag (default: the repository folder's name)")
    r.add_argument("--backend", help="the backend the fork builds (default: the pin's only backend)")
    r.add_argument("--current", default="current", help="the release pinned today (default: current)")
    r.add_argument("--build-command", help="wheel build command run in the replayed tree; {python} and "
                                           "{wheel_dir} are filled in (default: pip wheel --no-deps "
                                           "--no-build-isolation)")
    r.add_argument("--branch", default="main-next", help="the replay branch (default: main-next)")
    r.add_argument("--releases", help="release store (default: releases/ beside the refresh directory)")
    r.add_argument("--qualify-case", help="the parity case qualification runs (default: the backend's first "
                                          "tolerance-bound case)")
    r.add_argument("--qualify-bucket", type=int, help="its bucket (default: the shortest)")
    r.add_argument("--case", action="append", dest="cases", help="control only this case (repeatable)")
    r.add_argument("--out", help="refresh directory to create (default: runs/refresh-<name>-<time>-<id>)")
    r.add_argument("--jobs", type=jobs, help="control cases run side by side (default: the cores)")
    r.set_defaults(func=_refresh)


def _add_bisect(sub) -> None:
    b = sub.add_parser("bisect", help="find the first overlay commit whose build fails a case the tip fails",
                       description="Build, qualify and run the failing case at chosen states of the overlay (the\n"
                                   "tip on all its prompts, every other state on the tip's failing prompts only)\n"
                                   "and binary-search for the first commit that fails. Wheels are cached by\n"
                                   "commit in the release store; --resume continues a bisect that stopped.",
                       epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT,
                                     ExitCode.BLOCKER, ExitCode.INTERNAL, ExitCode.INTERRUPTED, meanings={
                                         ExitCode.PASSED: "the case passes at the tip: nothing to bisect",
                                         ExitCode.FAILED: "found: the first bad commit is named",
                                         ExitCode.INCOMPLETE: "stopped (--max-steps, or a step with no verdict): "
                                                              "resume with --resume DIR",
                                         ExitCode.BLOCKER: "no overlay commit is bad: the case fails at the base "
                                                           "too (the fault is upstream or in the pin)"}))
    b.add_argument("refresh_dir", nargs="?", help="a refresh directory: bisect its replayed overlay")
    b.add_argument("--case", help="the failing case (required unless --resume)")
    b.add_argument("--descriptor", help="with --fork-repo: descriptor TOML whose [releases.current] is today's pin "
                                        "(default: the embedded one)")
    b.add_argument("--fork-repo", help="instead of a refresh directory: the fork's git repository")
    b.add_argument("--base", help="with --fork-repo: the commit the overlay starts from (it must pass)")
    b.add_argument("--tip", help="with --fork-repo: the overlay's last commit (default: HEAD; it must fail)")
    b.add_argument("--fork", help="the fork's name in release tags (default: the repository folder's name)")
    b.add_argument("--backend", help="the backend the fork builds (default: the pin's only backend)")
    b.add_argument("--current", default="current", help="the release pinned today (default: current)")
    b.add_argument("--releases", help="release store, the wheel cache (default: the refresh's, or releases/ "
                                      "beside the bisect directory)")
    b.add_argument("--build-command", help="wheel build command, as for refresh")
    b.add_argument("--out", help="bisect directory to create (default: runs/bisect-<name>-<time>-<id>)")
    b.add_argument("--upstream", action="store_true",
                   help="with REFRESH_DIR: search its upstream range (old base..new upstream, first parent), "
                        "the overlay replayed onto each commit, for the first upstream commit that fails")
    b.add_argument("--max-steps", type=int, help="stop after this many new steps (resumable)")
    b.add_argument("--resume", metavar="DIR", help="continue the bisect in DIR from its bisect.json")
    b.set_defaults(func=_bisect)


def _refresh(args) -> int:
    import shlex

    from kit.refresh.run import RefreshRequest, run_refresh

    run = run_refresh(RefreshRequest(args.descriptor, args.fork_repo, args.upstream_ref, base=args.base, tip=args.tip,
                      fork=args.fork, out=args.out, store=args.releases, current=args.current,
                      backend=args.backend, only=args.cases, qualify_case=args.qualify_case,
                      qualify_bucket=args.qualify_bucket,
                      build_command=shlex.split(args.build_command) if args.build_command else None,
                      branch=args.branch, jobs=args.jobs, command=command_line("refresh")))
    print(run.run_dir)
    return run.exit_code


def _bisect(args) -> int:
    import shlex

    from kit.bisect import run as bisect

    if args.resume:
        given = [flag for flag, value in (("REFRESH_DIR", args.refresh_dir), ("--case", args.case),
                                          ("--fork-repo", args.fork_repo), ("--base", args.base),
                                          ("--tip", args.tip), ("--descriptor", args.descriptor)) if value]
        if given:
            raise BadInput(f"--resume continues with the inputs {args.resume}/bisect.json recorded; "
                           f"drop {', '.join(given)}")
        run_dir, record = bisect.resume(args.resume)
    else:
        if not args.case:
            raise BadInput("bisect needs --case: the case that fails at the tip")
        run_dir, record = bisect.start_bisect(bisect.BisectRequest(
            args.case, refresh_dir=args.refresh_dir, descriptor=args.descriptor, fork_repo=args.fork_repo,
            base=args.base, tip=args.tip, fork=args.fork, store=args.releases, current=args.current,
            backend=args.backend, build_command=shlex.split(args.build_command) if args.build_command else None,
            out=args.out, command=command_line("bisect"), upstream=args.upstream))
    run = bisect.run_bisect(run_dir, record, args.max_steps)
    print(run.run_dir)
    return run.exit_code


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"refresh": _add_refresh, "bisect": _add_bisect}
