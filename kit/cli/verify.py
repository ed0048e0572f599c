"""`verify`: a finished gate run judged again from its evidence, with no engine."""

from __future__ import annotations

from pathlib import Path

from kit.cli.common import exits
from kit.core.exitcodes import ExitCode


def _add_verify(sub) -> None:
    vr = sub.add_parser("verify", help="a finished gate run, or its --attach zip, judged again with no engine: every "
                                       "case from the evidence it kept, every file against the digest the run sealed",
                        epilog=exits("verified", ExitCode.FAILED))
    vr.add_argument("run", help="a gate run directory, or the zip `parity-kit report --attach` made of one")
    vr.add_argument("--descriptor", metavar="TOML", help="the repository's copy of the run's descriptor, whose "
                    "goldens and records judge it (default: the one its manifest names, by its path inside the "
                    "repository verify runs from; never one from the run)")
    vr.add_argument("--root", metavar="SHA256", help="the root digest quoted where the run was first reported (a CI "
                    "log, an issue): a copy with another is refused")
    vr.add_argument("--require-signed", action="store_true", help="refuse a run that no trusted key signed "
                    "(unsigned, or signed by a key the trusted keys do not list)")
    vr.add_argument("--trusted-keys", metavar="TOML", help="the keys whose signatures count (default: "
                    "trusted-keys.toml at the top of the repository that holds the run's descriptor)")
    vr.add_argument("--require-all", action="store_true", help="refuse a run of only some of the descriptor's cases "
                    "(its command's --case): by default it verifies, saying which it left out")
    vr.set_defaults(func=_verify)


def _verify(args) -> int:
    from kit.gate.verify.runcheck import verify
    from kit.gate.verify.signature import Policy

    policy = Policy(Path(args.trusted_keys) if args.trusted_keys else None, args.require_signed)
    found = verify(args.run, args.descriptor, args.root, args.require_all, policy)
    print("\n".join(found.lines()))
    return ExitCode.PASSED if found.ok else ExitCode.FAILED


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"verify": _add_verify}
