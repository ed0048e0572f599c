"""`parity-kit gate` and what prepares one: `check` (its preflight alone), `kernels` (the Jupyter kernels its
cases need) and `spec` (one case as its notebook receives it)."""

from __future__ import annotations

import json
from pathlib import Path

from kit.cli.common import command_line, exits, jobs, publish_target, retries
from kit.core.errors import BadInput
from kit.core.exitcodes import epilog, ExitCode
from kit.core.records import paths
from kit.core.records.results import GATE_EXIT_CODES
from kit.gate.executors.interface import DEFAULT as DEFAULT_EXECUTOR, executors
from kit.gate.heartbeat import DEFAULT_HEARTBEAT_S, HEARTBEAT_ENV
from kit.run import output


def _add_gate(sub) -> None:
    g = sub.add_parser("gate", help="run every case of a descriptor and write a run directory",
                       description="Runs every case of a descriptor, each a notebook in its kernel, and writes a run\n"
                                   "directory; stdout carries only its path. Where no terminal shows the progress\n"
                                   f"bar (CI), a heartbeat line every {DEFAULT_HEARTBEAT_S:g} s "
                                   f"(${HEARTBEAT_ENV}) and a line per\n"
                                   "finished bucket of each case say what runs.",
                       epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT,
                                     ExitCode.NO_BASELINE, ExitCode.INCONCLUSIVE, ExitCode.BORROWED_BOUNDS,
                                     ExitCode.INTERRUPTED))
    g.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                   help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    g.add_argument("--out", help="run directory to create (default: runs/<name>-<time>-<id>)")
    g.add_argument("--jobs", type=jobs,
                   help="cases run side by side with the local executor (default: cases that ask for GPUs "
                        "as many as the free GPUs allow, each on its own; the others as many as the cores); "
                        "Ray places cases by their resources instead")
    g.add_argument("--case", action="append", dest="cases", help="run only this case (repeatable)")
    g.add_argument("--release", help="run against this [releases.NAME] of the descriptor (its kernels and options)")
    g.add_argument("--no-summary", action="store_true", help="skip the summary notebook and its HTML")
    g.add_argument("--junit", metavar="FILE", help="also write JUnit XML (one testcase per case) for CI dashboards")
    g.add_argument("--executor", choices=executors.names(), default=DEFAULT_EXECUTOR,
                   help="local: cases side by side on this machine (default); ray: each case a Ray task with "
                        "its descriptor's resources, on the cluster at $RAY_ADDRESS or a Ray started for the run")
    g.add_argument("--resume", metavar="RUN_DIR",
                   help="rerun into an earlier run directory: reuse each finished case whose inputs are "
                        "unchanged, run the rest")
    g.add_argument("--publish", metavar="URL",
                   help="copy the finished run directory to URL/<run>/ (s3://bucket/prefix, gs://..., or a folder); "
                        "never over an existing one; a failed copy is logged and noted in published.json, the "
                        "verdict's exit code stands (default: $PARITY_KIT_PUBLISH; docs/history-store.md)")
    g.add_argument("--infra-retries", type=retries, metavar="N", dest="infra_retries",
                   help="run a case that failed for a reason of the job (its kernel died, its engine never "
                        "answered, a timeout, a lost worker) again up to N times; numeric failures never "
                        "(default: the descriptor's [defaults] infrastructure_retries, 1)")
    g.add_argument("--sign", metavar="KEYFILE",
                   help="sign the finished run's root digest with this ed25519 private key (PEM): an in-toto "
                        "Statement in a DSSE envelope, written as attestation.dsse.json in the run directory "
                        "(default: $PARITY_KIT_SIGNING_KEY, a key file's path or the PEM itself; docs/verify.md)")
    g.set_defaults(func=_gate)


def _add_check(sub) -> None:
    ch = sub.add_parser("check", help="run the gate's preflight alone: a line per check passed, then ok",
                        description="Checks what a gate checks before it runs anything: the descriptor, the\n"
                                    "fixture, the goldens, the model digests, the kernels, the notebooks and the\n"
                                    "backends installed here. Runs no case and writes nothing.",
                        epilog=exits("every check passed"))
    ch.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                    help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    ch.add_argument("--case", action="append", dest="cases", help="check only this case (repeatable)")
    ch.add_argument("--release", help="check against this [releases.NAME] of the descriptor (its kernels and options)")
    ch.add_argument("--executor", choices=executors.names(), default=DEFAULT_EXECUTOR,
                    help="the executor the gate will run with (default: local, as the gate's): the local one "
                         "also checks each case's GPUs against this node's")
    ch.set_defaults(func=_check)


def _add_kernels(sub) -> None:
    k = sub.add_parser("kernels", help="list the Jupyter kernels the descriptors' cases need, "
                                       "and whether each is installed",
                       epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                                     meanings={ExitCode.PASSED: "every kernel is installed",
                                               ExitCode.FAILED: "a kernel is missing (its line says how to "
                                                                "install it)"}))
    k.add_argument("descriptors", nargs="*", metavar="DESCRIPTOR",
                   help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    k.set_defaults(func=_kernels)


def _add_spec(sub) -> None:
    sp = sub.add_parser("spec", help="print one case resolved from a descriptor, as its notebook receives it (JSON)",
                        epilog=exits("printed"))
    sp.add_argument("descriptor", help="descriptor TOML")
    sp.add_argument("case", help="the case's name")
    sp.add_argument("--options", metavar="JSON", help="option overrides (a notebook's option parameters, as a JSON "
                                                      "object), held to the backend's options schema")
    sp.set_defaults(func=_spec)


def _gate(args) -> int:
    from kit.gate.executor import RunRequest
    from kit.gate.run import GateRequest, run_gate
    from kit.run.signing import load_signer

    signer = load_signer(args.sign)  # a key that cannot sign is refused before anything runs
    if args.resume and args.out and Path(args.out).resolve() != Path(args.resume).resolve():
        raise BadInput(f"--out {args.out} and --resume {args.resume}: a resumed run writes into the directory "
                       "it resumes")
    run = run_gate(GateRequest(RunRequest(args.descriptor, args.out, args.cases, args.release, args.executor,
                                          args.resume, args.infra_retries),
                               command_line("gate"), args.jobs, not args.no_summary, args.junit,
                               publish_target(args.publish), signer))
    print(run.run_dir)  # stdout carries only the run directory, for scripts: RUN=$(parity-kit gate ...)
    return GATE_EXIT_CODES[run.verdict]


def _check(args) -> int:
    from kit.gate.check import run_check

    lines = run_check(args.descriptor, args.cases, args.release, args.executor)
    if output.shows(output.NORMAL):
        print("\n".join(lines))
    print("ok")
    return ExitCode.PASSED


def _kernels(args) -> int:
    from kit.descriptor.load import load_descriptor
    from kit.descriptor.plan import outline
    from kit.gate.preflight import kernel_rows

    rows = kernel_rows([outline(load_descriptor(d)) for d in args.descriptors or [paths.EMBEDDED_DESCRIPTOR]])
    for row in rows:
        state = f"installed ({row['location']})" if row["installed"] else f"MISSING: {row['hint']}"
        print(f"{row['kernel']}: {state}; cases: {', '.join(row['cases'])}")
    return 0 if all(r["installed"] for r in rows) else 1


def _spec(args) -> int:
    import dataclasses

    from kit.descriptor.load import checked_options, load_descriptor
    from kit.descriptor.plan import resolve

    spec = resolve(load_descriptor(args.descriptor), [args.case]).specs[0]
    if args.options:
        try:
            overrides = json.loads(args.options)
        except ValueError as exc:
            raise BadInput(f"--options: not JSON: {exc}") from None
        except RecursionError:
            raise BadInput("--options: not JSON: it nests deeper than a JSON reader can follow") from None
        if not isinstance(overrides, dict):
            raise BadInput("--options: expected a JSON object of option names and values")
        try:
            spec = dataclasses.replace(spec, options=checked_options(spec.backend, {**spec.options, **overrides}))
        except BadInput as exc:
            raise BadInput(f"--options: case {args.case}: {exc}") from None
    print(json.dumps(spec.to_dict(), sort_keys=True))
    return 0


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"gate": _add_gate, "check": _add_check, "kernels": _add_kernels, "spec": _add_spec}
