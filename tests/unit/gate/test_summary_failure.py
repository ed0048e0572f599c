"""Building the summary cannot change the verdict: a notebook stack missing a piece (nbconvert whose sanitizer lacks
tinycss2 raises NameError on import), a plot that raises, or a notebook that cannot start is one line naming what
failed and the command that builds the summary later, and the exit code stays the verdict's, never 70. The case
executions and the summary's kernel are faked: what is tested is what the commands do with the failure."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import nbformat
import pytest

from kit.cli import main
from kit.control.run import build_notebooks
from kit.core.records import rundir
from kit.core.exitcodes import ExitCode
from kit.core.records.records import CaseResult, PromptScore
from kit.core.records.results import save_case_result
from kit.gate import executor
from kit.history.command import gather, render
from kit.run import notebook
from kit.run.notebook import NotebookOutcome
from support import write_descriptor
from support.history import series
from support.rundirs import control_dir, gate_run

pytestmark = pytest.mark.unit

NAME_ERROR = "name 'ALLOWED_STYLES' is not defined"
BOUND = "p1: max probability error 0.2 > bound 0.075 (bucket 8)"
FAILED = {"status": "failed", "failures": [BOUND],
          "prompts": [PromptScore("p1", 8, 10, False, 0.075, 0.2, 0.2, 0.1, False, 5, 0.5, 9, 0.5, 0.031,
                                  failures=[BOUND])]}


def fake_case(monkeypatch, outcome: dict) -> None:
    """Every case ends with ``outcome``, leaving the files a case leaves."""
    def execute_case(spec, cases_dir, expected=None, gpus=(), clock_from=None):
        (cases_dir / f"{spec.name}.ipynb").write_text("{}")
        result = CaseResult(spec.name, spec.backend, **outcome)
        save_case_result(result, cases_dir / f"{spec.name}.json")
        return result

    monkeypatch.setattr(executor, "execute_case", execute_case)


def fake_kernel(monkeypatch, error: str | None = None) -> None:
    """A notebook 'executed' at once: an empty one written where papermill would write it, ``error`` its failed
    cell (a plot that raised)."""
    def run_notebook(source, output, parameters, kernel_name, timeout_s, log_path, *rest, **kw):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("a summary")]), str(output))
        return NotebookOutcome(error, None, None)

    monkeypatch.setattr(notebook, "run_notebook", run_notebook)


def break_nbconvert(monkeypatch) -> None:
    """nbconvert as a node without tinycss2 has it: `from nbconvert import HTMLExporter` raises NameError."""
    broken = types.ModuleType("nbconvert")

    def __getattr__(name: str):
        raise NameError(NAME_ERROR)

    broken.__getattr__ = __getattr__  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "nbconvert", broken)


def gate(tmp_path: Path, embedded, capsys) -> tuple[int, Path, list[str]]:
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    run_dir = tmp_path / "run"
    code = main(["gate", str(desc), "--out", str(run_dir), "--jobs", "1", "--junit", str(tmp_path / "junit.xml")])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return code, run_dir, [line for line in err.splitlines() if "summary not built in full" in line]


@pytest.mark.parametrize("outcome, verdict, code", [({"status": "passed"}, "passed", ExitCode.PASSED),
                                                    (FAILED, "failed", ExitCode.FAILED)])
def test_an_exporter_that_cannot_import_leaves_the_verdict_and_its_exit_code(tmp_path, embedded, monkeypatch,
                                                                            capsys, outcome, verdict, code):
    fake_case(monkeypatch, outcome)
    fake_kernel(monkeypatch)
    break_nbconvert(monkeypatch)
    exit_code, run_dir, said = gate(tmp_path, embedded, capsys)
    assert exit_code == code
    [line] = said
    assert f"nbconvert could not render summary.ipynb to HTML: NameError: {NAME_ERROR}" in line
    assert f"parity-kit report {run_dir} --summary" in line
    assert json.loads((run_dir / rundir.RESULT).read_text())["verdict"] == verdict
    assert (run_dir / rundir.EVIDENCE).is_file() and (tmp_path / "junit.xml").is_file()
    assert (run_dir / rundir.SUMMARY_NOTEBOOK).is_file() and not (run_dir / rundir.SUMMARY_HTML).exists()

    # Once nbconvert is mended, the command the line names builds the page.
    monkeypatch.delitem(sys.modules, "nbconvert")
    assert main(["report", str(run_dir), "--summary"]) == ExitCode.PASSED
    assert (run_dir / rundir.SUMMARY_HTML).is_file()
    assert capsys.readouterr().out.strip().endswith(rundir.SUMMARY_HTML)


def test_a_plot_that_raises_is_one_line_and_the_page_still_shows_where(tmp_path, embedded, monkeypatch, capsys):
    fake_case(monkeypatch, {"status": "passed"})
    fake_kernel(monkeypatch, "cell 4 raised ValueError: x and y must have same first dimension")
    exit_code, run_dir, [line] = gate(tmp_path, embedded, capsys)
    assert exit_code == ExitCode.PASSED
    assert "summary.ipynb failed: cell 4 raised ValueError: x and y must have same first dimension" in line
    assert (run_dir / rundir.SUMMARY_HTML).is_file()


def test_a_notebook_stack_that_cannot_start_is_one_line(tmp_path, embedded, monkeypatch, capsys):
    def run_notebook(*args, **kw):
        raise ImportError("cannot import name 'execute_notebook' from 'papermill'")

    fake_case(monkeypatch, {"status": "passed"})
    monkeypatch.setattr(notebook, "run_notebook", run_notebook)
    exit_code, run_dir, [line] = gate(tmp_path, embedded, capsys)
    assert exit_code == ExitCode.PASSED
    assert "summary.ipynb could not run: ImportError: cannot import name 'execute_notebook'" in line
    assert json.loads((run_dir / rundir.RESULT).read_text())["verdict"] == "passed"


def test_report_summary_says_what_failed_and_exits_2(tmp_path, monkeypatch, capsys):
    run_dir = gate_run(tmp_path / "run", summary=False)
    fake_kernel(monkeypatch)
    break_nbconvert(monkeypatch)
    assert main(["report", str(run_dir), "--summary"]) == ExitCode.INCOMPLETE
    assert f"NameError: {NAME_ERROR}" in capsys.readouterr().err


def test_a_control_keeps_its_diagnosis(tmp_path, monkeypatch, caplog):
    folder = control_dir(tmp_path / "control")
    fake_kernel(monkeypatch)
    break_nbconvert(monkeypatch)
    built = build_notebooks(folder)
    assert built.html is None and f"NameError: {NAME_ERROR}" in (built.error or "")
    assert f"parity-kit report {folder} --summary" in caplog.text
    assert (folder / rundir.DIAGNOSIS).is_file() and (folder / rundir.CONTROL_NOTEBOOK).is_file()


def test_the_history_page_says_what_failed(tmp_path, monkeypatch):
    series(tmp_path / "store", [0.010, 0.012])
    fake_kernel(monkeypatch)
    break_nbconvert(monkeypatch)
    found = render(gather(str(tmp_path / "store")), tmp_path / "history")
    assert f"NameError: {NAME_ERROR}" in (found.notebook_error or "")
    assert (tmp_path / "history" / "history.json").is_file()


def test_a_template_nbconvert_cannot_find_is_one_line_naming_every_folder_it_searched(tmp_path, monkeypatch):
    page = tmp_path / "page.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), page)
    exporter = notebook.html_exporter
    monkeypatch.setattr(notebook, "html_exporter", lambda **options: exporter(template_name="absent", **options))
    html, line = notebook.try_render_html(page)
    assert html is None and "\n" not in line and "\t" not in line
    assert line.startswith("nbconvert could not render page.ipynb to HTML: ValueError: No template sub-directory "
                           "with name 'absent' found in the following paths: ")
    # Where it looked is what says why on a node: the interpreter's own data folder among them.
    assert f" {Path(sys.prefix) / 'share' / 'jupyter'}" in line


def attach_says(run_dir: Path, out: Path, capsys) -> str:
    assert main(["report", str(run_dir), "--attach", str(out)]) == ExitCode.BAD_INPUT
    [line] = capsys.readouterr().err.splitlines()
    return line.removeprefix("parity-kit: bad input: ")


def test_a_gate_stopped_while_its_summary_is_built_is_said_so_with_the_command_that_builds_it(tmp_path, embedded,
                                                                                            monkeypatch, capsys):
    """`report --attach` asked "was it run with --no-summary?" of a run stopped during its summary."""
    def stopped(*args, **kw):
        raise KeyboardInterrupt  # Ctrl-C (or the CI's SIGTERM) while the summary's kernel runs

    fake_case(monkeypatch, {"status": "passed"})
    monkeypatch.setattr(notebook, "run_notebook", stopped)
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    run_dir = tmp_path / "run"
    assert main(["gate", str(desc), "--out", str(run_dir), "--jobs", "1"]) == 130  # as Ctrl-C ends a command
    assert capsys.readouterr().err.endswith("parity-kit: interrupted\n")
    assert attach_says(run_dir, tmp_path / "zips", capsys) == (
        f"{run_dir} has no summary.html (it was stopped while its summary was being built): "
        f"`parity-kit report {run_dir} --summary` builds it")
    fake_kernel(monkeypatch)
    assert main(["report", str(run_dir), "--summary", "--attach", str(tmp_path / "zips")]) == ExitCode.PASSED
    assert not (run_dir / rundir.SUMMARY_PENDING).exists() and (tmp_path / "zips" / "run.zip").is_file()


def test_a_run_without_a_summary_says_why(tmp_path, monkeypatch, capsys):
    left_out = gate_run(tmp_path / "left-out", summary=False)
    assert "(it was run with --no-summary)" in attach_says(left_out, tmp_path / "zips", capsys)
    stopped = gate_run(tmp_path / "stopped", summary=False)
    from kit.gate import report
    report.owe_summary(stopped, "it was stopped before its summary was built")
    assert "(it was stopped before its summary was built)" in attach_says(stopped, tmp_path / "zips", capsys)
    failed = gate_run(tmp_path / "failed", summary=False)
    nbformat.write(nbformat.v4.new_notebook(), str(failed / rundir.SUMMARY_NOTEBOOK))
    assert "(its summary failed before its page was rendered)" in attach_says(failed, tmp_path / "zips", capsys)
    for name, plant in (("zero", lambda p: p.symlink_to("/dev/zero")), ("folder", lambda p: p.mkdir()),
                        ("escape", lambda p: p.write_bytes(b"\x1b[2J\xff stopped\n"))):
        planted = gate_run(tmp_path / name, summary=False)
        plant(planted / rundir.SUMMARY_PENDING)  # read, it hung on /dev/zero: now never followed, never past a line
        said = attach_says(planted, tmp_path / "zips", capsys)
        assert ("(\\x1b[2J\ufffd stopped)" if name == "escape" else "(it was stopped before its summary was built)") \
            in said
