"""A gate never says passed for what it did not check, run for real through the CLI: lying case notebooks,
a backend that drops prompts, and resumes that must keep every case of the run in the verdict."""

from __future__ import annotations

import json

from kit.core.baselines.golden import load_golden
from kit.core.records.jsonio import sha256_file
from kit.descriptor.load import load_descriptor
from support import hf_cases, parity_kit, trusted, write_descriptor, write_notebook

BUCKET = 128
BUCKET_IDS = ["chat-sharegpt-00", "chat-sharegpt-01", "chat-sharegpt-02", "code-humaneval-00", "code-humaneval-01",
              "code-humaneval-02", "knowledge-longbench-00", "knowledge-longbench-01", "knowledge-longbench-02",
              "math-gsm-00", "math-gsm-01", "math-gsm-02", "tool-atlas-00", "tool-atlas-01", "tool-atlas-02",
              "tool-atlas-03"]
FEW = ["chat-sharegpt-00", "code-humaneval-00", "math-gsm-00"]

# A case notebook that writes a passed verdict of its own making: over `keep` of its prompts, for the
# inputs of the case `digest_of` (its own when None), without running any backend.
LIAR = """from kit.core.records.fixture import load_fixture
from kit.core.baselines.golden import load_golden
from kit.core.records.records import CaseResult, PromptScore
from kit.core.records.results import save_case_result
from kit.core.records.spec import CaseSpec
keep, digest_of = {keep!r}, {digest_of!r}
fixture, golden = load_fixture(spec["fixture_path"]), load_golden(spec["golden_path"])
ids = [p.id for p in fixture.select(spec["prompt_ids"], spec["buckets"])]
ids = ids[: int(len(ids) * keep)]
other = CaseSpec.from_dict({{**spec, **(digest_of or {{}})}})
prompts = [PromptScore(id=i, bucket=128, n_tokens=3, passed=True, bound=0.1, max_probability_error=0.0,
                       top_probability_l1_error=0.0, kl_shared=0.0, first_rank_agreement=True, golden_top_token=1,
                       golden_top_probability=0.9, backend_top_token=1, backend_top_probability=0.9, winner_gap=0.0)
           for i in ids]
save_case_result(CaseResult(case=spec["name"], backend=spec["backend"], status="passed", prompts=prompts,
                            inputs_digest=other.inputs_digest(fixture.sha256, golden.sha256)), result_path)"""

# The real hf backend behind a wrapper that drops the last prompt of every call.
DROPS = """from kit.case import runner
from kit.backends.registry import open_backend
class Drops:
    def __init__(self, inner):
        self.inner = inner
    def observe(self, cases, top_n):
        return self.inner.observe(cases, top_n)[:-1]
    def __getattr__(self, name):
        return getattr(self.inner, name)
runner.open_backend = lambda s: Drops(open_backend(s))
runner.notebook_case(spec, None, None, result_path)"""


def result_of(run_dir):
    return json.loads((run_dir / "result.json").read_text())


def test_lying_case_notebooks_and_a_backend_that_drops_prompts_are_errors(tmp_path, embedded):
    base = {**embedded.doc["cases"]["hf-bf16"], "buckets": [BUCKET]}
    liars = {"none": (0.0, None), "half": (0.5, None), "borrowed": (1.0, {"name": "hf-bf16", "bound": 0.05})}
    cases = {name: {**base, "notebook": trusted(write_notebook(tmp_path / f"{name}.ipynb",
                                                                LIAR.format(keep=keep, digest_of=other)))}
             for name, (keep, other) in liars.items()}
    drops = write_notebook(tmp_path / "drops.ipynb", DROPS)
    cases["drops"] = {**embedded.doc["cases"]["checkpoint"], "prompts": FEW, "notebook": trusted(drops)}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == 2, proc.stderr
    result = result_of(run_dir)
    assert result["verdict"] == "incomplete"
    assert {n: c["status"] for n, c in result["cases"].items()} == dict.fromkeys(cases, "error")
    errors = {n: c["error"] for n, c in result["cases"].items()}
    assert errors["none"] == ("case none: result covers 0 of 16 prompts; missing chat-sharegpt-00, chat-sharegpt-01, "
                              "chat-sharegpt-02, ... (+13)")
    assert errors["half"] == ("case half: result covers 8 of 16 prompts; missing knowledge-longbench-02, math-gsm-00, "
                              "math-gsm-01, ... (+5)")
    spec = load_descriptor(desc).case_specs(["borrowed"])[0]
    fixture_sha = json.loads((run_dir / "manifest.json").read_text())["fixture_sha256"]
    golden_sha = load_golden(spec.golden_path).sha256
    lent = type(spec)(**{**spec.to_dict(), "name": "hf-bf16", "bound": 0.05}).inputs_digest(fixture_sha, golden_sha)
    assert errors["borrowed"] == (f"case borrowed: result was computed for other inputs (inputs digest {lent[:12]}, "
                                  f"expected {spec.inputs_digest(fixture_sha, golden_sha)[:12]})")
    assert errors["drops"] == ("cell 3 raised BackendMismatch: backend hf returned 2 observations for the 3 prompts of "
                               "bucket 128: missing math-gsm-00; partial notebook "
                               + str(run_dir / "cases" / "drops.ipynb"))
    assert "case none: result covers 0 of 16 prompts" in proc.stderr and "gate incomplete" in proc.stderr
    # The run names every notebook that is not the kit's, by digest.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["notebooks"]["drops"] == {"path": str(drops), "sha256": sha256_file(drops)}
    assert sorted(manifest["notebooks"]) == sorted(cases)
    assert f"(sha256 `{sha256_file(drops)}`)" in (run_dir / "evidence.md").read_text()


def test_resume_keeps_every_case_in_the_verdict_and_reruns_a_truncated_notebook(tmp_path, embedded):
    ok = {**embedded.doc["cases"]["checkpoint"], "prompts": FEW}
    tight = {**{k: v for k, v in hf_cases(embedded)["hf-bf16"].items() if k != "calibration"}, "prompts": FEW,
             "bound": 1e-9}
    desc = write_descriptor(tmp_path, embedded, cases={"ok": ok, "tight": tight})
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary")
    assert proc.returncode == 1, proc.stderr
    assert {n: c["status"] for n, c in result_of(run_dir)["cases"].items()} == {"ok": "passed", "tight": "failed"}

    # A full disk cut the passed case's notebook short: resuming that case reruns it, and the failed case,
    # not selected, keeps its verdict.
    notebook = run_dir / "cases" / "ok.ipynb"
    notebook.write_bytes(notebook.read_bytes()[:100])
    proc = parity_kit("gate", desc, "--resume", run_dir, "--case", "ok", "--no-summary")
    assert proc.returncode == 1, proc.stderr
    assert "rerun  ok: its earlier notebook is unreadable (NotJSONError)" in proc.stderr
    assert "reused tight: failed at " in proc.stderr
    result = result_of(run_dir)
    assert result["verdict"] == "failed" and result["missing"] == []
    assert {n: c["status"] for n, c in result["cases"].items()} == {"ok": "passed", "tight": "failed"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["cases"] == ["ok", "tight"] and list(manifest["reused"]) == ["tight"]
    assert "`tight` (hf): **failed** on 3 of 3 prompts" in (run_dir / "evidence.md").read_text()
    assert (run_dir / "cases" / "superseded" / "ok.1.ipynb").is_file()

    # The failed case itself, rerun under a bound it meets: only now does the run pass.
    tight["bound"] = 0.075
    desc = write_descriptor(tmp_path, embedded, name="v2.toml", cases={"ok": ok, "tight": tight})
    proc = parity_kit("gate", desc, "--resume", run_dir, "--case", "tight", "--no-summary")
    assert proc.returncode == 0, proc.stderr
    result = result_of(run_dir)
    assert result["verdict"] == "passed"
    assert {n: c["status"] for n, c in result["cases"].items()} == {"ok": "passed", "tight": "passed"}
