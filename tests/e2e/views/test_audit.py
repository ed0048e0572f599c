"""The audit artifact: what a reviewer sees in summary.html, the Markdown for an issue, the zip,
JUnit for CI, and that text from the world renders as text in a real browser."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from html import unescape as html_unescape
from pathlib import Path

import pytest

from kit.core.model.modeldigest import model_digest
from kit.core.records.results import read_run
from support import ROOT, copy_model, edit_weight, hf_cases, parity_kit, write_descriptor
from support.shared import embedded_gate_run

ARTIFACTS = ROOT / "test-artifacts"


def html_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory, embedded):
    """The tiny gate on a model whose value projection was halved: both cases fail."""
    tmp = tmp_path_factory.mktemp("failing")
    model = copy_model(embedded, tmp / "model")
    edit_weight(model, "model.layers.0.self_attn.v_proj.weight", lambda w: w * 0.5)
    desc = write_descriptor(tmp, embedded, model=model, model_digest=model_digest(model), cases=hf_cases(embedded))
    run = tmp / "run"
    proc = parity_kit("gate", desc, "--out", run, "--junit", tmp / "junit.xml")
    assert proc.returncode == 1, proc.stderr
    return run, tmp / "junit.xml"


@pytest.fixture(scope="module")
def passing_run(tmp_path_factory, embedded):
    tmp = tmp_path_factory.mktemp("passing")
    desc = write_descriptor(tmp, embedded, cases=hf_cases(embedded))
    proc = parity_kit("gate", desc, "--out", tmp / "run", "--junit", tmp / "junit.xml")
    assert proc.returncode == 0, proc.stderr
    return tmp / "run", tmp / "junit.xml"


def test_failing_summary_says_what_failed_where_and_from_what(failing_run):
    run, _ = failing_run
    html = html_text(run / "summary.html")
    view = read_run(run)
    bf16 = view.results["hf-bf16"]
    n = bf16.counts()["failed"]
    assert n > 0
    # The verdict banner with its one-sentence reason.
    assert "<code>test</code>: <span style=\"color:#cf222e\">FAILED</span>" in html
    assert f"<code>checkpoint</code> fails 64 of 64 prompts; <code>hf-bf16</code> fails {n} of 64 prompts" in html
    assert "<title>test: failed — parity gate</title>" in html  # what a browser's tab says
    # The case table, the plots, the worst prompts with both sides' tokens, the provenance.
    assert "the worst token, against its own bound" in html and "max probability error" in html
    assert "margin" in html and "duration s" in html
    assert html.count("data:image/png;base64") >= 3
    assert "Worst prompts: the golden's and the backend's top tokens" in html
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(view.manifest["model"]) / "tokenizer.json"))
    w = bf16.worst
    golden_token, backend_token = int(w.golden_top[0][0]), int(w.backend_top[0][0])
    for token in (golden_token, backend_token):
        text = tok.decode([token]).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert f"{token:>6} {text}" in html
    assert view.manifest["fixture_sha256"] in html and view.manifest["model_digest"] in html
    assert "made by hf float32 on" in html and "parity-kit gate" in html
    # Files by where they are, relative to the repository or the run, never by this machine's absolute paths: the
    # model copy beside the run, the descriptor, the command's --out.
    provenance = html.split("<h4>Provenance</h4>", 1)[1]
    assert ">../model<" in provenance and ">../test.toml<" in provenance
    assert str(run.parent) not in provenance and str(ROOT) not in provenance


def test_passing_summary_banner_and_provenance(passing_run):
    run, _ = passing_run
    html = html_text(run / "summary.html")
    assert "PASSED</span></div><div>all 2 cases are within their bounds</div>" in html
    assert "<title>test: passed — parity gate</title>" in html
    assert "no failures" in html
    assert "kernel parity-kit: attention sdpa" in html


def test_junit_has_one_testcase_per_case_with_failures(failing_run, passing_run):
    root = ET.parse(failing_run[1]).getroot()
    suite = root.find("testsuite")
    assert suite.get("name") == "test" and suite.get("tests") == "2" and suite.get("failures") == "2"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"checkpoint", "hf-bf16"}
    failure = cases["hf-bf16"].find("failure")
    first = read_run(failing_run[0]).results["hf-bf16"].failure_messages[0]
    # The body leads with the case's triage (kit.core.verdict.triage), then every failure message in full.
    triage_line, *messages = failure.text.split("\n")
    assert failure.get("message") == first and messages[0] == first
    assert triage_line.startswith("triage: numeric: over the bound")
    assert cases["hf-bf16"].get("classname") == "test.hf"

    suite = ET.parse(passing_run[1]).getroot().find("testsuite")
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    assert all(c.find("failure") is None for c in suite.findall("testcase"))
    assert suite.find("testcase").find("system-out").text.startswith("max probability error ")


def test_report_markdown_and_attach(failing_run, tmp_path):
    run, _ = failing_run
    proc = parity_kit("report", run, "--markdown")
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert md.startswith("**Parity gate `test`: failed.** 2 failed in ")
    assert ("| case | backend | status | max error | bound (from) | headroom | drift | failed prompts | worst prompt |"
            in md)
    n = read_run(run).results["hf-bf16"].counts()["failed"]
    assert "| `hf-bf16` | hf | ❌ failed |" in md and "| 0.075, hand-set |" in md
    assert f"| not run (no calibration) | {n}/64 |" in md
    assert "| `checkpoint` | hf | ❌ failed |" in md and "| exact golden | — | — | 64/64 |" in md
    # The summary's figures as files, linked relative to the run for an issue comment.
    figures = [f"figures/{stem}.{ext}" for stem in ("headroom", "error-by-bucket", "error-vs-length")
               for ext in ("png", "svg")]
    assert all((run / f).stat().st_size > 1000 for f in figures)
    assert "![error by bucket](figures/error-by-bucket.png) ([SVG](figures/error-by-bucket.svg))" in md
    assert "![error vs length](figures/error-vs-length.png) ([SVG](figures/error-vs-length.svg))" in md

    proc = parity_kit("report", run, "--attach", tmp_path / "attach")
    assert proc.returncode == 0, proc.stderr
    zpath = Path(proc.stdout.strip())
    assert zpath == tmp_path / "attach" / "run.zip"
    names = set(zipfile.ZipFile(zpath).namelist())
    assert {"run/summary.html", "run/summary.ipynb", "run/result.json", "run/evidence.md",
            "run/cases/hf-bf16.ipynb", "run/cases/checkpoint.ipynb", *(f"run/{f}" for f in figures)} <= names


def test_report_refuses_a_directory_that_is_no_run(tmp_path):
    proc = parity_kit("report", tmp_path, "--markdown")
    assert proc.returncode == 3
    assert (f"{tmp_path} is not a gate run, control, localize or bisect directory (no manifest.json, control.json, "
            "localize.json or bisect.json)") in proc.stderr


# Text from the world: a script tag, an image whose onerror runs code, a Markdown link.
UNSAFE = [
    "User: <script>document.title='PWNED-SCRIPT'</script> hello",
    "User: <img src=x onerror=\"document.body.setAttribute('data-pwned','img')\"> hello",
    "User: see [click me](javascript:document.title='PWNED-LINK') now",
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is missing: `make test` installs it (scripts/ensure-chromium.sh)"
    return found


def test_prompt_text_renders_as_text_in_a_real_browser(tmp_path, embedded):
    prompts = tmp_path / "unsafe.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"unsafe-{i}", "prompt": p}) + "\n" for i, p in enumerate(UNSAFE)))
    proc = parity_kit("fixture", "make", "--prompts", prompts, "--model", embedded.model, "--out", tmp_path,
                      "--buckets", "128")
    assert proc.returncode == 0, proc.stderr
    fixture = Path(proc.stdout.splitlines()[0])
    proc = parity_kit("golden", "make", "--model", embedded.model, "--fixture", fixture, "--kind", "semantic",
                      "--out", tmp_path / "goldens")
    assert proc.returncode == 0, proc.stderr
    golden = Path(proc.stdout.strip())
    desc = write_descriptor(tmp_path, embedded, fixture=fixture, goldens={"semantic": golden},
                            cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    run = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run)
    assert proc.returncode == 0, proc.stderr

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "summary-with-unsafe-prompts.png"
    shot.unlink(missing_ok=True)
    flags = browser_flags(tmp_path)
    page = (run / "summary.html").as_uri()
    dom = subprocess.run([chromium(), *flags, "--dump-dom", page], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    subprocess.run([chromium(), *flags, f"--screenshot={shot}", page], capture_output=True, timeout=180, check=True)
    assert shot.is_file() and shot.stat().st_size > 10_000

    out = dom.stdout
    assert "PWNED" not in out.split("<title>", 1)[1].split("</title>", 1)[0]  # no script changed the title
    assert "data-pwned" not in out.split("<body", 1)[1].split(">", 1)[0]  # no onerror ran
    assert "<script>document.title" not in out and "<img src=\"x\"" not in out
    assert 'href="javascript:' not in out
    # ... and the text is there, literally, as a reader should see it.
    assert "&lt;script&gt;document.title='PWNED-SCRIPT'&lt;/script&gt; hello" in out
    assert "&lt;img src=x onerror=\"document.body.setAttribute('data-pwned','img')\"&gt; hello" in out
    assert "see [click me](javascript:document.title='PWNED-LINK') now" in out

    # Every table fits its output area at this window size: none needs a horizontal scroll.
    overflow = table_overflow(run / "summary.html", tmp_path)
    assert len(overflow) >= 3 and max(overflow.values()) <= 0, overflow


def browser_flags(tmp_path: Path, height: int = 2400) -> list[str]:
    """Headless Chromium in a window 1400 pixels wide, its profile in ``tmp_path``."""
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium'}", f"--window-size=1400,{height}", "--virtual-time-budget=4000"]


def table_overflow(page: Path, tmp_path: Path) -> dict[str, int]:
    """How many pixels each table of ``page`` is wider than its output area in a 1400-pixel window (above 0 needs a
    horizontal scrollbar), keyed by its first heading cells' text."""
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text() + "<script>document.title = 'overflow ' + JSON.stringify(Object.fromEntries("
                     "[...document.querySelectorAll('table')].map((t, i) => [i + ': ' + t.rows[0].textContent"
                     ".trim().replace(/\\s+/g, ' ').slice(0, 60), Math.round("
                     "t.getBoundingClientRect().width - t.parentElement.clientWidth)])));</script>")
    dom = subprocess.run([chromium(), *browser_flags(tmp_path), "--dump-dom", probe.as_uri()], capture_output=True,
                         text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return json.loads(html_unescape(dom.stdout.split("<title>overflow ", 1)[1].split("</title>", 1)[0]))


def test_the_embedded_gates_case_table_fits_1400_pixels(tmp_path_factory, tmp_path):
    """Every case of the embedded descriptor, with its bounds' source, drift, decode and detectable effect: the case
    table (and every other) fits a 1400-pixel window without a horizontal scrollbar."""
    run, proc = embedded_gate_run(tmp_path_factory)
    assert proc.returncode == 0, proc.stderr
    overflow = table_overflow(run / "summary.html", tmp_path)
    [cases] = [k for k in overflow if "the worst token, against its own bound" in k]
    assert len(read_run(run).expected) == 8 and overflow[cases] <= 0, overflow
    assert max(overflow.values()) <= 0, overflow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_serves_the_project_with_its_kernels(passing_run, tmp_path):
    run, _ = passing_run
    inside = ROOT / "runs" / f"lab-test-{os.getpid()}"
    shutil.copytree(run, inside)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kit.cli", "lab", str(inside), "--no-browser", "--port", str(port),
                             "--", "--IdentityProvider.token=labtest"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    try:
        specs = None
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs?token=labtest", timeout=2) as r:
                    specs = json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.5)
        assert specs is not None, "JupyterLab did not answer in 60 s"
        assert "parity-kit" in specs["kernelspecs"]
        url = f"http://127.0.0.1:{port}/api/contents/runs/{inside.name}/summary.ipynb?token=labtest&content=0"
        with urllib.request.urlopen(url, timeout=5) as r:
            assert json.loads(r.read())["type"] == "notebook"
        # What JupyterLab does on every save: the checkpoint lands outside the run directory, the audit artifact.
        save = urllib.request.Request(f"http://127.0.0.1:{port}/api/contents/runs/{inside.name}/summary.ipynb/"
                                      "checkpoints?token=labtest", method="POST")
        with urllib.request.urlopen(save, timeout=5) as r:
            assert json.loads(r.read())["id"] == "checkpoint"
        assert not list(inside.rglob(".ipynb_checkpoints"))
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        shutil.rmtree(inside, ignore_errors=True)


def test_example_ci_workflow_uses_real_commands():
    """The example workflow must not rot: every parity-kit call in it parses with today's CLI."""
    import shlex

    import yaml

    from kit.cli.entry import _parser

    flow = yaml.safe_load((ROOT / "examples" / "parity-gate.yml").read_text())
    script = "\n".join(step.get("run", "") for step in flow["jobs"]["gate"]["steps"]).replace("\\\n", " ")
    script = script.replace("${{ inputs.descriptor || 'descriptors/tiny-cpu.toml' }}", "d.toml")
    calls = [line.split(".venv/bin/parity-kit", 1)[1] for line in script.splitlines() if ".venv/bin/parity-kit" in line]
    assert len(calls) >= 3
    for call in calls:
        words = shlex.split(call.split(">>")[0].split("||")[0])
        _parser().parse_args(words)  # exits (fails the test) on an unknown command or option
