"""Control runs: every row of the diagnosis table, produced by real gate runs of the tiny model.

A release is a kernel; a broken release is a kernel whose environment changes the model's
arithmetic (its SiLU), a hung one never starts. A stale golden is one made from an older model.
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

import pytest
import scrapbook as sb

from kit.core.verdict.diagnosis import compare_case, metrics_equal
from kit.core.records.records import RepeatSpread
from kit.core.records.results import read_run
from support import BROKEN_SILU, HUNG, add_kernel, parity_kit, releases, write_descriptor


# A candidate environment whose activation differs: the kind of change a new engine build brings.
def control(tmp_path, desc, *extra, env=None, timeout=900):
    out = tmp_path / "control"
    proc = parity_kit("control", desc, "--out", out, "--case", "hf-bf16", *extra, env=env, timeout=timeout)
    diagnosis = json.loads((out / "diagnosis.json").read_text()) if (out / "diagnosis.json").is_file() else None
    evidence = (out / "evidence.md").read_text() if (out / "evidence.md").is_file() else ""
    return proc, out, diagnosis, evidence


@pytest.fixture(scope="module")
def both_pass(tmp_path_factory, embedded):
    """A control in which both releases pass, its summary and JUnit XML written: made once, as the tests of the
    qualified verdict and of the noise floor only read it."""
    tmp = tmp_path_factory.mktemp("both-pass")
    desc = write_descriptor(tmp, embedded, releases=releases())
    return tmp, desc, *control(tmp, desc, "--junit", tmp / "junit.xml")


def test_both_pass_is_qualified_with_summary(both_pass):
    tmp_path, desc, proc, out, d, evidence = both_pass
    assert proc.returncode == 0, proc.stderr
    suites = ET.parse(tmp_path / "junit.xml").getroot().findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [
        ("test.current", "1", "0"), ("test.candidate", "1", "0")]
    assert proc.stdout.strip() == str(out.resolve())
    assert d["verdict"] == "qualified" and d["exit_code"] == 0
    assert d["reason"] == "the candidate `candidate` passes all 1 cases, and so does today's pin `current`"
    assert evidence.startswith("# Qualified: test — candidate `candidate` passes every case, and so does the control")
    assert "| control (today's pin) | `current` | passed: 1 passed in " in evidence
    assert "| `candidate` | hf | `parity-kit` | next | 0123abcd | — |" in evidence
    assert (f"Reproduce: `parity-kit control {desc} --out {out} --case hf-bf16 "
            f"--junit {tmp_path / 'junit.xml'}`") in evidence
    # The control notebook glues the diagnosis; the summary shows it, then both runs.
    glued = sb.read_notebook(str(out / "control.ipynb")).scraps["diagnosis"].data
    assert glued["verdict"] == "qualified" and glued["rows"][0]["case"] == "hf-bf16"
    assert sb.read_notebook(str(out / "summary.ipynb")).scraps["control_verdict"].data == "qualified"
    html = (out / "summary.html").read_text()
    assert "<title>test: qualified — parity control</title>" in html
    assert ("Control: today's pin <code>current</code> against candidate <code>candidate</code>: "
            '<span style="color:#1a7f37">QUALIFIED</span>') in html
    assert "Gate <code>test</code> against release <code>current</code>" in html
    assert "Gate <code>test</code> against release <code>candidate</code>" in html
    manifest = json.loads((out / "candidate" / "manifest.json").read_text())
    assert manifest["release"]["name"] == "candidate"
    assert manifest["release"]["backends"]["hf"]["source_commit"] == "0123abcd"


def test_candidate_that_changes_the_model_is_a_regression(tmp_path, embedded):
    env = add_kernel(tmp_path / "jupyter", "broken-next", BROKEN_SILU)
    desc = write_descriptor(tmp_path, embedded, releases=releases(candidate="broken-next"))
    proc, out, d, evidence = control(tmp_path, desc, "--no-summary", env=env)
    assert proc.returncode == 1, proc.stderr
    assert d["verdict"] == "regression"
    assert d["control_failures"] == [] and d["candidate_failures"] == ["hf-bf16"]
    assert d["reason"] == ("the candidate `candidate` fails `hf-bf16`, which today's pin `current` passes: "
                           "a regression in the candidate")
    row = d["rows"][0]
    assert row["control_status"] == "passed" and row["candidate_status"] == "failed"
    assert row["delta"] > 0 and row["candidate_status"] == "failed"
    # The paired comparison: a SiLU that moves every prompt puts the candidate's error above the pin's.
    assert row["paired"]["low"] > 0 and row["paired"]["paired"] + row["paired"]["near_ties"] == 64
    assert row["paired_text"].startswith("candidate's error is ") and " above the pin's (95 % interval " in \
        row["paired_text"]
    assert f"- `hf-bf16` (passed in the pin, failed in the candidate): {row['paired_text']}" in evidence
    assert f"  `hf-bf16` (passed in the pin, failed in the candidate): {row['paired_text']}\n" in proc.stderr
    assert evidence.startswith("# Refresh blocked: test — regression in the candidate (hf-bf16)\n")
    case = read_run(out / "candidate").results["hf-bf16"]
    w = case.worst
    assert (f"- `candidate`, hf: worst case `hf-bf16` ({case.counts()['failed']} of 64 prompts failed), "
            f"prompt `{w.id}` (bucket {w.bucket}): max probability error {w.max_probability_error:.3g}, "
            f"bound {w.bound:g}") in evidence
    assert w.bound == case.bucket_bounds[str(w.bucket)]  # the calibrated bound of the prompt's bucket
    assert "Repair first" not in evidence  # nothing is wrong with the baseline


# A candidate whose SiLU is wrong in bfloat16 only: float32 cases compute as before.
BROKEN_BF16_SILU = """import torch, torch.nn.functional as F
_silu = F.silu
F.silu = lambda x, inplace=False: x * torch.sigmoid(2.0 * x) if x.dtype == torch.bfloat16 else _silu(x, inplace)
"""


def test_two_case_control_names_the_one_case_that_regressed(tmp_path, embedded):
    env = add_kernel(tmp_path / "jupyter", "bf16-broken-next", BROKEN_BF16_SILU)
    cases = {n: {**embedded.doc["cases"][n], "buckets": [128]} for n in ("checkpoint", "hf-bf16")}
    desc = write_descriptor(tmp_path, embedded, cases=cases, releases=releases(candidate="bf16-broken-next"))
    out = tmp_path / "control"
    proc = parity_kit("control", desc, "--out", out, "--no-summary", env=env, timeout=900)
    assert proc.returncode == 1, proc.stderr
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["verdict"] == "regression"
    assert d["reason"] == ("the candidate `candidate` fails `hf-bf16`, which today's pin `current` passes: "
                           "a regression in the candidate")
    assert [(r["case"], r["control_status"], r["candidate_status"]) for r in d["rows"]] == [
        ("checkpoint", "passed", "passed"), ("hf-bf16", "passed", "failed")]
    checkpoint = d["rows"][0]
    assert checkpoint["same_metrics"] is True and checkpoint["delta"] == 0  # bit for bit on both sides
    assert d["rows"][1]["delta"] > 0 and d["candidate_failures"] == ["hf-bf16"] and d["control_failures"] == []
    for side in ("current", "candidate"):
        assert json.loads((out / side / "manifest.json").read_text())["cases"] == ["checkpoint", "hf-bf16"]
    assert (out / "evidence.md").read_text().startswith("# Refresh blocked: test — regression in the candidate "
                                                        "(hf-bf16)\n")


def test_stale_golden_is_a_baseline_blocker(tmp_path, embedded, stale_golden):
    desc = write_descriptor(tmp_path, embedded, releases=releases(),
                            goldens={**embedded.goldens, "semantic": stale_golden})
    proc, out, d, evidence = control(tmp_path, desc, "--no-summary")
    assert proc.returncode == 4, proc.stderr
    assert d["verdict"] == "baseline-blocker"
    assert d["control_failures"] == d["candidate_failures"] == ["hf-bf16"]
    assert d["rows"][0]["same_metrics"] is True and d["rows"][0]["delta"] == 0
    # Prompt by prompt the same errors: no effect, and the diagnosis line says so with its interval.
    paired = d["rows"][0]["paired"]
    assert (paired["mean"], paired["low"], paired["high"], paired["p_value"]) == (0, 0, 0, 1)
    text = d["rows"][0]["paired_text"]
    assert text.startswith("candidate's error is the pin's on average (95 % interval 0.0 .. 0.0, ")
    assert f"p = 1, {paired['paired']} prompts paired" in text and paired["paired"] + paired["near_ties"] == 64
    assert f"- `hf-bf16` (failed in the pin, failed in the candidate): {text}\n" in evidence
    assert d["reason"] == ("today's pin `current` reproduces the candidate's failure of `hf-bf16` with identical "
                           "metrics: the golden or the oracle is broken; repair it before any candidate can qualify")
    assert evidence.startswith("# Refresh blocked: test — baseline blocker (hf-bf16)\n")
    assert ("The control (`current`) reproduced the candidate's failure with identical metrics, so the candidate "
            f"is not at fault. Repair first: the golden (`{stale_golden.name}`") in evidence
    assert "- `current`, hf: worst case `hf-bf16`" in evidence and "- `candidate`, hf: worst case `hf-bf16`" in evidence


def test_broken_control_with_passing_candidate_is_a_baseline_blocker(tmp_path, embedded):
    env = add_kernel(tmp_path / "jupyter", "broken-pin", BROKEN_SILU)
    desc = write_descriptor(tmp_path, embedded, releases=releases(current="broken-pin"))
    proc, out, d, evidence = control(tmp_path, desc, "--no-summary", env=env)
    assert proc.returncode == 4, proc.stderr
    assert d["verdict"] == "baseline-blocker"
    assert d["control_failures"] == ["hf-bf16"] and d["candidate_failures"] == []
    assert d["reason"] == ("today's pin `current` fails `hf-bf16` while the candidate `candidate` passes: the "
                           "control is broken, and the candidate alone cannot establish qualification")
    assert "The control (`current`) fails on its own. Repair first:" in evidence


def test_different_failures_on_both_sides_are_both_broken(tmp_path, embedded, stale_golden):
    env = add_kernel(tmp_path / "jupyter", "broken-next", BROKEN_SILU)
    desc = write_descriptor(tmp_path, embedded, releases=releases(candidate="broken-next"),
                            goldens={**embedded.goldens, "semantic": stale_golden})
    proc, out, d, evidence = control(tmp_path, desc, "--no-summary", env=env)
    assert proc.returncode == 4, proc.stderr
    assert d["verdict"] == "both-broken"
    assert d["rows"][0]["same_metrics"] is False
    # The stale golden fails both; the broken SiLU makes the candidate worse still, prompt by prompt (paired).
    assert d["reason"].startswith("both releases fail `hf-bf16`, and the candidate `candidate` is worse still: on "
                                  "`hf-bf16` the candidate's error is ")
    assert d["reason"].endswith("repair the baseline first, then judge the candidate")
    assert evidence.startswith("# Refresh blocked: test — both broken (hf-bf16)\n")


def test_candidate_that_times_out_is_incomplete(tmp_path, embedded):
    env = add_kernel(tmp_path / "jupyter", "hung-next", HUNG)
    # Its timeout is the point: not run again (the retry of infrastructure failures has tests of its own).
    # The hung release alone gets a short timeout (a release may set its own): its kernel never starts, so
    # any timeout below the kernel start's own limit ends as a timeout however loaded the machine is, while
    # today's pin keeps the longer one it needs to pass there; the control waits on both.
    rel = releases(candidate="hung-next")
    rel["candidate"]["backends"]["hf"]["options"] = {"timeout_s": 15}
    desc = write_descriptor(tmp_path, embedded, releases=rel,
                            defaults={**embedded.doc["defaults"], "timeout_s": 90, "infrastructure_retries": 0})
    proc, out, d, evidence = control(tmp_path, desc, "--no-summary", env=env)
    assert proc.returncode == 2, proc.stderr
    assert d["verdict"] == "incomplete"
    notebook = out / "candidate" / "cases" / "hf-bf16.ipynb"
    line = f"candidate: case hf-bf16 timed out; partial notebook {notebook}"
    assert d["incomplete"] == [line]
    assert d["reason"] == f"the gate did not finish: {line}"
    assert notebook.is_file()
    assert evidence.startswith("# Refresh blocked: test — incomplete\n")
    assert f"- {line}" in evidence


def test_noise_floor_decides_equal_metrics(both_pass):
    """Metrics that differ by less than the repeat spread are the same failure; more is not."""
    # Any passing run of the case is real metrics to compare: today's pin's run in the passing control.
    _, _, proc, out, _, _ = both_pass
    assert proc.returncode == 0, proc.stderr
    a = read_run(out / "current").results["hf-bf16"]
    b = read_run(out / "current").results["hf-bf16"]
    moved = dataclasses.replace(b.prompts[3], max_probability_error=b.prompts[3].max_probability_error + 1e-4)
    b = dataclasses.replace(b, prompts=[*b.prompts[:3], moved, *b.prompts[4:]])
    assert metrics_equal(a.prompts, a.prompts, 0.0)
    assert not metrics_equal(a.prompts, b.prompts, 0.0)
    assert metrics_equal(a.prompts, b.prompts, 2e-4)
    a = dataclasses.replace(a, bound_source={})  # hand-set: only the repeats measure a noise here
    b = dataclasses.replace(b, bound_source={}, repeat_spread=[RepeatSpread(
        id=b.prompts[3].id, runs=3, launches=1, max_logprob_spread=4e-4, max_probability_spread=2e-4, identical=False)])
    row = compare_case("hf-bf16", a, b)
    assert row.same_metrics is True and row.noise_floor == 2e-4
    b = dataclasses.replace(b, repeat_spread=[dataclasses.replace(b.repeat_spread[0], max_probability_spread=5e-5)])
    assert compare_case("hf-bf16", a, b).same_metrics is False


@pytest.mark.parametrize("args, message", [
    (["gate", "--release", "nope"],
     "no release named 'nope' (releases: current, candidate; add a [releases.nope] table)"),
    (["control", "--current", "current", "--candidate", "current"],
     "control needs two releases; both sides name 'current'"),
])
def test_unknown_or_repeated_release_is_refused(tmp_path, embedded, args, message):
    desc = write_descriptor(tmp_path, embedded, releases=releases())
    cmd, *rest = args
    proc = parity_kit(cmd, desc, *rest, "--out", tmp_path / "out")
    assert proc.returncode == 3
    assert message in proc.stderr
    assert not (tmp_path / "out").exists()


def test_missing_candidate_kernel_is_refused_at_its_key_before_anything_is_written(tmp_path, embedded):
    cases = {"hf-bf16": {**embedded.doc["cases"]["hf-bf16"], "buckets": [128]}}  # the retry runs 16 prompts
    desc = write_descriptor(tmp_path, embedded, cases=cases, releases=releases(candidate="vllm-next-missing"))
    proc, out, _, _ = control(tmp_path, desc, "--no-summary")
    assert proc.returncode == 3, proc.stderr
    line = next(n for n, text in enumerate(desc.read_text().splitlines(), 1) if "vllm-next-missing" in text)
    assert proc.stderr.strip().splitlines() == [
        f"parity-kit: bad input: {desc}:{line}: releases.candidate.backends.hf.kernel: kernel 'vllm-next-missing' "
        "is not installed; install it into the environment that holds that release: "
        "python -m ipykernel install --sys-prefix --name vllm-next-missing"]
    assert not out.exists()

    desc = write_descriptor(tmp_path, embedded, cases=cases, releases=releases())  # corrected; the same --out
    proc, out, d, _ = control(tmp_path, desc, "--no-summary")
    assert proc.returncode == 0, proc.stderr
    assert d["verdict"] == "qualified"


def test_release_without_a_backend_or_with_a_bad_option_is_refused(tmp_path, embedded):
    rel = releases()
    rel["candidate"]["backends"] = {"hf": {"kernel": "parity-kit", "options": {"dtype": "float128"}}}
    desc = write_descriptor(tmp_path, embedded, releases=rel)
    proc = parity_kit("gate", desc, "--release", "candidate", "--out", tmp_path / "out")
    assert proc.returncode == 3
    line = next(n for n, text in enumerate(desc.read_text().splitlines(), 1)
                if text.startswith("[releases.candidate.backends.hf.options]"))
    assert f"test.toml:{line}: releases.candidate.backends.hf.options.dtype: Input should be" in proc.stderr
    assert "(for case checkpoint)" in proc.stderr

    rel["candidate"]["backends"] = {"nonesuch": {"kernel": "parity-kit"}}
    desc = write_descriptor(tmp_path, embedded, releases=rel)
    proc = parity_kit("gate", desc, "--release", "candidate", "--out", tmp_path / "out")
    assert proc.returncode == 3
    assert ("releases.candidate.backends.nonesuch: unknown backend 'nonesuch' (registered: hf, jax, levanter, vllm)"
            in proc.stderr)
