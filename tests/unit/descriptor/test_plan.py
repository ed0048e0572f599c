"""A descriptor resolves once into an immutable plan, and the plan alone serves the preflight and the executor.

The plan is what makes a run's decisions happen in one place (docs/architecture.md, The flow): these tests hold
it to being a value (nothing in it can be assigned), to carrying what the messages need (each case's locations,
resources, retries, records), to being enough (a run is checked, claimed and executed with every way back into
the descriptor closed), and to being the only way in (no module outside kit/descriptor reads the document).
"""

from __future__ import annotations

import dataclasses
import gc
import re
import weakref
from pathlib import Path

import pytest
from pydantic import ValidationError

from kit.core.records.records import CaseResult, Status
from kit.descriptor.baselines import Baselines
from kit.descriptor.load import LoadedDescriptor, load_descriptor
from kit.descriptor.plan import resolve
from kit.gate import executor
from kit.gate.executors.interface import RunProgress
from support import ROOT, write_descriptor

pytestmark = pytest.mark.unit


def _descriptor(tmp_path, embedded) -> LoadedDescriptor:
    cases = {"hf-bf16": {**embedded.doc["cases"]["hf-bf16"], "retries": 3, "resources": {"num_cpus": 2.0}},
             "checkpoint": embedded.doc["cases"]["checkpoint"]}
    return load_descriptor(write_descriptor(tmp_path, embedded, cases=cases))


def test_nothing_in_a_plan_can_be_assigned(embedded):
    plan = resolve(load_descriptor(embedded.descriptor), ["hf-bf16"])
    case = plan.cases["hf-bf16"]
    for target, attr in ((plan, "release"), (plan, "cases"), (plan.outline, "name"), (case, "retries"),
                         (case, "records"), (case.where, "resources"), (case.spec, "bound"), (plan.model, "digest")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(target, attr, None)
    for mapping in (plan.cases, plan.goldens, plan.outline.cases, plan.outline.models, plan.outline.releases):
        with pytest.raises(TypeError):
            mapping["another"] = None  # type: ignore[index]
    with pytest.raises(ValidationError, match="frozen"):  # the schema's models are frozen too
        case.resources.num_gpus = 1  # type: ignore[misc]
    assert isinstance(plan.goldens["semantic"].files, tuple) and isinstance(case.records, tuple)


def test_a_plan_holds_each_cases_locations_resources_and_records(tmp_path, embedded):
    desc = _descriptor(tmp_path, embedded)
    plan = resolve(desc, ["hf-bf16", "checkpoint"])
    assert list(plan.cases) == ["hf-bf16", "checkpoint"] and [s.name for s in plan.specs] == list(plan.cases)
    hf = plan.cases["hf-bf16"]
    assert hf.resources.num_cpus == 2.0 and hf.retries == 3
    assert plan.cases["checkpoint"].retries == desc.doc.defaults.retries
    for key in ("resources", "decode", "reference", "repeat_prompts", "backend", "golden"):
        assert getattr(hf.where, key) == desc.where("cases", "hf-bf16", key)
    assert hf.where.case == desc.where("cases", "hf-bf16")
    assert hf.where.calibration == desc.calibration_where("hf-bf16")
    assert hf.where.model_digest == desc.where("model", "digest")
    # Every record the case lists, the one this host chose among them.
    listed = embedded.doc["cases"]["hf-bf16"]["calibration"]
    assert len(hf.records) == len(listed) >= 1
    assert hf.spec.calibration is not None and hf.spec.calibration["sha256"] in {r.sha256 for r in hf.records}
    assert plan.cases["checkpoint"].records == ()
    assert plan.name == desc.name and plan.path == desc.path and plan.model.path == desc.resolve(desc.doc.model.path)
    assert set(plan.goldens) == set(desc.doc.goldens) and plan.release is None


def test_a_plan_names_its_release_and_where_its_kernel_is_named(tmp_path, embedded):
    backends = {"hf": {"kernel": "parity-kit", "version": "1"}}
    desc = load_descriptor(write_descriptor(tmp_path, embedded, cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]},
                                            releases={"current": {"description": "pin", "backends": backends}}))
    plan = resolve(desc, None, "current")
    assert plan.release is not None and plan.release.identity() == {
        "name": "current", "description": "pin",
        "backends": {"hf": desc.doc.releases["current"].backends["hf"].identity()}}
    assert plan.cases["hf-bf16"].release_kernel_where == desc.where("releases", "current", "backends", "hf", "kernel")


def test_a_plan_resolved_once_serves_preflight_and_executor_without_the_descriptor(tmp_path, embedded, monkeypatch):
    desc = _descriptor(tmp_path / "d", embedded)
    plan = resolve(desc, ["hf-bf16"])
    gone = weakref.ref(desc)
    del desc
    gc.collect()
    assert gone() is None  # the plan keeps no reference to the descriptor

    def closed(*args, **kwargs):
        raise AssertionError("the run read the descriptor after its plan was resolved")

    for name in ("where", "resources", "retries", "kernel", "case_specs", "calibration_where", "model_where",
                 "model_ref", "release", "resolve"):
        monkeypatch.setattr(LoadedDescriptor, name, closed)
    monkeypatch.setattr(LoadedDescriptor, "baselines", property(closed))
    for name in ("golden_files", "calibration_records", "case_golden", "calibration", "reference", "power",
                 "lineage"):
        monkeypatch.setattr(Baselines, name, closed)
    monkeypatch.setattr("kit.descriptor.load.load_descriptor", closed)

    checked = executor.check_plan(plan)
    run = executor.claim_run(checked, tmp_path / "run", command=["test"])
    try:
        seen = []

        def execute(spec, cases_dir, on_start, expected=None, gpus=()):
            seen.append(spec.name)
            return CaseResult(case=spec.name, backend=spec.backend, status=Status.PASSED)

        monkeypatch.setattr(executor, "execute_guarded", execute)
        progress = RunProgress(run)
        ended = []  # what a progress report is told of each case: its name and its result
        executor.run_cases(progress, on_done=lambda name, result: ended.append((name, result.status)))
        run = progress.finished()
        doc = executor.write_manifest(run, ["test"])
    finally:
        assert run.lock is not None
        run.lock.release()
    assert seen == ["hf-bf16"] and run.results["hf-bf16"].status == Status.PASSED
    assert ended == [("hf-bf16", Status.PASSED)]
    assert doc["name"] == plan.name and doc["descriptor_sha256"] == plan.sha256
    assert doc["model"] == str(plan.model.path) and executor.gpus_asked(plan.cases[plan.specs[0].name]) == 0


# What reading the document looks like: its `.doc`, or a descriptor's cases, locations and resolution methods (a
# variable's, not a module path's: kit.descriptor.baselines is the module that reads them).
DOCUMENT = re.compile(r"\.doc\b|\.case_specs\(|(?<![\w.])(?:desc|descriptor|loaded|derived|checked)\."
                      r"(?:cases|where|resources|retries|kernel|baselines|golden_files|"
                      r"calibration_records|calibration_where|case_golden|model_ref|model_where|doc)\b")


def document_reads(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if "descriptor" in path.relative_to(root).parts[:1]:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if DOCUMENT.search(line.split("#", 1)[0]):
                found.append(f"{path.relative_to(root.parent)}:{n}: {line.strip()}")
    return found


def test_no_module_outside_the_descriptor_package_reads_the_document():
    assert document_reads(ROOT / "kit") == []


def test_the_document_check_finds_a_planted_read(tmp_path):
    kit = tmp_path / "kit"
    (kit / "descriptor").mkdir(parents=True)
    (kit / "descriptor" / "load.py").write_text("x = desc.doc.cases\n")  # its own package may
    (kit / "gate").mkdir()
    (kit / "gate" / "planted.py").write_text("a = run.descriptor.doc.model\nb = desc.cases['x']\nc = 1  # desc.doc\n"
                                             "from kit.descriptor.baselines import lineage_problems\n")
    assert document_reads(kit) == ["kit/gate/planted.py:1: a = run.descriptor.doc.model",
                                   "kit/gate/planted.py:2: b = desc.cases['x']"]
