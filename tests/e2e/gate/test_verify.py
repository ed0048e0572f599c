"""`parity-kit verify`: a real gate run, and its `--attach` zip, judged again with no engine reach the verdict the
run recorded; a copy with a failed prompt turned to passed, or one judged against another calibration record, is
refused naming the file and the case, whether or not its manifest was sealed again over the edit."""

from __future__ import annotations

import json
import shutil

import pytest

from kit.core import rundir
from kit.core.jsonio import canonical_bytes, write_json
from support import parity_kit, write_descriptor


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory, embedded):
    tmp = tmp_path_factory.mktemp("verify")
    hf = embedded.doc["cases"]["hf-bf16"]
    # A hand-set bound under the case's clean error: it fails on some prompts, a real failed verdict to keep.
    tight = {k: v for k, v in hf.items() if k not in ("calibration", "power")} | {"bound": 0.002}
    desc = write_descriptor(tmp, embedded, cases={"tight": tight, "hf-bf16": hf})
    run_dir = tmp / "run"
    proc = parity_kit("gate", desc, "--out", run_dir)
    assert proc.returncode == 1, proc.stderr  # tight failed, hf-bf16 passed
    return run_dir


def verified(path) -> tuple[int, list[str]]:
    proc = parity_kit("verify", path)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout.splitlines()


def reseal(run_dir) -> None:
    """What a careful forger does after an edit: seal the manifest again over the edited files."""
    manifest = json.loads((run_dir / rundir.MANIFEST).read_text())
    manifest["files"] = rundir.sealed_files(run_dir, manifest["cases"])
    manifest["root_sha256"] = rundir.root_digest(manifest["files"])
    write_json(run_dir / rundir.MANIFEST, manifest)


def test_a_run_and_its_zip_are_verified_with_the_verdict_and_root_digest_it_recorded(gate_run, tmp_path):
    manifest = json.loads((gate_run / rundir.MANIFEST).read_text())
    root = manifest["root_sha256"]
    assert sorted(manifest["files"]) == ["cases/hf-bf16.evidence.json", "cases/hf-bf16.json",
                                         "cases/tight.evidence.json", "cases/tight.json"]
    code, lines = verified(gate_run)
    assert code == 0 and lines == [f"verified: failed ({gate_run}: 2 cases judged again from their evidence, 4 files "
                                   f"match their digests; root digest {root})"]
    assert f"Root digest: `{root}`" in (gate_run / rundir.EVIDENCE).read_text()
    proc = parity_kit("report", gate_run, "--attach", tmp_path / "attach")
    assert proc.returncode == 0, proc.stderr
    code, lines = verified(tmp_path / "attach" / "run.zip")
    assert code == 0 and lines[0].startswith("verified: failed (") and lines[0].endswith(f"root digest {root})")


def test_a_failed_prompt_turned_to_passed_is_refused_sealed_again_or_not(gate_run, tmp_path):
    copy = shutil.copytree(gate_run, tmp_path / "run")
    path = copy / "cases" / "tight.json"
    doc = json.loads(path.read_text())
    assert doc["status"] == "failed" and doc["failures"]
    first = next(p for p in doc["prompts"] if not p["passed"])
    first["passed"] = True  # the failed prompt passed, and with it the case
    doc.update(status="passed", failures=[], typed_failures=[])
    path.write_text(json.dumps(doc))
    code, lines = verified(copy)
    assert code == 1 and lines[0] == f"not verified: {copy}: 4 problem(s)"
    assert lines[1].startswith("  cases/tight.json: its SHA-256 is ") and lines[1].endswith("changed since the run")
    assert lines[2].startswith("  case tight: recorded 0 failure(s), its evidence gives ")
    assert lines[3] == "  case tight: recorded passed, its evidence judges it failed"
    assert lines[4] == "  result.json: states the verdict failed, the cases give passed"
    reseal(copy)
    code, lines = verified(copy)
    assert code == 1 and lines[1:] == [lines[1], "  case tight: recorded passed, its evidence judges it failed",
                                       "  result.json: states the verdict failed, the cases give passed"]
    assert lines[1].startswith("  case tight: recorded 0 failure(s)")


def test_evidence_judged_against_another_calibration_record_is_refused(gate_run, tmp_path, embedded):
    copy = shutil.copytree(gate_run, tmp_path / "run")
    path = copy / "cases" / "hf-bf16.evidence.json"
    doc = json.loads(path.read_text())
    used = doc["spec"]["calibration"]["sha256"]
    other = next(f for f in embedded.doc["cases"]["hf-bf16"]["calibration"] if used not in f)
    doc["spec"]["calibration"]["sha256"] = other.rsplit("/", 1)[-1].removesuffix(".json")  # the record swapped
    path.write_bytes(canonical_bytes(doc))
    reseal(copy)
    code, lines = verified(copy)
    assert code == 1 and len(lines) == 2
    assert lines[1] == (f"  case hf-bf16: its evidence was judged against calibration "
                        f"{doc['spec']['calibration']['sha256'][:12]}, but the run started on {used[:12]} (its "
                        "manifest's baselines)")
