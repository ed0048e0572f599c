"""`parity-kit verify` against a forger (docs/verify.md): one real gate run (an exact case, a case failing a tight
hand-set bound, a calibrated case), verified as it is and as its `--attach` zip; then copies of it edited the way
someone who wants another verdict would edit them, and sealed again with the kit's own sealing, the root digest
that evidence.md and the summary quote brought up to date too. Each is refused, one line naming the file and the
field; malformed files are one line and exit 3; and no edit, however random, makes verify exit 70."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
from pathlib import Path

import pytest
import tomli_w

from kit.cli import main
from kit.core.records import rundir
from kit.core.records.jsonio import canonical_bytes, write_json
from kit.core.records.results import gate_verdict, read_run, status_counts
from kit.gate.report import attach_zip, evidence_markdown, false_failure_part, result_document
from kit.gate.verify import runzip
from support import parity_kit

pytestmark = pytest.mark.e2e


REPOSITORY = ("fixtures", "goldens", "calibrations")  # what the descriptor names, relative to its folder's parent


@pytest.fixture(scope="module")
def repository(tmp_path_factory, embedded) -> Path:
    """A repository like the kit's own: the embedded descriptor's files, and a descriptor beside them naming them by
    relative paths, with four cases: the exact checkpoint, a calibrated case, one held to a hand-set bound under its
    clean error (it fails on some prompts: a real failed verdict to forge), and one judged against a reference its
    own kernel computes."""
    repo = tmp_path_factory.mktemp("repository")
    for folder in REPOSITORY:
        shutil.copytree(embedded.descriptor.parent.parent / folder, repo / folder)
    cases = embedded.doc["cases"]
    tight = {k: v for k, v in cases["hf-bf16"].items() if k not in ("calibration", "power")} | {"bound": 0.002}
    doc = {k: v for k, v in embedded.doc.items() if k not in ("baselines", "cases")}
    # Compared bit for bit with the same model and options computed in its own kernel (the reference the run keeps).
    reference = {"backend": "hf", "dtype": "float32", "buckets": [128], "reference": {"options": {"dtype": "float32"}}}
    doc["cases"] = {"checkpoint": cases["checkpoint"], "tight": tight, "hf-bf16": cases["hf-bf16"],
                    "self-reference": reference}
    (repo / "descriptors").mkdir()
    (repo / "descriptors" / "verify.toml").write_text(tomli_w.dumps(doc))
    return repo


@pytest.fixture(scope="module")
def gate_run(repository, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("verify") / "run"
    proc = parity_kit("gate", repository / "descriptors" / "verify.toml", "--out", run_dir)
    assert proc.returncode == 1, proc.stderr  # tight failed; the others passed
    return run_dir


@pytest.fixture(autouse=True)
def in_repository(repository, monkeypatch):
    """verify runs from the repository whose descriptor judges the run (never one the run names elsewhere)."""
    monkeypatch.chdir(repository)


def verified(capsys, path, *more: str) -> tuple[int, list[str]]:
    code = main(["verify", str(path), *more])
    out, err = capsys.readouterr()
    assert code != 70 and "Traceback" not in err, err
    return code, out.splitlines() if code != 3 else [err.strip()]


def copy(gate_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(gate_run, tmp_path / "run"))


def edit(path: Path, change) -> None:
    """``change`` applied to a JSON file of the run, written as the kit writes it (evidence and an in-kernel reference
    as canonical JSON)."""
    doc = json.loads(path.read_text())
    change(doc)
    if path.name.endswith((rundir.CASE_EVIDENCE, rundir.CASE_REFERENCE)):
        path.write_bytes(canonical_bytes(doc))
    else:
        write_json(path, doc)


def reseal(run_dir: Path, quotes: bool = True) -> str:
    """What a careful forger does after an edit: seal the run again with the kit's own sealing and, with ``quotes``,
    put the new root digest where evidence.md and the summary quoted the old one. Returns the new root."""
    manifest = json.loads((run_dir / rundir.MANIFEST).read_text())
    old = manifest["root_sha256"]
    manifest = rundir.sealed(run_dir, {k: v for k, v in manifest.items() if k not in rundir.SEAL_KEYS})
    write_json(run_dir / rundir.MANIFEST, manifest)
    if quotes:
        for name in (rundir.EVIDENCE, rundir.SUMMARY_HTML, rundir.SUMMARY_NOTEBOOK):
            path = run_dir / name
            path.write_text(path.read_text().replace(old, manifest["root_sha256"]))
    return manifest["root_sha256"]


def claim(run_dir: Path, case: str, status: str, **fields) -> None:
    """Record ``status`` for ``case`` (with ``fields``) in its result and result.json, and the verdict that follows,
    as a forger who wants the run to say so does."""
    edit(rundir.case_file(run_dir / rundir.CASES, case), lambda d: d.update(status=status, **fields))
    view = read_run(run_dir)

    def restate(doc):
        doc["cases"][case].update(status=status, **fields)
        doc["verdict"] = gate_verdict(view.expected, view.results)

    edit(run_dir / rundir.RESULT, restate)


def passed_over(doc: dict) -> None:
    """A failed case's result as a pass: every prompt passed, no failure left."""
    for p in doc["prompts"]:
        p.update(passed=True, failures=[], typed_failures=[])
    doc.update(status="passed", failures=[], typed_failures=[])


def evidence(run_dir: Path, case: str) -> Path:
    return rundir.case_file(run_dir / rundir.CASES, case, rundir.CASE_EVIDENCE)


def test_a_run_and_its_zip_are_verified_with_the_verdict_and_root_digest_it_recorded(repository, gate_run, tmp_path,
                                                                                     capsys):
    manifest = json.loads((gate_run / rundir.MANIFEST).read_text())
    root = manifest["root_sha256"]
    assert sorted(manifest["files"]) == sorted(
        [f"cases/{c}{s}" for c in ("checkpoint", "hf-bf16", "self-reference", "tight")
         for s in (rundir.CASE_EVIDENCE, rundir.CASE_RESULT)] + ["cases/self-reference.reference.json",
                                                                 rundir.MANIFEST])
    assert manifest["files"][rundir.MANIFEST] == rundir.manifest_digest(manifest)
    code, lines = verified(capsys, gate_run)
    assert code == 0 and lines[0] == (f"verified: failed ({gate_run}: 4 cases judged again from their evidence "
                                      "against descriptors/verify.toml, 10 files match their digests; root digest "
                                      f"{root})")
    # Each case says the hardware it was judged for, as its own result records it, its bounds and its drift test.
    cls = manifest["hardware"]["hf-bf16"]["accelerator"]["name"]
    assert lines[-1] == "signature: unsigned"
    said = {line.split(":")[0].strip(): line for line in lines[1:-1]}
    assert sorted(said) == ["checkpoint", "hf-bf16", "self-reference", "tight"], lines
    assert all(f"judged for {cls} (device cpu, cpu_capability " in line for line in said.values()), lines
    assert said["hf-bf16"].endswith("; drift test ran") and "its own calibrated bounds (record " in said["hf-bf16"]
    assert said["tight"].endswith("its own hand-set bounds; no drift test")
    assert said["checkpoint"].endswith("exact, no bounds; no drift test")
    assert f"Root digest: `{root}`" in (gate_run / rundir.EVIDENCE).read_text()
    # A reviewer's zip and checkout: the files the run names are in other folders, and hold the same bytes.
    zipped = attach_zip(gate_run, tmp_path / "attach")
    checkout = Path(shutil.copytree(repository, tmp_path / "checkout"))
    descriptor = str(checkout / "descriptors" / "verify.toml")
    code, lines = verified(capsys, zipped, "--descriptor", descriptor, "--root", root)
    assert code == 0 and lines[0].startswith("verified: failed (") and lines[0].endswith(f"root digest {root})")


def test_a_failed_case_with_its_observations_emptied_is_refused_as_a_run_and_as_a_zip(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    edit(evidence(run, "tight"), lambda d: d.update(observations=[]))
    edit(rundir.case_file(run / rundir.CASES, "tight"), passed_over)
    claim(run, "tight", "passed")
    reseal(run)
    said = "  cases/tight.evidence.json: observations: missing "
    code, lines = verified(capsys, run)
    assert code == 1 and any(line.startswith(said) for line in lines), lines
    code, lines = verified(capsys, attach_zip(run, tmp_path / "attach"))
    assert code == 1 and any(line.startswith(said) for line in lines), lines


def test_a_semantic_case_with_no_observations_is_one_line_not_a_crash_of_its_drift_test(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    edit(evidence(run, "hf-bf16"), lambda d: d.update(observations=[], runs={}))
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 1 and lines[1:] == ["  cases/hf-bf16.evidence.json: observations: missing chat-sharegpt-00, "
                                       "chat-sharegpt-01, chat-sharegpt-02, ... (+61)"], lines


def _first_top(d):
    first = sorted(d["golden"]["tops"])[0]
    d["golden"]["tops"][first][0][1] -= 0.1


@pytest.mark.parametrize("case, change, said", [
    ("hf-bf16", lambda d: d["spec"].update(bucket_bounds={k: v * 5 for k, v in d["spec"]["bucket_bounds"].items()}),
     "  cases/hf-bf16.evidence.json: spec.bucket_bounds."),
    ("tight", lambda d: d["spec"].update(bound=0.5),
     "  cases/tight.evidence.json: spec.bound is 0.5; the descriptor and the files it names give 0.002"),
    ("checkpoint", lambda d: d.update(exact=False),
     "  cases/checkpoint.evidence.json: exact is false; the descriptor and the files it names give true"),
    ("hf-bf16", _first_top, "  cases/hf-bf16.evidence.json: golden.tops.chat-sharegpt-00[0][1] is "),
    ("hf-bf16", lambda d: d["spec"].update(calibration=None),
     "  cases/hf-bf16.evidence.json: spec.calibration is null; the descriptor and the files it names give {"),
    ("checkpoint", lambda d: d["spec"].update(reference={"model": "model", "model_digest": "0" * 64, "options": {}}),
     "  cases/checkpoint.evidence.json: spec.reference is {"),
], ids=["bucket-bounds", "bound", "exact", "golden-tops", "no-calibration", "a-reference"])
def test_a_field_of_the_evidence_is_never_believed_over_what_it_names(gate_run, tmp_path, capsys, case, change, said):
    run = copy(gate_run, tmp_path)
    edit(evidence(run, case), change)
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 1 and any(line.startswith(said) for line in lines), lines


def test_a_failure_passed_under_bounds_the_evidence_raised_is_refused_for_the_bound_and_the_status(gate_run, tmp_path,
                                                                                                   capsys):
    run = copy(gate_run, tmp_path)
    edit(evidence(run, "tight"), lambda d: d["spec"].update(bound=0.5))
    edit(rundir.case_file(run / rundir.CASES, "tight"), passed_over)
    claim(run, "tight", "passed")
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 1
    assert "  cases/tight.json: status is \"passed\"; judged again from its evidence: \"failed\"" in lines
    assert "  result.json: states the verdict \"passed\", the cases give failed" in lines


def test_the_baselines_the_manifest_names_are_held_to_the_descriptor_and_cannot_be_left_out(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)

    def other_record(m):
        row = next(r for r in m["baselines"] if r["case"] == "hf-bf16" and r["kind"] == "calibration")
        row["sha256"] = "0" * 64

    edit(run / rundir.MANIFEST, other_record)
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 1 and lines[1].startswith("  manifest.json: baselines: case hf-bf16's calibration is \"0000"), lines
    edit(run / rundir.MANIFEST, lambda m: m.pop("baselines"))
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 3 and lines == [f"parity-kit: bad input: {run}/manifest.json: baselines: expected a list, got None"]


def test_an_in_kernel_reference_is_the_runs_own_and_held_to_the_model_the_descriptor_pins(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    reference = rundir.case_file(run / rundir.CASES, "self-reference", rundir.CASE_REFERENCE)
    pinned = json.loads(reference.read_text())["model_digest"]
    edit(reference, lambda d: d.update(model_digest="0" * 64))  # a reference computed from some other model
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 1 and lines[1:] == [f"  cases/self-reference.reference.json: model_digest is \"{'0' * 64}\"; the "
                                       f"case's reference gives \"{pinned}\""], lines
    reference.unlink()
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 1 and lines[1:] == ["  cases/self-reference.evidence.json: judged against its in-kernel reference, "
                                       "which is not in the run (cases/self-reference.reference.json)"], lines


@pytest.mark.parametrize("case, status, fields, said", [
    ("tight", "borrowed-bounds", {}, "  cases/tight.json: status is \"borrowed-bounds\"; judged again from its "
                                     "evidence: \"failed\""),
    ("tight", "no-baseline", {}, "  cases/tight.json: status is no-baseline, but the descriptor resolves a golden for "
                                 "the case on the hardware the run recorded (cpu (x86-64-"),
    ("tight", "error", {"error_kind": "case-error", "error": "kernel died"},
     "  cases/tight.json: status is error, but its evidence judges the case failed, and a failed verdict its kernel "
     "wrote stands whatever ended the case"),
    ("tight", "error", {"error_kind": None}, "  cases/tight.json: status is error with error kind None, which is not a "
                                             "kind of error (kit.core.outcomes)"),
    ("hf-bf16", "inconclusive", {"error": "it detects faults only from 9x"},
     "  cases/hf-bf16.json: status is \"inconclusive\"; judged again from its evidence: \"passed\""),
], ids=["borrowed", "no-baseline", "error", "error-without-kind", "inconclusive"])
def test_a_status_holds_only_by_its_rule(gate_run, tmp_path, capsys, case, status, fields, said):
    run = copy(gate_run, tmp_path)
    claim(run, case, status, **fields)
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 1 and any(line.startswith(said) for line in lines), lines


def test_a_case_dropped_from_the_manifest_is_missed_where_the_run_still_names_it(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    edit(run / rundir.MANIFEST, lambda m: m.update(cases=["checkpoint", "hf-bf16", "self-reference"]))

    def without_tight(doc):
        doc["cases"].pop("tight")
        doc.update(verdict="passed", counts={**doc["counts"], "failed": 0})

    edit(run / rundir.RESULT, without_tight)
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 1
    command = " ".join(json.loads((run / rundir.MANIFEST).read_text())["command"])
    assert lines[1:4] == [f"  manifest.json: cases: lacks tight, which the descriptor defines and the run's command "
                          f"({command}) does not leave out",
                          "  manifest.json: kernels: names case tight, which its cases do not list",
                          "  manifest.json: baselines: names case tight, which its cases do not list"]
    assert "  cases/tight.json: a file of no case the manifest lists" in lines


def test_the_root_digest_is_compared_where_it_is_quoted_and_where_the_reader_was_given_it(gate_run, tmp_path, capsys):
    original = json.loads((gate_run / rundir.MANIFEST).read_text())["root_sha256"]
    for careful in (False, True):
        run = Path(shutil.copytree(gate_run, tmp_path / f"run-{careful}"))
        # A forgery no judging again can tell: a sealed file edited where it changes no verdict (a fabricated
        # observation judged again by the forger would be the same).
        edit(rundir.case_file(run / rundir.CASES, "tight"), lambda d: d.update(duration_s=1.0))
        edit(run / rundir.RESULT, lambda d: d["cases"]["tight"].update(duration_s=1.0))
        root = reseal(run, quotes=careful)
    code, lines = verified(capsys, tmp_path / "run-False")  # a forger who forgot the quotes
    assert code == 1 and lines[1:] == [
        f"  evidence.md: quotes the root digest {original}; the run's is {root}",
        f"  summary.html: does not quote the run's root digest {root}",
        f"  summary.ipynb: does not quote the run's root digest {root}"]
    # And one who did not: the digest quoted where the run was first reported still differs.
    code, lines = verified(capsys, run, "--root", original)
    assert code == 1 and lines[1:] == [f"  --root {original}: the run's root digest is {root}: this is not the run "
                                       "that was reported"]


def test_a_manifest_edited_without_its_seal_is_refused(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    edit(run / rundir.MANIFEST, lambda m: m["hardware"]["hf-bf16"]["accelerator"].update(name="NVIDIA H200"))
    code, lines = verified(capsys, run)
    assert code == 1 and lines[1].startswith("  manifest.json: its content less its seal SHA-256 is ")
    assert lines[1].endswith("changed since the run")


@pytest.mark.parametrize("change, said", [
    (lambda d: d["observations"][0].pop("case_id"), "observations[0].case_id: missing"),
    (lambda d: d["spec"].update(bound=[0.5]), "spec.bound: expected a number or null, got [0.5]"),
    (lambda d: d["observations"][0].update(top_logprobs=[]), "observations[0].top_logprobs: expected at least one "
                                                             "entry, got []"),
    (lambda d: d["spec"].update(bound="0.5"), "spec.bound: expected a number or null, got '0.5'"),
], ids=["prompt-without-id", "list-for-a-bound", "empty-top", "string-bound"])
def test_malformed_evidence_is_one_line_and_bad_input(gate_run, tmp_path, capsys, change, said):
    run = copy(gate_run, tmp_path)
    edit(evidence(run, "tight"), change)
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 3 and lines == ["parity-kit: bad input: cases/tight.evidence.json: not the evidence of a case "
                                   f"(parity-kit-case-evidence/1): {said}"]


VALUES = [None, "x", "", -1, 0, 1.5, 1e308, [], {}, True, "nan", [[1, "x"]], [None], {"a": 1}, 2 ** 70]


def _mutated(doc, rng: random.Random):
    """``doc`` with one value somewhere in it replaced by another of any type, or its key or item deleted."""
    places, stack = [], [()]
    while stack:
        path = stack.pop()
        node = doc
        for k in path:
            node = node[k]
        if path:
            places.append(path)
        if isinstance(node, dict):
            stack += [path + (k,) for k in node]
        elif isinstance(node, list):
            stack += [path + (i,) for i in range(len(node))]
    if not places:
        return rng.choice(VALUES)
    path = rng.choice(sorted(places, key=str))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if rng.random() < 0.3:
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(VALUES)
    return doc


def test_no_edit_of_a_runs_json_makes_verify_exit_70(gate_run, tmp_path, capsys):
    rng = random.Random(52)
    files = sorted(p.relative_to(gate_run) for p in gate_run.rglob("*.json"))
    for n in range(30):
        run = Path(shutil.copytree(gate_run, tmp_path / f"run{n}"))
        path = run / rng.choice(files)
        data = path.read_bytes()
        if rng.random() < 0.25:
            path.write_bytes(data[: rng.randrange(len(data))])
        else:
            path.write_bytes(canonical_bytes(_mutated(json.loads(data), rng)))
        if rng.random() < 0.5:
            try:
                reseal(run, quotes=False)
            except (ValueError, KeyError, TypeError, AttributeError):
                pass  # a manifest the forger broke cannot be sealed again
        code, lines = verified(capsys, run)
        assert code in (0, 1, 3), (path, lines)
        assert code != 3 or len(lines) == 1
        shutil.rmtree(run)


# --- The claims a run makes about itself are bound to its facts -------------------------------------------------


def _hardware(run: Path, case: str, name: str | None = None, runtime: str | None = None) -> None:
    """The manifest's claim of the hardware ``case`` was judged for, as a forger rewrites it."""
    def change(m):
        if name is not None:
            m["hardware"][case]["accelerator"]["name"] = name
        if runtime is not None:
            m["hardware"][case]["runtime"] = runtime

    edit(run / rundir.MANIFEST, change)
    reseal(run)


def _other_level(run: Path) -> str:
    """The other CPU class the embedded descriptor lists a record of (x86-64-v3 or -v4), whichever this host is not."""
    mine = json.loads((run / rundir.MANIFEST).read_text())["hardware"]["hf-bf16"]["accelerator"]["name"]
    return "cpu (x86-64-v3)" if mine == "cpu (x86-64-v4)" else "cpu (x86-64-v4)"


@pytest.mark.parametrize("claimed, said", [
    (_other_level, "  manifest.json: hardware.hf-bf16.accelerator.name is \"cpu (x86-64-v"),
    (lambda run: "cpu (x86-64-v2)", "  manifest.json: hardware.hf-bf16.accelerator.name is \"cpu (x86-64-v2)\"; its "
                                    "result records device cpu, cpu_capability "),
    (lambda run: "NVIDIA H100 80GB HBM3", "  manifest.json: hardware.hf-bf16.accelerator.name is \"NVIDIA H100 80GB "
                                          "HBM3\", but the case's options put it on cpu: a card's records never "
                                          "judge it"),
], ids=["the-other-listed-class", "a-class-with-no-record", "a-card-for-a-cpu-case"])
def test_a_class_the_cases_result_contradicts_is_refused(gate_run, tmp_path, capsys, claimed, said):
    run = copy(gate_run, tmp_path)
    _hardware(run, "hf-bf16", name=claimed(run))
    code, lines = verified(capsys, run)
    assert code == 1 and any(line.startswith(said) for line in lines), lines


@pytest.mark.parametrize("name", ["cpu (x86-64-v3) ", "\u0441pu (x86-64-v3)", "cpu (x86-64-v3)\x1b[2K"],
                         ids=["trailing-space", "cyrillic", "escape"])
def test_a_class_the_kit_never_names_is_one_line(gate_run, tmp_path, capsys, name):
    run = copy(gate_run, tmp_path)
    _hardware(run, "hf-bf16", name=name)
    code, lines = verified(capsys, run)
    assert code == 3 and len(lines) == 1 and "hardware.hf-bf16.accelerator.name is " in lines[0], lines
    assert "not a class or card the kit names" in lines[0] and "\x1b" not in lines[0]


def test_a_runtime_key_no_host_computes_cannot_make_an_exact_case_no_baseline(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    claim(run, "checkpoint", "no-baseline")
    _hardware(run, "checkpoint", runtime="torch-cpu nowhere")
    code, lines = verified(capsys, run)
    assert code == 1
    assert ("  manifest.json: hardware.checkpoint.runtime is \"torch-cpu nowhere\": a case computed in float64 has "
            "the runtime \"portable: float64 rounded to float32\"") in lines, lines
    assert any(line.startswith("  cases/checkpoint.json: status is no-baseline, but the descriptor resolves a golden")
               for line in lines), lines


# --- The descriptor is the repository's -------------------------------------------------------------------------


def test_a_descriptor_the_run_brings_is_never_its_yardstick(repository, gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    inside = run / "verify.toml"  # the run's own copy (it could hold its own goldens and records beside it)
    shutil.copy(repository / "descriptors" / "verify.toml", inside)
    edit(run / rundir.MANIFEST, lambda m: m.update(descriptor=str(inside)))
    reseal(run)
    code, lines = verified(capsys, run)
    assert code == 0 and lines[0].startswith("verified: failed (") and "against descriptors/verify.toml" in lines[0]
    assert lines[-2] == (f"  note: the run names the descriptor {inside}, inside the run itself: judged against this "
                         "repository's descriptors/verify.toml"), lines
    # From a folder that is not the run's repository, nothing of the run stands in for the descriptor.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".git").mkdir()
    os.chdir(elsewhere)
    code, lines = verified(capsys, gate_run)
    assert code == 3 and "outside this repository" in lines[0] and "--descriptor" in lines[0], lines


# --- A run of some of the descriptor's cases says so --------------------------------------------------------------


def test_a_run_of_some_cases_verifies_saying_which_it_left_out(gate_run, tmp_path, capsys):
    """The forger drops the failing case everywhere, asks for each other case with --case, and writes the result,
    evidence.md and summary the kit would write for that run: it verifies, as a run of 3 of the 4 cases."""
    run = copy(gate_run, tmp_path)
    kept = ["checkpoint", "hf-bf16", "self-reference"]
    for path in (run / rundir.CASES).glob("tight.*"):
        path.unlink()

    def without_tight(m):
        m["cases"] = kept
        m["command"] = [*m["command"], *(w for c in kept for w in ("--case", c))]
        for key in ("kernels", "hardware"):
            m[key].pop("tight")
        m["baselines"] = [r for r in m["baselines"] if r["case"] != "tight"]

    edit(run / rundir.MANIFEST, without_tight)
    reseal(run)
    view = read_run(run)
    counts = status_counts(kept, view.results)
    doc = json.loads((run / rundir.RESULT).read_text())
    write_json(run / rundir.RESULT, {**result_document(view.manifest["name"], "passed", counts, doc["duration_s"],
                                                       kept, view.results), **false_failure_part(view.manifest)})
    (run / rundir.EVIDENCE).write_text(evidence_markdown(view.manifest, "passed", counts, doc["duration_s"],
                                                         view.results, None, run))
    for name in (rundir.SUMMARY_HTML, rundir.SUMMARY_NOTEBOOK):
        (run / name).unlink()  # as a run made with --no-summary
    code, lines = verified(capsys, run)
    assert code == 0 and lines[0].startswith("verified: passed, 3 of 4 cases (left out by its command: tight) ("), lines
    code, lines = verified(capsys, run, "--require-all")
    assert code == 1 and lines[1:] == ["  manifest.json: command: leaves out tight of the descriptor's 4 cases; "
                                       "--require-all asks for every one"], lines


# --- Reads that cannot hang or blow up, names that cannot paint the terminal -------------------------------------


def _hangs_guard(seconds: int = 120):
    """Fail instead of hanging, should a read ever block."""
    def stop(*_):
        raise AssertionError(f"verify still reading after {seconds} s")
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)


@pytest.mark.parametrize("name", [rundir.EVIDENCE, rundir.RESULT, rundir.SUMMARY_HTML, "cases/tight.json"])
def test_a_named_pipe_in_place_of_a_file_is_refused_without_opening_it(gate_run, tmp_path, capsys, name):
    run = copy(gate_run, tmp_path)
    (run / name).unlink()
    os.mkfifo(run / name)
    _hangs_guard()
    try:
        code, lines = verified(capsys, run)
    finally:
        signal.alarm(0)
    assert code == 3 and lines == [f"parity-kit: bad input: {run}/{name}: not a regular file (a named pipe); a run "
                                   "holds files and folders only; nothing of it read"], lines


def test_a_file_past_the_size_limit_is_refused_unread_in_a_folder_and_in_a_zip(gate_run, tmp_path, capsys,
                                                                               monkeypatch):
    run = copy(gate_run, tmp_path)
    with open(run / rundir.EVIDENCE, "r+b") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB that take no disk
    code, lines = verified(capsys, run)
    assert code == 3 and lines[0].startswith(f"parity-kit: bad input: {run}/{rundir.EVIDENCE}: {3 << 30} bytes, more "
                                             "than a run's file takes"), lines
    monkeypatch.setattr(runzip, "MAX_FILE", 1000)  # a zip's member is held to the same limit, by its declared size
    code, lines = verified(capsys, attach_zip(gate_run, tmp_path / "attach"))
    assert code == 3 and "declares" in lines[0] and "more than a run's file takes (1000); nothing extracted" in lines[0]


def test_a_link_out_of_the_run_is_refused(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    (run / rundir.EVIDENCE).unlink()
    (run / rundir.EVIDENCE).symlink_to("/dev/zero")
    code, lines = verified(capsys, run)
    assert code == 3 and lines == [f"parity-kit: bad input: {run}/{rundir.EVIDENCE}: a link out of the run "
                                   "(/dev/zero); nothing of the run read"], lines


def test_names_from_the_run_reach_the_terminal_escaped(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    (run / rundir.CASES / "x\x1b[1A\x1b[2K\rverified: passed").write_text("")  # a file name the run chose
    code, lines = verified(capsys, run)
    assert code == 1 and not any("\x1b" in line or "\r" in line for line in lines), lines
    assert "  cases/x\\x1b[1A\\x1b[2K\\x0dverified: passed: a file of no case the manifest lists" in lines, lines


# --- What people read is held to the verdict ----------------------------------------------------------------------


@pytest.mark.parametrize("name, change, said", [
    (rundir.EVIDENCE, lambda t: t.replace(": failed.**", ": passed.**", 1), "  evidence.md: line 1 is "),
    (rundir.EVIDENCE, lambda t: t.replace("**failed** on 43", "**failed** on 3", 1), "  evidence.md: line "),
    (rundir.SUMMARY_HTML, lambda t: t.replace(">FAILED</span>", ">PASSED</span>"),
     "  summary.html: its gate banner says \"PASSED\"; the verdict judged again is failed"),
    (rundir.SUMMARY_HTML, lambda t: t.replace(": failed — parity gate", ": passed — parity gate"),
     "  summary.html: its title is "),
    (rundir.SUMMARY_NOTEBOOK, lambda t: t.replace(">FAILED</span>", ">PASSED</span>"),
     "  summary.ipynb: its gate banner says \"PASSED\""),
], ids=["evidence-verdict", "evidence-figure", "summary-banner", "summary-title", "notebook-banner"])
def test_what_people_read_says_the_verdict_judged_again(gate_run, tmp_path, capsys, name, change, said):
    run = copy(gate_run, tmp_path)
    text = (run / name).read_text()
    assert change(text) != text  # the forgery changes something
    (run / name).write_text(change(text))
    code, lines = verified(capsys, run)
    assert code == 1 and any(line.startswith(said) for line in lines), lines


def test_the_figures_result_json_gives_the_console_and_history_are_the_sealed_results(gate_run, tmp_path, capsys):
    run = copy(gate_run, tmp_path)
    edit(run / rundir.RESULT, lambda d: d["cases"]["tight"].update(max_probability_error=0.0001))
    sealed = json.loads(rundir.case_file(run / rundir.CASES, "tight").read_text())["max_probability_error"]
    code, lines = verified(capsys, run)
    assert code == 1 and lines[1:] == ["  result.json: cases.tight.max_probability_error is 0.0001; its sealed result "
                                       f"(cases/tight.json) gives {sealed}"], lines
