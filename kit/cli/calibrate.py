"""What a case's noise is and what it can see through it: `calibrate` (clean variation measured into bounds),
`power` (the fault catalogue at graded magnitudes against those bounds) and `fault` (the catalogue: list,
inject)."""

from __future__ import annotations

import json

from kit.cli.common import at_least, command_line, exits
from kit.core.errors import BadInput
from kit.core.exitcodes import epilog, ExitCode
from kit.core.records import paths


def _add_calibrate(sub) -> None:
    cal = sub.add_parser("calibrate", help="measure semantic cases' clean variation; write calibration records",
                         description="Scores each semantic case's clean variants (one engine launch each) in\n"
                                     "calibrate.ipynb, then writes calibrations/<sha256>.json: the samples, the\n"
                                     "bounds the rule derives from them, and where they were measured. A case\n"
                                     "uses one with calibration = \"<path>\" in place of its bound.",
                         epilog=epilog(ExitCode.PASSED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED))
    cal.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                     help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    cal.add_argument("--case", action="append", dest="cases", help="calibrate only this case (repeatable; "
                     "default: every semantic case)")
    cal.add_argument("--out", help="calibration directory to create (default: runs/calibrate-<name>-<time>-<id>)")
    cal.add_argument("--resume", metavar="DIR", help="continue a calibration directory, reusing its finished samples")
    cal.add_argument("--to", default="calibrations", help="folder of the records (default: calibrations)")
    cal.add_argument("--list-variants", action="store_true", help="print the variants of the one --case as JSON")
    cal.set_defaults(func=_calibrate)


def _add_power(sub) -> None:
    pw = sub.add_parser("power", help="measure what each calibrated case can detect: the fault catalogue at graded "
                                      "magnitudes against the case's record; write power records",
                        description="Writes each fault family's representative fault into the case's model at graded\n"
                                    "magnitudes, scores the faulted model with every clean variant of the case's\n"
                                    "calibration, and judges each sample by the record this host uses. The smallest\n"
                                    "magnitude caught in at least 80 % of them is the family's detectable effect.\n"
                                    "Writes calibrations/power/<sha256>.json; a case lists it with power = [...].",
                        epilog=epilog(ExitCode.PASSED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED))
    pw.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                    help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    pw.add_argument("--case", action="append", dest="cases", help="measure only this case (repeatable; default: "
                    "every calibrated case)")
    pw.add_argument("--family", action="append", dest="families", metavar="NAME[=FAULT]",
                    help="measure only this family (repeatable; NAME=FAULT names any fault of the catalogue)")
    pw.add_argument("--float32-case", default="checkpoint", help="the descriptor's hf float32 case that measures "
                    "each fault's effect (default: checkpoint)")
    pw.add_argument("--steps-down", type=lambda text: at_least(text, 0), default=1,
                    help="magnitudes tried below the first one caught (default 1; 0: stop at the first caught, "
                    "which then bounds the detectable effect from above)")
    pw.add_argument("--refine", type=lambda text: at_least(text, 0), default=0, metavar="N",
                    help="where a magnitude missed lies directly under the lowest caught, try N geometric midpoints "
                    "between them, each between the highest miss and the lowest catch so far (default 0; each "
                    "halves the gap in log space, so the figure is measured to within the square root of the gap "
                    "left)")
    pw.add_argument("--reuse", action="append", default=[], metavar="RECORD",
                    help="take the trials of this earlier power record of a case measured here (same calibration "
                    "record and runtime) as measured, not tried again; they are kept in the new record "
                    "(repeatable; a record of another case is passed over)")
    pw.add_argument("--out", help="directory of the faulted samples (default: runs/power-<name>-<time>-<id>)")
    pw.add_argument("--resume", metavar="DIR", help="continue a measurement, reusing its finished samples")
    pw.add_argument("--to", default="calibrations/power", help="folder of the power records "
                    "(default: calibrations/power)")
    pw.add_argument("--merge", nargs="+", metavar="RECORD", help="measure nothing: write one record of the "
                    "trials of these power records of one --case (families measured in separate calls), each "
                    "judged by its evidence first")
    pw.set_defaults(func=_power)


def _add_fault(sub) -> None:
    ft = sub.add_parser("fault", help="the fault catalogue: list its engine-like faults, or inject one into a copy "
                                      "of a Llama checkpoint to see whether a gate fails it",
                        epilog=exits("done (inject: the faulted copy's folder on stdout)"))
    ft = ft.add_subparsers(required=True, metavar="ACTION")
    fl = ft.add_parser("list", help="every fault: the engine bug it mimics, what it edits, the magnitudes graded",
                       epilog=exits("listed"))
    fl.set_defaults(func=_fault_list)
    fi = ft.add_parser("inject", help="write a copy of a checkpoint with one fault at one magnitude into a new folder",
                       epilog=exits("injected: the copy's folder on stdout"))
    fi.add_argument("name", help="the fault (parity-kit fault list)")
    fi.add_argument("magnitude", type=float, help="how big (each fault's unit: parity-kit fault list)")
    fi.add_argument("--model", required=True, help="the Hugging Face Llama checkpoint folder to copy")
    fi.add_argument("--out", required=True, help="folder for the copy (new or empty)")
    fi.set_defaults(func=_fault_inject)


def _calibrate(args) -> int:
    from kit.calibrate.run import calibrate, variants_for

    if args.list_variants:
        from kit.descriptor.load import load_descriptor
        from kit.descriptor.plan import resolve

        if not args.cases or len(args.cases) != 1:
            raise BadInput("--list-variants needs exactly one --case")
        spec = resolve(load_descriptor(args.descriptor), args.cases, resolve_calibration=False).specs[0]
        print(json.dumps(variants_for(spec)))
        return 0
    done = calibrate(args.descriptor, only=args.cases, out=args.out, resume=args.resume, to=args.to,
                     command=command_line("calibrate"))
    for c in done:
        print(c.path if c.path else f"{c.case}: error: {c.error}")
    return ExitCode.INCOMPLETE if any(c.error for c in done) else ExitCode.PASSED


def _power(args) -> int:
    from kit.faults.power import PowerRequest, measure, merge

    if args.merge:
        if len(args.cases or []) != 1:
            raise BadInput("power --merge: name the case the records are of, once (--case NAME)")
        print(merge(args.descriptor, args.cases[0], args.merge, to=args.to, command=command_line("power")).path)
        return ExitCode.PASSED
    done = measure(PowerRequest(args.descriptor, args.cases, args.families, out=args.out, resume=args.resume,
                                to=args.to, float32_case=args.float32_case, command=command_line("power"),
                                steps_down=args.steps_down, refine=args.refine, reuse=args.reuse))
    for c in done:
        print(c.path if c.path else f"{c.case}: error: {c.error}")
    return ExitCode.INCOMPLETE if any(c.error for c in done) else ExitCode.PASSED


def _fault_list(args) -> int:
    from kit.faults.inject import catalogue_rows

    for row in catalogue_rows():
        print(f"{row.name}: {row.mimics}\n  edits {row.edit}; magnitude: {row.unit}; graded at "
              f"{', '.join(f'{m:g}' for m in row.magnitudes)}")
    return 0


def _fault_inject(args) -> int:
    from kit.faults.inject import inject

    print(inject(args.name, args.magnitude, args.model, args.out))
    return 0


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"calibrate": _add_calibrate, "power": _add_power, "fault": _add_fault}
