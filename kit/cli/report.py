"""A finished run for people: `report` (Markdown, a zip, its summary rebuilt) and `lab` (JupyterLab on it)."""

from __future__ import annotations

import sys
from pathlib import Path

from kit.cli.common import exits
from kit.core.errors import BadInput
from kit.core.exitcodes import epilog, ExitCode
from kit.core.records import paths, rundir


def _add_report(sub) -> None:
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


def _add_lab(sub) -> None:
    lab = sub.add_parser("lab", help="open JupyterLab on the project, or on a run's summary, with its kernels",
                         description="Arguments after a bare `--` go to `jupyter lab` as they are.",
                         epilog=exits("JupyterLab ended (the command becomes `jupyter lab`: its own codes)"))
    lab.add_argument("run_dir", nargs="?", help="a run or control directory to open (default: the project)")
    lab.add_argument("--port", type=int, default=8888, help="the port JupyterLab listens on (default 8888)")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.set_defaults(func=_lab)


def _report(args) -> int:
    from kit.gate import report

    run_dir = Path(args.run_dir)
    if not (args.markdown or args.attach or args.summary):
        raise BadInput("report: say what to write: --markdown, --attach DIR, --summary, or several")
    kind = rundir.run_kind_of(run_dir)
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
    if rundir.run_kind_of(run_dir) == "control":
        from kit.control.run import build_notebooks

        return build_notebooks(run_dir)
    from kit.gate.session import summary_or_line

    return summary_or_line(run_dir)


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


# The commands this module adds to the parser, by name (kit.cli.entry adds them in the order --help lists them).
COMMANDS = {"report": _add_report, "lab": _add_lab}
