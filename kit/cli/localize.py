"""`localize`: the first layer and sublayer where a failing case's candidate leaves the noise."""

from __future__ import annotations

import sys

from kit.cli.common import command_line
from kit.core.errors import BadInput
from kit.core.exitcodes import epilog, ExitCode


def _add_localize(sub) -> None:
    lo = sub.add_parser("localize", help="name the first layer and sublayer where a failing case's candidate "
                        "leaves the noise",
                        description="Runs the case on the candidate (--model, else the case's own model) and takes\n"
                                    "its failing prompts (or --prompt, refused if it passes). Each goes through the\n"
                                    "float32 reference, a clean run of the case's settings and the candidate;\n"
                                    "their residual streams are compared after the embeddings and after each\n"
                                    "block's attention and MLP. The first point above k x the clean run's\n"
                                    "difference is named. Writes localize.json and localize.ipynb; stdout carries\n"
                                    "the verdict line, then the directory. Backends that expose per-layer\n"
                                    f"activations: {_localizable()}.",
                        epilog=epilog(ExitCode.PASSED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                                      meanings={ExitCode.PASSED: "localized (the verdict may be that no point "
                                                                 "leaves the noise)",
                                                ExitCode.INCOMPLETE: "localized, but the notebook did not run"}))
    lo.add_argument("descriptor", help="descriptor TOML")
    lo.add_argument("case", help="the failing case's name")
    lo.add_argument("--prompt", action="append", dest="prompts", help="localize this prompt (repeatable; default: "
                    "the case's worst failing prompts)")
    lo.add_argument("--model", help="the candidate's model folder (default: the case's own model)")
    lo.add_argument("--out", help="localize directory to create (default: runs/localize-<case>-<time>-<id>)")
    lo.set_defaults(func=_localize)


def _localizable() -> str:
    """`localize --help`'s backends: those registered with per-layer activations to read (the reference alone
    where the registry cannot be read, as for golden make's choices)."""
    from kit.backends import registry

    try:
        return ", ".join(registry.localizable())
    except BadInput:
        return registry.REFERENCE


def _localize(args) -> int:
    from kit.localize.run import localize_case

    run = localize_case(args.descriptor, args.case, args.prompts, model=args.model, out=args.out,
                        command=command_line("localize"))
    print(run.verdict)
    print(run.out)
    if run.notebook_error:
        print(f"parity-kit: {run.notebook_error}", file=sys.stderr)
        return ExitCode.INCOMPLETE
    return ExitCode.PASSED


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"localize": _add_localize}
