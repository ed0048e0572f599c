"""`parity-kit baseline status|make|deepen|log|verify|adopt|mark-bad`: the baselines each case stands on here, made,
blessed with their lineage and traced."""

from __future__ import annotations

import json
import sys

from kit.cli.common import exits, jobs
from kit.core.errors import BadInput
from kit.core.exitcodes import epilog, ExitCode
from kit.core.records import paths


def _add_baseline(sub) -> None:
    desc_help = "descriptor TOML (default: the embedded tiny-cpu descriptor)"
    bl = sub.add_parser("baseline", help="which baselines each case stands on here; make the missing ones; their "
                                         "lineage",
                        epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.NO_BASELINE,
                                      ExitCode.INTERRUPTED,
                                      meanings={ExitCode.PASSED: "done", ExitCode.FAILED: "make: the bless was "
                                                "refused (backtest or evidence gate)", ExitCode.NO_BASELINE:
                                                "status: a case has no baseline it may use here"}))
    bl = bl.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    st = bl.add_parser("status", help="per case, the golden and calibration record it would use on this host, "
                                      "made where and when: matches, falls back (by which rule) or missing",
                       epilog=exits("every case has a baseline it may use here (own or by a stated fallback)",
                                     ExitCode.NO_BASELINE))
    st.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    st.add_argument("--case", action="append", dest="cases", help="this case only (repeatable)")
    st.add_argument("--json", action="store_true", help="print the rows as JSON")
    st.set_defaults(func=_baseline_status)

    mk = bl.add_parser("make", help="make the baselines this runtime lacks (exact goldens, calibration records, "
                                    "power records), backtest them, check them with a gate run of every case, and "
                                    "only then place them with their lineage",
                       epilog=exits("made and blessed, or nothing to make", ExitCode.FAILED))
    mk.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    mk.add_argument("--case", action="append", dest="cases", help="this case only (repeatable)")
    mk.add_argument("--reason", required=True, help="why the baselines are made (kept in their lineage)")
    mk.add_argument("--again", action="store_true",
                    help="also remake the baselines this runtime has (the new ones supersede them)")
    _judging(mk)
    mk.add_argument("--power-family", action="append", dest="power_families", metavar="NAME[=FAULT]",
                    help="measure power records over this fault family only (repeatable; as `power --family`; "
                         "default: every family)")
    mk.add_argument("--no-power", action="store_true",
                    help="make no power records (the evidence says so; a case held to a detectable_limit needs one)")
    where = mk.add_mutually_exclusive_group()
    where.add_argument("--out", help="working directory (default: runs/baseline-<descriptor>-<time>)")
    where.add_argument("--resume", metavar="DIR", help="continue an interrupted make of this descriptor in DIR: its "
                                                        "staged goldens and records, finished calibration and power "
                                                        "samples and evidence gate cases are reused")
    mk.set_defaults(func=_baseline_make)

    dp = bl.add_parser("deepen", help="add clean samples to each case's calibration record of this host's class: "
                                      "further launches of its clean variants here, and passed control runs of the "
                                      "pin from a history; the deeper record is backtested, checked with a gate of "
                                      "the deepened cases and placed with its lineage",
                       epilog=exits("deepened and blessed", ExitCode.FAILED))
    dp.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    dp.add_argument("--case", action="append", dest="cases", default=[],
                    help="this case only (repeatable; default: every case with a record of this host's class)")
    dp.add_argument("--reason", required=True, help="why the records are deepened (kept in their lineage)")
    dp.add_argument("--launches", type=int, default=1, metavar="N",
                    help="rounds of further launches here, each a launch of every clean variant (default 1; 0: "
                         "only the control runs of --history)")
    dp.add_argument("--history", action="append", default=[], metavar="DIR",
                    help="a folder of runs whose passed, verified control runs of the pin (same card, runtime, "
                         "release and inputs) are taken as samples (repeatable)")
    _judging(dp)
    where = dp.add_mutually_exclusive_group()
    where.add_argument("--out", help="working directory (default: runs/baseline-<descriptor>-<time>)")
    where.add_argument("--resume", metavar="DIR", help="continue an interrupted deepen in DIR: every sample it "
                                                        "finished is reused")
    dp.set_defaults(func=_baseline_deepen)

    lg = bl.add_parser("log", help="each case's chain of baselines, oldest first: why, by which command, "
                                   "the backtest, how the bounds moved", epilog=exits("printed"))
    lg.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    lg.add_argument("--case", action="append", dest="cases", help="this case only (repeatable)")
    lg.add_argument("--json", action="store_true", help="print the chains as JSON")
    lg.set_defaults(func=_baseline_log)

    vf = bl.add_parser("verify", help="every lineage entry's claims re-derived from the files: its file's digest, "
                                      "a record's bounds, how far they moved from its parent's",
                       epilog=exits("every entry verified"))
    vf.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    vf.add_argument("--archive", action="append", default=[],
                    help="a folder of run directories to backtest each record over again (repeatable): no known-bad "
                         "run may pass under it, no known-good run fail unless its entry accepted the flips")
    vf.set_defaults(func=_baseline_verify)

    ad = bl.add_parser("adopt", help="write a first lineage entry for every listed baseline that has none",
                       epilog=exits("written (or every entry was there)"))
    ad.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    ad.add_argument("--reason", help="the reason the entries keep (default: made before baselines kept a lineage)")
    ad.set_defaults(func=_baseline_adopt)

    mark = bl.add_parser("mark-bad", help="mark a run directory as known-bad: no new baseline may pass it",
                         epilog=exits("marked"))
    mark.add_argument("run", help="the run directory")
    mark.add_argument("--reason", required=True, help="why the run is bad (a known fault, a broken build)")
    mark.set_defaults(func=_baseline_mark_bad)


def _judging(parser) -> None:
    """The options of how a new baseline is judged and placed, which `baseline make` and `baseline deepen` share."""
    parser.add_argument("--archive", action="append", default=[],
                        help="a folder of run directories to backtest over (repeatable; default: runs/)")
    parser.add_argument("--accept-flips", metavar="REASON",
                        help="bless even though known-good runs would now fail (listed), for this reason")
    parser.add_argument("--accept-looser", metavar="REASON",
                        help="bless a record whose bounds are looser than the one it supersedes (or its chain's "
                             "agreed one) beyond that one's margin, for this reason (kept in its lineage)")
    parser.add_argument("--skip-unreadable", action="store_true",
                        help="backtest without the archived runs that cannot be read (each is named)")
    parser.add_argument("--jobs", type=jobs, help="cases of the evidence gate run side by side")
    parser.add_argument("--sign", metavar="KEYFILE",
                        help="sign each lineage entry written with this ed25519 private key (PEM), as `gate --sign` "
                             "signs a run (default: $PARITY_KIT_SIGNING_KEY; docs/verify.md)")


def _baseline_status(args) -> int:
    from kit.descriptor.baselines import refuse_unverified
    from kit.descriptor.standing import Standing, plan_rows, table_markdown
    from kit.descriptor.load import load_descriptor
    from kit.descriptor.plan import resolve

    loaded = load_descriptor(args.descriptor)
    refuse_unverified(loaded)  # the rows date and word each baseline by its lineage
    rows = plan_rows(resolve(loaded, args.cases))
    print(json.dumps([r.to_dict() for r in rows], indent=2) if args.json else table_markdown(rows))
    return ExitCode.NO_BASELINE if any(r.standing == Standing.MISSING for r in rows) else ExitCode.PASSED


def _baseline_make(args) -> int:
    from kit.baselines.make import MakeRequest, make_baselines
    from kit.run.signing import load_signer

    signer = load_signer(args.sign)  # a key that cannot sign is refused before anything is made
    # The command as typed, less the verbosity flags (they change no baseline).
    typed = ["parity-kit", *(a for a in sys.argv[1:] if a not in ("-q", "--quiet", "-v", "--verbose"))]
    outcome = make_baselines(MakeRequest(
        args.descriptor, args.cases, args.reason, args.again, args.accept_flips, args.archive, args.skip_unreadable,
        args.jobs, args.out, typed if "baseline" in typed else None, args.resume, args.accept_looser,
        args.power_families, args.no_power, signer))
    return _made_lines(outcome)


def _baseline_deepen(args) -> int:
    from pathlib import Path

    from kit.baselines.deepen import DeepenRequest, deepen
    from kit.run.signing import load_signer

    signer = load_signer(args.sign)  # a key that cannot sign is refused before anything is measured
    typed = ["parity-kit", *(a for a in sys.argv[1:] if a not in ("-q", "--quiet", "-v", "--verbose"))]
    outcome = deepen(DeepenRequest(
        args.descriptor, args.reason, tuple(args.cases), args.launches, tuple(map(Path, args.history)),
        tuple(map(Path, args.archive)), args.skip_unreadable, args.accept_flips, args.accept_looser, args.jobs,
        Path(args.out) if args.out else None, Path(args.resume) if args.resume else None,
        tuple(typed) if "deepen" in typed else (), signer))
    return _made_lines(outcome)


def _made_lines(outcome) -> int:
    """What a make or a deepen prints at its end: every refusal, where the evidence is, each file written; its exit
    code."""
    for line in outcome.refusals:
        print(f"refused: {line}")
    if outcome.work_dir is not None:
        print(f"{'blessed' if outcome.blessed else 'refused'}: evidence in {paths.display(outcome.work_dir)}")
    for path in outcome.written:
        print(f"  wrote {paths.display(path)}")
    return ExitCode.FAILED if outcome.refusals else ExitCode.PASSED


def _baseline_log(args) -> int:
    from kit.descriptor.baselines import refuse_unverified
    from kit.baselines.log import chain_lines, chains
    from kit.descriptor.load import load_descriptor
    from kit.descriptor.plan import outline

    loaded = load_descriptor(args.descriptor)
    refuse_unverified(loaded)  # a chain whose claims do not re-derive is not shown as if they did
    stated = outline(loaded)
    unknown = [name for name in args.cases or () if name not in stated.cases]
    if unknown:  # "no lineage kept yet" would say a case has none, not that it does not exist
        raise BadInput(stated.no_case(unknown[0]))
    found = chains(stated.lineage, args.cases)
    if args.json:
        print(json.dumps([c.to_dict() for c in found], indent=2))
    elif not found:
        print("no lineage kept yet (`parity-kit baseline adopt` gives the listed baselines their first entries)")
    for c in found if not args.json else []:
        print("\n".join(chain_lines(c)))
    return ExitCode.PASSED


def _baseline_verify(args) -> int:
    from kit.baselines.signed import signature_check
    from kit.baselines.verify import backtest_problems, preflight_problems
    from kit.descriptor.baselines import lineage_problems, tree_root
    from kit.run.signing import TRUSTED_KEYS
    from kit.descriptor.load import load_descriptor
    from kit.descriptor.plan import outline

    loaded = load_descriptor(args.descriptor)
    entries, problems = lineage_problems(loaded)
    # The gate's own checks, once each entry's claims hold: what status and check refuse is refused here too.
    problems = problems or preflight_problems(loaded)
    stated = outline(loaded)
    signed = "none signed"
    if stated.baseline_folders is not None:
        signed, unsigned = signature_check(stated.baseline_folders["lineage"], stated.lineage,
                                           tree_root(loaded.path) / TRUSTED_KEYS)
        problems += unsigned
    if args.archive and stated.baseline_folders is not None:
        problems += backtest_problems(stated.lineage, stated.baseline_folders["lineage"], args.archive)
    for line in problems:
        print(f"refused: {line}")
    if problems:
        return ExitCode.BAD_INPUT
    again = f"; each record backtested again over {', '.join(args.archive)}" if args.archive else ""
    print(f"verified: {entries} lineage entries (each file's digest; each record's bounds, and how far they moved "
          f"from its parent's and from its chain's agreed record's, re-derived from its samples; every baseline in "
          f"use held to its case by the gate's preflight{again}); {signed}")
    return ExitCode.PASSED


def _baseline_adopt(args) -> int:
    from kit.baselines.adopt import adopt

    written = adopt(args.descriptor, args.reason)
    for path in written:
        print(f"wrote {paths.display(path)}")
    if not written:
        print("every listed baseline has its lineage entry")
    return ExitCode.PASSED


def _baseline_mark_bad(args) -> int:
    from kit.baselines.marks import mark_bad

    print(f"marked {paths.display(mark_bad(args.run, args.reason).path)}")
    return ExitCode.PASSED


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"baseline": _add_baseline}
