"""Reports for CI tools and issues, from records built by hand (no kernels): text from the world
stays text in the evidence Markdown, JUnit stays parseable XML whatever the logs hold, an
unwritable --junit is refused before anything runs, and the Markdown report links the figures."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile

import pytest

from kit.cli import main
from kit.core.records import contract, rundir
from kit.core.errors import BadInput
from kit.core.records.records import CaseResult, Observation, PromptScore, Status
from kit.core.records.results import save_case_result
from kit.core.verdict.scoring import score_prompt
from kit.core.verdict import failures_of
from kit.gate import report
from kit.gate.junit import junit_xml, write_junit_from_disk, xml_text
from kit.gate.session import case_line

ESC = "\x1b"
ZWSP = "\u200b"


def prompt(id_: str, passed: bool, err: float, failures: list[str] | None = None) -> PromptScore:
    return PromptScore(id=id_, bucket=256, n_tokens=200, passed=passed, bound=0.075, max_probability_error=err,
                       top_probability_l1_error=err, kl_shared=0.0, first_rank_agreement=True, golden_top_token=5,
                       golden_top_probability=0.6, backend_top_token=5, backend_top_probability=0.6, winner_gap=0.0,
                       failures=failures or [])


def failed_case(case: str, prompt_id: str, reason: str) -> CaseResult:
    return CaseResult(case=case, backend="hf", status=Status.FAILED, bound=0.075, golden_kind="semantic",
                      prompts=[prompt(prompt_id, False, 0.5, [f"{prompt_id}: {reason}"])],
                      failures=[f"{prompt_id}: {reason}"])


MANIFEST = {"name": "tiny", "fixture_sha256": "ab" * 32, "model_digest": "cd" * 32, "kit_version": "0.3.0",
            "goldens": {"semantic": {"sha256": "ef" * 32}}, "command": ["parity-kit", "gate", "d.toml"]}


@pytest.mark.parametrize("text, prose, code", [
    ("@octocat please look", f"@{ZWSP}octocat please look", "`@octocat please look`"),
    ("see [docs](https://evil.example) ![x](y)", "see \\[docs\\](https://evil.example) !\\[x\\](y)",
     "`see [docs](https://evil.example) ![x](y)`"),
    ("<script>alert(1)</script>", "\\<script>alert(1)\\</script>", "`<script>alert(1)</script>`"),
    ("a | b\nc\r\nd", "a \\| b c d", "a \\| b c d"),  # a code span would split a table cell at |
    ("fix #12 for @org/team", f"fix #{ZWSP}12 for @{ZWSP}org/team", "`fix #12 for @org/team`"),
    ("it`s", "it\\`s", "``it`s``"),
    ("`edge`", "\\`edge\\`", "`` `edge` ``"),
    ("*bold* _it_ ~~s~~ &#64;x tool_atlas_03", f"\\*bold\\* \\_it\\_ \\~\\~s\\~\\~ \\&#{ZWSP}64;x tool_atlas_03",
     "`*bold* _it_ ~~s~~ &#64;x tool_atlas_03`"),
    ("tool-atlas-03", "tool-atlas-03", "`tool-atlas-03`"),
])
def test_md_sets_world_text_as_text(text, prose, code):
    assert report.md(text) == prose
    assert report.md(text, code=True) == code


def test_evidence_escapes_ids_messages_and_names():
    case = "evil|case"
    results = {
        case: failed_case(case, "@octocat\n[x](y)", "max probability error 0.5 > bound 0.075 <img src=x>"),
        "dies": CaseResult(case="dies", backend="hf", status=Status.ERROR, error="boom @admin\n| broken | row",
                           notes=["see ![i](u)"]),
    }
    manifest = {**MANIFEST, "cases": [case, "dies", "gone`x"], "reused": {}}
    text = report.evidence_markdown(manifest, "failed", {Status.FAILED: 1, Status.ERROR: 1, "missing": 1}, 3.0, results)
    lines = text.splitlines()
    # First what to do next (escaped alike), then each case.
    assert lines[2:6] == ["Next:", "- evil\\|case: **numeric**: parity-kit control DESCRIPTOR --case 'evil\\|case'",
                          "- `dies`: **case error**",
                          "- ``gone`x``: **missing**: `parity-kit gate DESCRIPTOR --resume RUN_DIR`"]
    assert lines[7:11] == [
        "- evil\\|case (hf): **failed** on 1 of 1 prompts; worst `@octocat [x](y)` (bucket 256): "
        "max probability error 0.5 > bound 0.075 \\<img src=x>",
        f"- `dies` (hf): **error**: boom @{ZWSP}admin \\| broken \\| row",
        "  - note: see !\\[i\\](u)",
        "- ``gone`x``: missing (no result was recorded)",
    ]
    assert "Reproduce: `parity-kit gate d.toml`" in text


def test_case_table_rows_keep_their_nine_cells():
    results = {"a|b": failed_case("a|b", "p|1\nnext", "bad"), "ok": CaseResult("ok", "hf", Status.PASSED)}
    view = type("View", (), {"expected": ["a|b", "ok", "lost|case"], "results": results})()
    rows = report.compact_case_table(view).splitlines()[2:]
    assert [len(re.split(r"(?<!\\)\|", row)) - 2 for row in rows] == [9, 9, 9]
    assert rows[0] == ("| a\\|b | hf | ❌ failed | 0.5 | 0.075, hand-set | 6.67 | not run (no calibration) | 1/1 "
                       "| p\\|1 next |")
    assert rows[2] == "| lost\\|case | | missing | | | | | | |"


def test_control_reason_keeps_its_code_and_escapes_the_names():
    assert report._md_backticked("today's pin `cur|rent` fails `hf-bf16` for @bob") == \
        f"today's pin cur\\|rent fails `hf-bf16` for @{ZWSP}bob"


def test_junit_parses_with_color_codes_and_forbidden_characters():
    colored = f"{ESC}[1;31mmax probability error 0.5{ESC}[0m > bound 0.075"
    results = {
        "hf-bf16": failed_case("hf-bf16", "p-1", colored),
        "dies": CaseResult(case="dies", backend="hf", status=Status.ERROR, error=f"kernel died {ESC}[31m!{ESC}[0m",
                           log_tail=f"Traceback {ESC}[0;31mValueError{ESC}[0m bell\x07 lone\ud800 end\uffff {ESC}x"),
    }
    root = ET.fromstring(junit_xml([(f"tiny{ESC}", ["hf-bf16", "dies"], results, 1.0)]))
    suite = root.find("testsuite")
    assert suite.get("name") == "tiny\\x1b" and suite.get("failures") == "1" and suite.get("errors") == "1"
    failure = suite.find("testcase[@name='hf-bf16']/failure")
    assert failure.get("message") == "hf-bf16: p-1: max probability error 0.5 > bound 0.075" == failure.text
    error = suite.find("testcase[@name='dies']/error")
    assert error.get("message") == "dies: error: kernel died !"
    assert error.text == "Traceback ValueError bell\\x07 lone\\ud800 end\\uffff \\x1bx"


def test_xml_text_keeps_what_xml_allows():
    assert xml_text("tab\tnew\nline\r é 中 \U0001f600") == "tab\tnew\nline\r é 中 \U0001f600"
    assert xml_text("\x00\x0b\x0c\x1f\ufffe") == "\\x00\\x0b\\x0c\\x1f\\ufffe"


def fake_run(run_dir, cases, results):
    (run_dir / rundir.CASES).mkdir(parents=True)
    (run_dir / rundir.MANIFEST).write_text(json.dumps({**MANIFEST, "cases": cases, "release": {"name": "next"}}))
    for r in results:
        (run_dir / rundir.CASES / f"{r.case}.json").write_text(json.dumps(r.to_dict()))


def test_interrupted_run_still_gets_its_junit(tmp_path):
    import time

    began = time.time()
    fake_run(tmp_path / "run", ["done", "cut"], [CaseResult("done", "hf", Status.PASSED)])
    out = write_junit_from_disk(tmp_path / "junit.xml", [tmp_path / "run", None], began, per_release=True)
    suite = ET.parse(out).getroot().find("testsuite")
    assert suite.get("name") == "tiny.next" and suite.get("tests") == "2" and suite.get("errors") == "1"
    assert suite.find("testcase[@name='cut']/error").get("message") == "cut: missing (no result was recorded)"
    assert suite.find("testcase[@name='done']/error") is None
    # A run directory written before this command began is an earlier run's: never reported as this one.
    assert write_junit_from_disk(tmp_path / "stale.xml", [tmp_path / "run"], began + 60) is None
    assert not (tmp_path / "stale.xml").exists()


@pytest.mark.parametrize("command", ["gate", "control"])
@pytest.mark.parametrize("where, message", [
    ("folder", "--junit {p} is a folder; give the path of the XML file to write"),
    ("nowhere/junit.xml", "--junit {p}: folder {d} does not exist"),
])
def test_unwritable_junit_path_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch, command, where,
                                                                message):
    monkeypatch.setenv(contract.MAIN_PYTHON_ENV, sys.executable)
    (tmp_path / "folder").mkdir()
    path = tmp_path / where
    assert main([command, "--out", str(tmp_path / "out"), "--junit", str(path)]) == 3
    err = capsys.readouterr().err
    assert err == f"parity-kit: bad input: {message.format(p=path, d=path.parent)}\n"
    assert not (tmp_path / "out").exists() and not (tmp_path / "nowhere").exists()
    assert list((tmp_path / "folder").iterdir()) == []


@pytest.mark.parametrize("command", ["gate", "control"])
def test_junit_never_writes_over_a_file_the_kit_did_not_write(tmp_path, capsys, monkeypatch, command):
    from kit.gate.junit import check_junit_path, write_junit

    monkeypatch.setenv(contract.MAIN_PYTHON_ENV, sys.executable)
    mine = tmp_path / "mine.toml"  # the descriptor being run, a run's own result: not the kit's report
    mine.write_text('name = "mine"\n')
    assert main([command, "--out", str(tmp_path / "out"), "--junit", str(mine)]) == 3
    assert capsys.readouterr().err == (f"parity-kit: bad input: --junit {mine}: the file there is no JUnit report of "
                                       "parity-kit; a file the kit did not write is never written over (give a new "
                                       "path, or remove it)\n")
    assert mine.read_text() == 'name = "mine"\n' and not (tmp_path / "out").exists()
    report = write_junit(tmp_path / "junit.xml", [("tiny", ["ok"], {"ok": CaseResult("ok", "hf", Status.PASSED)}, 1.0)])
    assert check_junit_path(report) == report  # the kit's own report of an earlier run: the next one replaces it
    (tmp_path / "link.xml").symlink_to(report)
    with pytest.raises(BadInput, match="no JUnit report of parity-kit"):
        check_junit_path(tmp_path / "link.xml")


def test_markdown_report_links_figures_and_zip_holds_them(tmp_path):
    run = tmp_path / "run"
    fake_run(run, ["ok"], [CaseResult("ok", "hf", Status.PASSED)])
    (run / rundir.EVIDENCE).write_text("**Parity gate `tiny`: passed.**\n")
    (run / rundir.SUMMARY_HTML).write_text("<html></html>")
    (run / rundir.FIGURES).mkdir()
    for name in ("error-by-bucket.png", "error-by-bucket.svg", "error-vs-length.png"):
        (run / rundir.FIGURES / name).write_bytes(b"figure")
    md = report.markdown_report(run)
    assert "<details open><summary>Cases against <code>next</code></summary>" in md
    assert ("![error by bucket](figures/error-by-bucket.png) ([SVG](figures/error-by-bucket.svg))\n\n"
            "![error vs length](figures/error-vs-length.png)\n\n</details>") in md
    names = set(zipfile.ZipFile(report.attach_zip(run, tmp_path / "attach")).namelist())
    assert {"run/figures/error-by-bucket.png", "run/figures/error-by-bucket.svg",
            "run/figures/error-vs-length.png"} <= names


@pytest.mark.parametrize("argv", [
    ["parity-kit", "gate", "d.toml"],
    ["parity-kit", "gate", "my descriptors/d.toml", "--release", "fork 2026;rm -rf ~", "--out", "runs/a b"],
    ["parity-kit", "control", "$HOME/d.toml", "--junit", "`id`.xml", "--out", "it's \"quoted\" | piped & bg"],
    ["parity-kit", "gate", "--case", "*", "--out", "ünï cødé/\\back\\slash", ""],
])
def test_the_reproduce_line_pastes_back_as_the_same_arguments(argv):
    """evidence.md joined the command with spaces: a name with a space or a shell character did not paste back."""
    manifest = {**MANIFEST, "cases": [], "reused": {}, "command": argv}
    [line] = [t for t in report.evidence_markdown(manifest, "passed", {}, 1.0, {}).splitlines()
              if t.startswith("Reproduce: ")]
    span = line.removeprefix("Reproduce: ")
    fence = len(span) - len(span.lstrip("`"))
    command = span[fence:-fence]
    if command.startswith(" ") and command.endswith(" ") and command.strip(" "):
        command = command[1:-1]  # CommonMark strips one space each side of a code span
    shell = subprocess.run(["bash", "-c", "printf '%s\\0' " + command], capture_output=True, check=True)
    assert shell.stdout.decode().split("\0")[:-1] == argv


def test_a_prompt_whose_golden_tokens_are_all_missing_is_said_so_never_max_error_nan(tmp_path):
    """Its error is infinite, null in strict JSON: the console said "max error nan" and evidence.md raised
    TypeError formatting the over-bound failure read back."""
    golden = [(5, math.log(0.6)), (6, math.log(0.3))]
    ok = score_prompt("p-ok", 128, golden, Observation("p-ok", ((5, math.log(0.61)), (6, math.log(0.29))), 10), 0.075)
    gone = score_prompt("p-gone", 128, golden, Observation("p-gone", ((7, math.log(0.6)), (8, math.log(0.3))), 10),
                        0.075)
    result = CaseResult(case="c", backend="hf", status=Status.FAILED, bound=0.075, golden_kind="semantic",
                        prompts=[ok, gone], failures=gone.failures, typed_failures=gone.typed_failures)
    save_case_result(result, tmp_path / "c.json")
    read = CaseResult.from_dict(json.loads((tmp_path / "c.json").read_text()))
    line = case_line(read)
    assert line.endswith("1/2 prompts failed, 1 with golden tokens missing from the backend's top list, max error "
                         "0.01 of the others") and "nan" not in line
    manifest = {**MANIFEST, "cases": ["c"], "reused": {}}
    text = report.evidence_markdown(manifest, "failed", {Status.FAILED: 1}, 1.0, {"c": read})
    assert "- `c` (hf): **failed** on 1 of 2 prompts; worst `p-gone` (bucket 128): golden token 5 is missing" in text
    assert [f.text for f in failures_of(read.prompts[1])] == gone.failures  # "max probability error inf > ..." too
    view = type("View", (), {"expected": ["c"], "results": {"c": read}})()
    assert "| ❌ failed | golden tokens missing |" in report.compact_case_table(view)
    [suite_out] = [n.text for n in ET.fromstring(junit_xml([("t", ["c"], {"c": read}, 1.0)])).iter("system-out")]
    assert suite_out.startswith("1 with golden tokens missing from the backend's top list, max error 0.01 of the")
