"""The `parity-kit` command.

Subcommands import what they need when they run, so `--help` and bad-input
refusals answer without loading torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import NoReturn

from kit import __version__
from kit.core.records import contract, paths, rundir
from kit.core.errors import BadInput, Unrunnable
from kit.core.exitcodes import ExitCode, epilog
from kit.core.records.text import printable
from kit.core.records.results import GATE_EXIT_CODES
from kit.gate.executors import DEFAULT as DEFAULT_EXECUTOR, executors
from kit.gate.heartbeat import DEFAULT_HEARTBEAT_S, HEARTBEAT_ENV
from kit.run import output, stopping
from kit.core.records.records import GOLDEN_KINDS, SEMANTIC


def _golden_makers() -> tuple[str, list[str]]:
    """`golden make --backend`'s default (the reference) and its choices (the backends that make goldens)."""
    from kit.backends import registry

    try:
        return registry.REFERENCE, registry.golden_makers()
    except BadInput:
        return registry.REFERENCE, [registry.REFERENCE]


def _localizable() -> str:
    """`localize --help`'s backends: those registered with per-layer activations to read (the reference alone
    where the registry cannot be read, as for golden make's choices)."""
    from kit.backends import registry

    try:
        return ", ".join(registry.localizable())
    except BadInput:
        return registry.REFERENCE


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after a bare `--` belongs to the program a command wraps (jupyter lab).
    passthrough = argv[argv.index("--") + 1:] if "--" in argv else []
    args = _parser().parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.passthrough = passthrough
    output.setup(args.verbosity)  # every command's lines go through logging from here
    # Kernels started from here (gate cases, JupyterLab) find the main environment through this.
    os.environ.setdefault(contract.MAIN_PYTHON_ENV, sys.executable)
    try:
        if _runs_embedded_descriptor(args):
            paths.require_embedded_data()  # a wheel installed without its data: one line, not a traceback
        with stopping.on_signals():  # SIGTERM, SIGHUP, SIGINT (even inherited as ignored) end kernels too
            code = args.func(args)
            sys.stdout.flush()  # a reader gone early shows here, where it is caught, not at the exit's flush
            return code
    except BadInput as exc:
        print(f"parity-kit: bad input: {printable(str(exc))}", file=sys.stderr)  # it may quote a prompt id
        return ExitCode.BAD_INPUT
    except Unrunnable as exc:  # no case ran: no verdict, as for an incomplete run
        print(f"parity-kit: cannot run: {printable(str(exc))}", file=sys.stderr)
        return ExitCode.INCOMPLETE
    except KeyboardInterrupt as exc:
        print(f"parity-kit: {stopping.describe(exc)}", file=sys.stderr)
        return stopping.exit_code(exc)
    except BrokenPipeError:  # the reader of stdout left early (`| head`): end quietly, as Unix filters do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not raise again
        return ExitCode.BROKEN_PIPE
    except Exception as exc:  # a bug, not bad input: its own code, so CI never reads it as a verdict
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(printable(f"parity-kit: internal error: {type(exc).__name__}: {exc}".splitlines()[0]), file=sys.stderr)
        return ExitCode.INTERNAL


def _runs_embedded_descriptor(args) -> bool:
    """Whether the command reads the embedded descriptor (every descriptor argument's default)."""
    if getattr(args, "descriptors", None) == []:  # `kernels` with none named
        return True
    return getattr(args, "descriptor", None) == str(paths.EMBEDDED_DESCRIPTOR)


def _at_least(text: str, minimum: int) -> int:
    """A whole number of at least ``minimum`` from the command line, or a usage error (exit 3) saying so."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if n < minimum:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least {minimum}, got {text!r}")
    return n


def _jobs(text: str) -> int:
    """``--jobs``: a count of cases at once, at least 1. Zero or less is refused as a usage error (exit 3, as
    ``--jobs many`` is): the executors read a falsy count as "no limit given" and clamp a negative one to 1,
    so either would run something other than what was asked, silently."""
    return _at_least(text, 1)


def _retries(text: str) -> int:
    """``--infra-retries``: how often an infrastructure failure runs again, 0 or more."""
    return _at_least(text, 0)


class _Parser(argparse.ArgumentParser):
    """Every parser and subparser keeps the line breaks of its description and epilog (the exit codes)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A usage error is bad input (3) with argparse's usage message; argparse's own 2 is this
        command's "incomplete", which CI must never read from a mistyped flag."""
        self.print_usage(sys.stderr)
        self.exit(ExitCode.BAD_INPUT, f"{self.prog}: error: {message}\n")


def _exits(done: str, *more: ExitCode) -> str:
    """The exit codes of a command that does its job or refuses; ``done`` says what 0 means for it."""
    return epilog(ExitCode.PASSED, *more, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                  meanings={ExitCode.PASSED: done})


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="parity-kit", description=__doc__, epilog=epilog(*ExitCode))
    p.add_argument("--version", action="version", version=f"parity-kit {__version__}")
    level = p.add_mutually_exclusive_group()
    level.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=output.QUIET,
                       default=output.NORMAL, help="print only the verdict lines (refusals still go to stderr)")
    level.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=output.VERBOSE,
                       help="more detail: each case's start, its buckets in the heartbeat, every model hashing")
    sub = p.add_subparsers(required=True, metavar="COMMAND")

    g = sub.add_parser("gate", help="run every case of a descriptor and write a run directory",
                       description="Runs every case of a descriptor, each a notebook in its kernel, and writes a run\n"
                                   "directory; stdout carries only its path. Where no terminal shows the progress\n"
                                   f"bar (CI), a heartbeat line every {DEFAULT_HEARTBEAT_S:g} s (${HEARTBEAT_ENV}) and a line per\n"
                                   "finished bucket of each case say what runs.",
                       epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT,
                                     ExitCode.NO_BASELINE, ExitCode.INCONCLUSIVE, ExitCode.BORROWED_BOUNDS,
                                     ExitCode.INTERRUPTED))
    g.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                   help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    g.add_argument("--out", help="run directory to create (default: runs/<name>-<time>-<id>)")
    g.add_argument("--jobs", type=_jobs,
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
    g.add_argument("--publish", metavar="URL", help="copy the finished run directory to URL/<run>/ (s3://bucket/prefix, gs://..., or a folder); never over "
                        "an existing one; a failed copy is logged and noted in published.json, the verdict's exit code "
                        "stands (default: $PARITY_KIT_PUBLISH; docs/history-store.md)")
    g.add_argument("--infra-retries", type=_retries, metavar="N", dest="infra_retries",
                   help="run a case that failed for a reason of the job (its kernel died, its engine never "
                        "answered, a timeout, a lost worker) again up to N times; numeric failures never "
                        "(default: the descriptor's [defaults] infrastructure_retries, 1)")
    g.set_defaults(func=_gate)

    c = sub.add_parser("control", help="gate today's pin and the candidate, then say whose fault a failure is",
                       description="Runs the gate against two releases of the descriptor side by side and\n"
                                   "diagnoses whose fault a failure is.",
                       epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT,
                                     ExitCode.BLOCKER, ExitCode.INTERRUPTED))
    c.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                   help="descriptor TOML with [releases.current] and [releases.candidate]")
    c.add_argument("--out", help="control directory to create (default: runs/control-<name>-<time>-<id>)")
    c.add_argument("--current", default="current", help="the release pinned today (default: current)")
    c.add_argument("--candidate", default="candidate", help="the release to qualify (default: candidate)")
    c.add_argument("--jobs", type=_jobs, help="cases run side by side, both runs together (default: the cores, "
                                              "and for cases that ask for GPUs the free GPUs)")
    c.add_argument("--case", action="append", dest="cases", help="run only this case (repeatable)")
    c.add_argument("--no-summary", action="store_true", help="skip the control and summary notebooks")
    c.add_argument("--junit", metavar="FILE", help="also write JUnit XML: one testsuite per release")
    c.add_argument("--publish", metavar="URL", help="copy the finished control directory, both runs in it, to "
                                                    "URL/<control>/, as gate --publish does")
    c.set_defaults(func=_control)

    pb = sub.add_parser("publish", help="copy a finished run or control directory to a store: URL/<its name>/",
                        description="Copies a finished gate run or control directory to URL/<its name>/ (an\n"
                                    "s3:// prefix, gs://, or a folder) and records it in its published.json; a\n"
                                    "destination that exists already is refused. What gate --publish does, again.",
                        epilog=_exits("published: the URL on stdout"))
    pb.add_argument("run_dir", help="a finished gate run or control directory")
    pb.add_argument("url", nargs="?", help="the store (default: $PARITY_KIT_PUBLISH)")
    pb.set_defaults(func=_publish)

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
    r.add_argument("--jobs", type=_jobs, help="control cases run side by side (default: the cores)")
    r.set_defaults(func=_refresh)

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

    f = sub.add_parser("fixture", help="make, verify or report on a prompt fixture",
                       epilog=_exits("done (make: the fixture's path on stdout; verify: it is intact)"))
    f = f.add_subparsers(required=True, metavar="ACTION")
    fm = f.add_parser("make", help="tokenize a JSONL of {id, prompt} into fixtures/<sha256>.json",
                      epilog=_exits("made: the fixture's path on stdout, then its buckets"))
    fm.add_argument("--prompts", required=True, help="JSONL file, one {\"id\", \"prompt\"} per line")
    fm.add_argument("--model", required=True, help="model folder whose tokenizer.json and bos token to use")
    fm.add_argument("--out", default="fixtures", help="folder for the fixture (default: fixtures)")
    fm.add_argument("--buckets", default="128,256,512,1024", help="bucket sizes in tokens, comma separated")
    fm.set_defaults(func=_fixture_make)
    fv = f.add_parser("verify", help="check a fixture's digest (and its tokenizer, given --model)",
                      epilog=_exits("the fixture is intact (and made with that tokenizer)"))
    fv.add_argument("fixture", help="fixture JSON (fixtures/<sha256>.json)")
    fv.add_argument("--model", help="model folder whose tokenizer.json the fixture must have been made with")
    fv.set_defaults(func=_fixture_verify)
    fr = f.add_parser("report", help="which share of the vocabulary, token classes and positions the prompts exercise",
                      epilog=_exits("reported (the fixture is intact and its tokens lie in the model's vocabulary)"))
    fr.add_argument("fixture", help="fixture JSON (fixtures/<sha256>.json)")
    fr.add_argument("--model", help="model folder (the fixture's tokenizer): vocabulary size, token classes, context")
    fr.add_argument("--json", help="also write the report as JSON to this file ('-': JSON on stdout instead of tables)")
    fr.set_defaults(func=_fixture_report)

    gl = sub.add_parser("golden", help="make, verify or diff goldens",
                        epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                                      meanings={ExitCode.PASSED: "done", ExitCode.FAILED: "regen: refused (fewer "
                                                "than two backends agree with the new golden)"}))
    gl = gl.add_subparsers(required=True, metavar="ACTION")
    gm = gl.add_parser("make", help="score the fixture with a backend and write a golden (never over an existing one)",
                       epilog=_exits("made: the golden's path on stdout"))
    gm.add_argument("--model", required=True, help="model folder to score the fixture with")
    reference, makers = _golden_makers()
    gm.add_argument("--backend", default=reference, choices=makers,
                    help=f"a backend that can make goldens (default: {reference}); levanter runs in its own "
                         "environment: its parity-kit, e.g. .venv-levanter/bin/parity-kit golden make ...")
    gm.add_argument("--checkpoint", default="hf", choices=["hf", "native"],
                    help="levanter: an HF export or a native tensorstore checkpoint (default: hf)")
    gm.add_argument("--fixture", required=True, help="fixture JSON whose prompts the golden scores")
    gm.add_argument("--kind", choices=GOLDEN_KINDS, required=True,
                    help="semantic: judged within a bound; exact: bit for bit, on this runtime only")
    gm.add_argument("--top-k", type=int, default=25, help="golden tokens kept per prompt (default 25)")
    gm.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "float64"],
                    help="the dtype the backend scores in (default float32); hf float64 reports its logprobs rounded to float32, "
                         "so an exact golden made so holds on every host (docs/exact-baselines.md)")
    gm.add_argument("--attn-implementation", default="sdpa", choices=["sdpa", "eager", "sdpa_repeat_kv"],
                    help="hf: the attention implementation (default sdpa)")
    gm.add_argument("--device", default="cpu", help="torch device: cpu (default), cuda, cuda:N")
    gm.add_argument("--cpu-kernels", default="native", choices=["native", "avx2"],
                    help="hf on a CPU: native (default) runs the widest kernels this CPU has; avx2 pins torch's, "
                         "oneDNN's and MKL's to their AVX2 code, so an exact golden holds on every AVX2 host")
    gm.add_argument("--batch-size", type=int, default=1, help="same-bucket prompts scored together (default 1)")
    gm.add_argument("--decode", type=int, default=0, metavar="N",
                    help="also continue every prompt N greedy steps with the backend's decode path and keep the "
                         "top-k of each step (a decode golden, format 2; default 0: none)")
    gm.add_argument("--out", default="goldens", help="folder for the golden (default: goldens)")
    gm.set_defaults(func=_golden_make)
    gv = gl.add_parser("verify", help="check a golden against its fixture (and model)",
                       epilog=_exits("the golden matches the fixture (and the model)"))
    gv.add_argument("golden", help="golden JSON")
    gv.add_argument("--fixture", required=True, help="the fixture the golden must have been made from")
    gv.add_argument("--model", help="model folder whose digest the golden must carry")
    gv.set_defaults(func=_golden_verify)
    gd = gl.add_parser("diff", help="how far each case moved between two goldens",
                       epilog=_exits("compared (moving is not an error: read the lines)"))
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
    gr.add_argument("--kind", default=SEMANTIC, metavar="GOLDEN",
                    help="the [goldens] entry to replace (default: semantic); semantic goldens only")
    gr.add_argument("--release", help="check against this release's kernels (default: the cases' own)")
    gr.add_argument("--out", help="work directory (default: runs/regen-<name>-<time>-<id>)")
    gr.add_argument("--jobs", type=_jobs, help="checking cases run side by side (default: the cores)")
    gr.set_defaults(func=_golden_regen)

    vr = sub.add_parser("verify", help="a finished gate run, or its --attach zip, judged again with no engine: every "
                                       "case from the evidence it kept, every file against the digest the run sealed",
                        epilog=_exits("verified", ExitCode.FAILED))
    vr.add_argument("run", help="a gate run directory, or the zip `parity-kit report --attach` made of one")
    vr.add_argument("--descriptor", metavar="TOML", help="the repository's copy of the run's descriptor, whose "
                    "goldens and records judge it (default: the one its manifest names, where that is here)")
    vr.add_argument("--root", metavar="SHA256", help="the root digest quoted where the run was first reported (a CI "
                    "log, an issue): a copy with another is refused")
    vr.set_defaults(func=_verify)

    r = sub.add_parser("report", help="a finished run (or control) for people: Markdown for an issue, a zip to attach",
                       epilog=epilog(ExitCode.PASSED, ExitCode.INCOMPLETE, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                                     meanings={ExitCode.PASSED: "written",
                                               ExitCode.INCOMPLETE: "--summary: the summary was not built in full "
                                                                    "(one line says what failed)"}))
    r.add_argument("run_dir", help="a gate run directory or a control directory (for --summary, a refresh directory "
                                   "too)")
    r.add_argument("--markdown", action="store_true", help="print the evidence and a compact case table")
    r.add_argument("--attach", metavar="DIR", help="write DIR/<run>.zip: summary HTML, notebooks, results")
    r.add_argument("--summary", action="store_true", help="execute the summary notebook again and render "
                   "summary.html (a run whose summary failed, or was left out with --no-summary)")
    r.set_defaults(func=_report)

    lab = sub.add_parser("lab", help="open JupyterLab on the project, or on a run's summary, with its kernels",
                         description="Arguments after a bare `--` go to `jupyter lab` as they are.",
                         epilog=_exits("JupyterLab ended (the command becomes `jupyter lab`: its own codes)"))
    lab.add_argument("run_dir", nargs="?", help="a run or control directory to open (default: the project)")
    lab.add_argument("--port", type=int, default=8888, help="the port JupyterLab listens on (default 8888)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.set_defaults(func=_lab)

    k = sub.add_parser("kernels", help="list the Jupyter kernels the descriptors' cases need, "
                                       "and whether each is installed",
                       epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.INTERRUPTED,
                                     meanings={ExitCode.PASSED: "every kernel is installed",
                                               ExitCode.FAILED: "a kernel is missing (its line says how to "
                                                                "install it)"}))
    k.add_argument("descriptors", nargs="*", metavar="DESCRIPTOR",
                   help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    k.set_defaults(func=_kernels)

    sp = sub.add_parser("spec", help="print one case resolved from a descriptor, as its notebook receives it (JSON)",
                        epilog=_exits("printed"))
    sp.add_argument("descriptor", help="descriptor TOML")
    sp.add_argument("case", help="the case's name")
    sp.add_argument("--options", metavar="JSON", help="option overrides (a notebook's option parameters, as a JSON "
                                                      "object), held to the backend's options schema")
    sp.set_defaults(func=_spec)

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
    pw.add_argument("--steps-down", type=lambda text: _at_least(text, 0), default=1,
                    help="magnitudes tried below the first one caught (default 1; 0: stop at the first caught, "
                    "which then bounds the detectable effect from above)")
    pw.add_argument("--refine", type=lambda text: _at_least(text, 0), default=0, metavar="N",
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

    ft = sub.add_parser("fault", help="the fault catalogue: list its engine-like faults, or inject one into a copy "
                                      "of a Llama checkpoint to see whether a gate fails it",
                        epilog=_exits("done (inject: the faulted copy's folder on stdout)"))
    ft = ft.add_subparsers(required=True, metavar="ACTION")
    fl = ft.add_parser("list", help="every fault: the engine bug it mimics, what it edits, the magnitudes graded",
                       epilog=_exits("listed"))
    fl.set_defaults(func=_fault_list)
    fi = ft.add_parser("inject", help="write a copy of a checkpoint with one fault at one magnitude into a new folder",
                       epilog=_exits("injected: the copy's folder on stdout"))
    fi.add_argument("name", help="the fault (parity-kit fault list)")
    fi.add_argument("magnitude", type=float, help="how big (each fault's unit: parity-kit fault list)")
    fi.add_argument("--model", required=True, help="the Hugging Face Llama checkpoint folder to copy")
    fi.add_argument("--out", required=True, help="folder for the copy (new or empty)")
    fi.set_defaults(func=_fault_inject)

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

    d = sub.add_parser("digest", help="print the model digest of a folder", epilog=_exits("printed"))
    d.add_argument("model", help="model folder")
    d.set_defaults(func=_digest)
    _add_tool_commands(sub)
    _add_baseline_commands(sub)
    _add_history_command(sub)
    return p


def _add_history_command(sub) -> None:
    h = sub.add_parser("history", help="the gate over time: each case and bucket's errors, bounds and headroom "
                                       "across every run of a store, releases and baseline changes marked",
                       description="Indexes every run directory of a store (a folder, or an fsspec URL such as\n"
                                   "s3://bucket/prefix; only what changed is read again) and renders the history\n"
                                   "notebook to history.html in a new folder; --markdown and --json print the\n"
                                   "headroom table instead, without a kernel. A run that cannot be read is a line\n"
                                   "in the output, never a refusal; bad input (3) is a store that cannot be read or\n"
                                   "holds no run, or a selection that matches none.",
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
    shown.add_argument("--markdown", action="store_true", help="print the headroom table as Markdown (no notebook)")
    shown.add_argument("--json", action="store_true", help="print the history as JSON (no notebook)")
    shown.add_argument("--out", metavar="DIR", help="folder to render into (default: runs/history-<descriptor>-<time>)")
    h.set_defaults(func=_history)


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


def _add_tool_commands(sub) -> None:
    """Commands for CI steps and editors: a preflight alone, the descriptor's schema, the backends."""
    ch = sub.add_parser("check", help="run the gate's preflight alone: a line per check passed, then ok",
                        description="Checks what a gate checks before it runs anything: the descriptor, the\n"
                                    "fixture, the goldens, the model digests, the kernels, the notebooks and the\n"
                                    "backends installed here. Runs no case and writes nothing.",
                        epilog=_exits("every check passed"))
    ch.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR),
                    help="descriptor TOML (default: the embedded tiny-cpu descriptor)")
    ch.add_argument("--case", action="append", dest="cases", help="check only this case (repeatable)")
    ch.add_argument("--release", help="check against this [releases.NAME] of the descriptor (its kernels and options)")
    ch.add_argument("--executor", choices=executors.names(), default=DEFAULT_EXECUTOR,
                    help="the executor the gate will run with (default: local, as the gate's): the local one "
                         "also checks each case's GPUs against this node's")
    ch.set_defaults(func=_check)

    sc = sub.add_parser("schema", help="print the descriptor's JSON schema, for editors",
                        description="The descriptor's JSON schema (draft 2020-12): each case is one of the\n"
                                    "registered backends' case schemas, chosen by its `backend` key, so a\n"
                                    "third-party backend's options are in it too.",
                        epilog=_exits("printed"))
    sc.set_defaults(func=_schema)

    b = sub.add_parser("backends", help="list the registered backends and whether each is installed here",
                       epilog=_exits("listed (a backend not installed here is not an error)"))
    b.set_defaults(func=_backends)


def _add_baseline_commands(sub) -> None:
    """Baselines with a lifecycle: which each case stands on here, make the missing ones, their lineage."""
    desc_help = "descriptor TOML (default: the embedded tiny-cpu descriptor)"
    bl = sub.add_parser("baseline", help="which baselines each case stands on here; make the missing ones; their "
                                         "lineage",
                        epilog=epilog(ExitCode.PASSED, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.NO_BASELINE, ExitCode.INTERRUPTED,
                                      meanings={ExitCode.PASSED: "done", ExitCode.FAILED: "make: the bless was "
                                                "refused (backtest or evidence gate)", ExitCode.NO_BASELINE:
                                                "status: a case has no baseline it may use here"}))
    bl = bl.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    st = bl.add_parser("status", help="per case, the golden and calibration record it would use on this host, "
                                      "made where and when: matches, falls back (by which rule) or missing",
                       epilog=_exits("every case has a baseline it may use here (own or by a stated fallback)",
                                     ExitCode.NO_BASELINE))
    st.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    st.add_argument("--case", action="append", dest="cases", help="this case only (repeatable)")
    st.add_argument("--json", action="store_true", help="print the rows as JSON")
    st.set_defaults(func=_baseline_status)

    mk = bl.add_parser("make", help="make the baselines this runtime lacks (exact goldens, calibration records, "
                                    "power records), backtest them, check them with a gate run of every case, and "
                                    "only then place them with their lineage",
                       epilog=_exits("made and blessed, or nothing to make", ExitCode.FAILED))
    mk.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    mk.add_argument("--case", action="append", dest="cases", help="this case only (repeatable)")
    mk.add_argument("--reason", required=True, help="why the baselines are made (kept in their lineage)")
    mk.add_argument("--again", action="store_true",
                    help="also remake the baselines this runtime has (the new ones supersede them)")
    mk.add_argument("--archive", action="append", default=[],
                    help="a folder of run directories to backtest over (repeatable; default: runs/)")
    mk.add_argument("--accept-flips", metavar="REASON",
                    help="bless even though known-good runs would now fail (listed), for this reason")
    mk.add_argument("--accept-looser", metavar="REASON",
                    help="bless a record whose bounds are looser than the one it supersedes beyond that one's margin, "
                         "for this reason (kept in its lineage)")
    mk.add_argument("--skip-unreadable", action="store_true",
                    help="backtest without the archived runs that cannot be read (each is named)")
    mk.add_argument("--jobs", type=_jobs, help="cases of the evidence gate run side by side")
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

    lg = bl.add_parser("log", help="each case's chain of baselines, oldest first: why, by which command, "
                                   "the backtest, how the bounds moved", epilog=_exits("printed"))
    lg.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    lg.add_argument("--case", action="append", dest="cases", help="this case only (repeatable)")
    lg.add_argument("--json", action="store_true", help="print the chains as JSON")
    lg.set_defaults(func=_baseline_log)

    vf = bl.add_parser("verify", help="every lineage entry's claims re-derived from the files: its file's digest, "
                                      "a record's bounds, how far they moved from its parent's",
                       epilog=_exits("every entry verified"))
    vf.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    vf.add_argument("--archive", action="append", default=[],
                    help="a folder of run directories to backtest each record over again (repeatable): no known-bad "
                         "run may pass under it, no known-good run fail unless its entry accepted the flips")
    vf.set_defaults(func=_baseline_verify)

    ad = bl.add_parser("adopt", help="write a first lineage entry for every listed baseline that has none",
                       epilog=_exits("written (or every entry was there)"))
    ad.add_argument("descriptor", nargs="?", default=str(paths.EMBEDDED_DESCRIPTOR), help=desc_help)
    ad.add_argument("--reason", help="the reason the entries keep (default: made before baselines kept a lineage)")
    ad.set_defaults(func=_baseline_adopt)

    mark = bl.add_parser("mark-bad", help="mark a run directory as known-bad: no new baseline may pass it",
                         epilog=_exits("marked"))
    mark.add_argument("run", help="the run directory")
    mark.add_argument("--reason", required=True, help="why the run is bad (a known fault, a broken build)")
    mark.set_defaults(func=_baseline_mark_bad)


def _baseline_status(args) -> int:
    from kit.descriptor.baselines import refuse_unverified
    from kit.descriptor.standing import MISSING, plan_rows, table_markdown
    from kit.descriptor.load import load_descriptor
    from kit.descriptor.plan import resolve

    loaded = load_descriptor(args.descriptor)
    refuse_unverified(loaded)  # the rows date and word each baseline by its lineage
    rows = plan_rows(resolve(loaded, args.cases))
    print(json.dumps([r.to_dict() for r in rows], indent=2) if args.json else table_markdown(rows))
    return ExitCode.NO_BASELINE if any(r.standing == MISSING for r in rows) else ExitCode.PASSED


def _baseline_make(args) -> int:
    from kit.baselines.make import make_baselines

    # The command as typed, less the verbosity flags (they change no baseline).
    typed = ["parity-kit", *(a for a in sys.argv[1:] if a not in ("-q", "--quiet", "-v", "--verbose"))]
    outcome = make_baselines(args.descriptor, args.cases, args.reason, args.again, args.accept_flips, args.archive,
                             args.skip_unreadable, args.jobs, args.out, typed if "baseline" in typed else None,
                             args.resume, args.accept_looser, args.power_families, args.no_power)
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
    from kit.baselines.verify import backtest_problems
    from kit.descriptor.baselines import lineage_problems
    from kit.descriptor.load import load_descriptor
    from kit.descriptor.plan import outline

    loaded = load_descriptor(args.descriptor)
    entries, problems = lineage_problems(loaded)
    stated = outline(loaded)
    if args.archive and stated.baseline_folders is not None:
        problems += backtest_problems(stated.lineage, stated.baseline_folders["lineage"], args.archive)
    for line in problems:
        print(f"refused: {line}")
    if problems:
        return ExitCode.BAD_INPUT
    again = f"; each record backtested again over {', '.join(args.archive)}" if args.archive else ""
    print(f"verified: {entries} lineage entries (each file's digest; each record's bounds, and how far they moved "
          f"from its parent's, re-derived from its samples{again})")
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


def _check(args) -> int:
    from kit.gate.check import run_check

    lines = run_check(args.descriptor, args.cases, args.release, args.executor)
    if output.shows(output.NORMAL):
        print("\n".join(lines))
    print("ok")
    return ExitCode.PASSED


def _schema(args) -> int:
    from kit.descriptor.json_schema import descriptor_json_schema

    print(json.dumps(descriptor_json_schema(), indent=2))
    return ExitCode.PASSED


def _backends(args) -> int:
    from kit.backends import registry
    from kit.core.records import paths
    from kit.gate.preflight import installed_kernels

    kernels = installed_kernels()
    for row in registry.describe():
        goldens = "makes goldens" if row["makes_goldens"] else "makes no goldens"
        if row["kernel"] != paths.MAIN_KERNEL:  # its own environment: what counts is whether its kernel is there
            ready = row["kernel"] in kernels
            here = "its kernel is installed" if ready else f"its kernel is missing; install with: {row['install']}"
        else:
            here = "installed here" if row["installed"] else f"not installed here; install with: {row['install']}"
        print(f"{row['name']}: {row['summary']}")
        print(f"  kernel {row['kernel']}, notebook {row['notebook']}, {goldens}; {here}")
    return ExitCode.PASSED


def _digest(args) -> int:
    from kit.core.model.modeldigest import model_digest

    print(model_digest(args.model))
    return 0


def _kernels(args) -> int:
    from kit.descriptor.load import load_descriptor
    from kit.descriptor.plan import outline
    from kit.gate.preflight import kernel_rows

    rows = kernel_rows([outline(load_descriptor(d)) for d in args.descriptors or [paths.EMBEDDED_DESCRIPTOR]])
    for row in rows:
        state = f"installed ({row['location']})" if row["installed"] else f"MISSING: {row['hint']}"
        print(f"{row['kernel']}: {state}; cases: {', '.join(row['cases'])}")
    return 0 if all(r["installed"] for r in rows) else 1


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
                     command=_command("calibrate"))
    for c in done:
        print(c.path if c.path else f"{c.case}: error: {c.error}")
    return ExitCode.INCOMPLETE if any(c.error for c in done) else ExitCode.PASSED


def _power(args) -> int:
    from kit.faults.power import measure, merge

    if args.merge:
        if len(args.cases or []) != 1:
            raise BadInput("power --merge: name the case the records are of, once (--case NAME)")
        print(merge(args.descriptor, args.cases[0], args.merge, to=args.to, command=_command("power")).path)
        return ExitCode.PASSED
    done = measure(args.descriptor, args.cases, args.families, out=args.out, resume=args.resume, to=args.to,
                   float32_case=args.float32_case, command=_command("power"), steps_down=args.steps_down,
                   refine=args.refine, reuse=args.reuse)
    for c in done:
        print(c.path if c.path else f"{c.case}: error: {c.error}")
    return ExitCode.INCOMPLETE if any(c.error for c in done) else ExitCode.PASSED


def _localize(args) -> int:
    from kit.localize.run import localize_case

    run = localize_case(args.descriptor, args.case, args.prompts, model=args.model, out=args.out,
                        command=_command("localize"))
    print(run.verdict)
    print(run.out)
    if run.notebook_error:
        print(f"parity-kit: {run.notebook_error}", file=sys.stderr)
        return ExitCode.INCOMPLETE
    return ExitCode.PASSED


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


def _gate(args) -> int:
    from kit.gate.run import run_gate

    if args.resume and args.out and Path(args.out).resolve() != Path(args.resume).resolve():
        raise BadInput(f"--out {args.out} and --resume {args.resume}: a resumed run writes into the directory "
                       "it resumes")
    run = run_gate(args.descriptor, out=args.out, jobs=args.jobs, only=args.cases, command=_command("gate"),
                   summary=not args.no_summary, release=args.release, executor=args.executor, resume=args.resume,
                   junit=args.junit, publish=_publish_target(args.publish), infra_retries=args.infra_retries)
    print(run.run_dir)  # stdout carries only the run directory, for scripts: RUN=$(parity-kit gate ...)
    return GATE_EXIT_CODES[run.verdict]


def _verify(args) -> int:
    from kit.gate.verify import verify

    found = verify(args.run, args.descriptor, args.root)
    print("\n".join(found.lines()))
    return ExitCode.PASSED if found.ok else ExitCode.FAILED


def _report(args) -> int:
    from kit.gate import report

    run_dir = Path(args.run_dir)
    if not (args.markdown or args.attach or args.summary):
        raise BadInput("report: say what to write: --markdown, --attach DIR, --summary, or several")
    kind = rundir.kind_of(run_dir)
    other = kind if kind in ("localize", "bisect") else None
    if other:  # a localize or bisect directory: Markdown of its own, no zip (the folder is the attachment)
        if args.attach or args.summary:
            raise BadInput(f"{args.run_dir} is a {other} directory: --attach and --summary are for gate runs and "
                           "controls; attach the folder itself")
        from kit.bisect import summary as bisect_view
        from kit.views import localize as localize_view

        view = localize_view if other == "localize" else bisect_view
        sys.stdout.write(view.markdown_report(run_dir))
        return 0
    refresh = args.summary and kind == "refresh"  # its summary only: no case table, no zip
    if not (kind in ("gate", "control") or refresh):
        raise BadInput(f"{args.run_dir} is not a gate run, control, localize or bisect directory (no manifest.json, "
                       "control.json, localize.json or bisect.json)")
    if refresh and (args.markdown or args.attach):
        raise BadInput(f"{args.run_dir} is a refresh directory: --markdown and --attach are for its control "
                       f"({paths.display(run_dir / 'control')})")
    if args.attach:
        paths.check_dir_target(args.attach, "--attach")  # before anything is written, not after
    built = _build_summary(run_dir) if args.summary else None
    if args.attach:
        report.attachable(run_dir)  # so is a run the zip would refuse (no summary, a link leading out)
        report.attach_target(run_dir, args.attach)  # and a zip already there
    if args.markdown:
        sys.stdout.write(report.markdown_report(run_dir))
    if built is not None and built.html is not None:
        print(built.html, file=sys.stderr if args.markdown else sys.stdout)
    if args.attach:
        print(report.attach_zip(run_dir, args.attach), file=sys.stderr if args.markdown else sys.stdout)
    return ExitCode.INCOMPLETE if built is not None and built.error else ExitCode.PASSED


def _build_summary(run_dir: Path):
    """The summary of a gate run, control or refresh directory built again, as the gate builds it (a line says
    whatever failed)."""
    if rundir.kind_of(run_dir) == "control":
        from kit.control.run import build_notebooks

        return build_notebooks(run_dir)
    from kit.gate.session import build_summary

    return build_summary(run_dir)


def _lab(args) -> int:
    import os
    import shutil

    from kit.run.labcheckpoints import lab_options

    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent)) or shutil.which("jupyter")
    if jupyter is None:
        raise BadInput("jupyter is not installed in this environment; run `make env` first")
    root = paths.CHECKOUT or Path.cwd()
    os.environ[paths.LAB_ROOT_ENV] = str(root.resolve())  # its kernels' runs/ (kit.core.records.paths.runs_root)
    cmd = [jupyter, "lab", f"--ServerApp.root_dir={root}", "--ip=127.0.0.1", f"--port={args.port}",
           *lab_options(root)]  # checkpoints in the user's cache, never in a run directory
    if args.run_dir:
        run = Path(args.run_dir).resolve()
        if not run.is_dir():
            raise BadInput(f"{args.run_dir} is not a directory")
        try:
            rel = run.relative_to(root)
        except ValueError:
            raise BadInput(f"{args.run_dir} is outside the project; JupyterLab serves only {root}") from None
        target = rel / rundir.SUMMARY_NOTEBOOK if (run / rundir.SUMMARY_NOTEBOOK).is_file() else rel
        cmd.append(f"--LabApp.default_url=/lab/tree/{target.as_posix()}")
    if args.no_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI runners often run as root
    cmd += args.passthrough
    os.execv(cmd[0], cmd)


def _control(args) -> int:
    from kit.control.run import run_control

    run = run_control(args.descriptor, out=args.out, jobs=args.jobs, only=args.cases, current=args.current,
                      candidate=args.candidate, command=_command("control"), summary=not args.no_summary,
                      junit=args.junit, publish=_publish_target(args.publish))
    print(run.control_dir)
    return run.diagnosis.exit_code


def _publish_target(given: str | None) -> str | None:
    from kit.history.publish import default_target

    return default_target(given)


def _publish(args) -> int:
    from kit.history.publish import PUBLISH_ENV, publish_run

    url = _publish_target(args.url)
    if not url:
        raise BadInput(f"publish: say where: a URL, or ${PUBLISH_ENV}")
    done = publish_run(args.run_dir, url)
    if done.error:
        raise BadInput(done.error)
    print(done.url)
    return ExitCode.PASSED


def _refresh(args) -> int:
    import shlex

    from kit.refresh.run import run_refresh

    run = run_refresh(args.descriptor, args.fork_repo, args.upstream_ref, base=args.base, tip=args.tip,
                      fork=args.fork, out=args.out, store=args.releases, current=args.current,
                      backend=args.backend, only=args.cases, qualify_case=args.qualify_case,
                      qualify_bucket=args.qualify_bucket,
                      build_command=shlex.split(args.build_command) if args.build_command else None,
                      branch=args.branch, jobs=args.jobs, command=_command("refresh"))
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
        run_dir, record = bisect.start(args.case, refresh_dir=args.refresh_dir, descriptor=args.descriptor,
                                       fork_repo=args.fork_repo, base=args.base, tip=args.tip, fork=args.fork,
                                       store=args.releases, current=args.current, backend=args.backend,
                                       build_command=shlex.split(args.build_command) if args.build_command else None,
                                       out=args.out, command=_command("bisect"), upstream=args.upstream)
    run = bisect.run_bisect(run_dir, record, args.max_steps)
    print(run.run_dir)
    return run.exit_code


def _command(name: str) -> list[str] | None:
    """The command line as a user would retype it, for the reproduce line of the evidence."""
    return ["parity-kit", name, *sys.argv[2:]] if sys.argv[1:2] == [name] else None


def _fixture_make(args) -> int:
    from kit.core.records.fixture import load_fixture, make_fixture, read_prompts

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
    from kit.core.records.fixture import verify_fixture

    fixture = verify_fixture(args.fixture, args.model)
    print(f"ok: {args.fixture}: sha256 {fixture.sha256}, {len(fixture.prompts)} prompts, tokenizer {fixture.tokenizer}")
    _print_buckets(fixture)
    return 0


def _fixture_report(args) -> int:
    from kit.core.records.fixture import verify_fixture
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


def _golden_make(args) -> int:
    from kit.goldens.make import make_golden

    print(make_golden(args.out, args.model, args.fixture, args.kind, args.top_k, ["parity-kit", *sys.argv[1:]],
                      args.dtype, args.attn_implementation, backend=args.backend, checkpoint=args.checkpoint,
                      device=args.device, batch_size=args.batch_size, decode=args.decode,
                      cpu_kernels=args.cpu_kernels))
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


if __name__ == "__main__":
    sys.exit(main())
