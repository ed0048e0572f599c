"""The local executor's preflight refuses GPU requests it cannot meet, and a case's kernel sees its GPUs alone."""

from __future__ import annotations

import pytest

from kit.core.records import contract
from kit.core.errors import BadInput
from kit.descriptor.load import load_descriptor
from kit.gate import executor
from kit.run.devices import Gpu
from kit.run.notebook import NotebookOutcome
from support import write_descriptor

TWO = "0, GPU-aaaa1111, NVIDIA H200, 1 MiB, 143771 MiB\n1, GPU-bbbb2222, NVIDIA H200, 0 MiB, 143771 MiB"


def descriptor(tmp_path, embedded, **resources):
    cases = {"hf-bf16": {**embedded.doc["cases"]["hf-bf16"], "resources": resources},
             "checkpoint": embedded.doc["cases"]["checkpoint"]}
    return load_descriptor(write_descriptor(tmp_path, embedded, cases=cases))


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setenv(contract.FAKE_GPUS_ENV, TWO)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_more_gpus_than_the_node_has_is_refused_before_anything_runs(tmp_path, embedded, two_gpus):
    desc = descriptor(tmp_path, embedded, num_gpus=3)
    with pytest.raises(BadInput) as refused:
        executor.check_run(desc)
    assert str(refused.value) == (f"{desc.where('cases', 'hf-bf16', 'resources')}: case hf-bf16 asks for 3 GPU(s) "
                                  "(num_gpus); this node has 2: GPU 0 (NVIDIA H200), GPU 1 (NVIDIA H200)")


def test_a_fraction_of_a_gpu_is_refused_by_the_local_executor(tmp_path, embedded, two_gpus):
    with pytest.raises(BadInput, match=r"case hf-bf16 asks for num_gpus = 0.5; the local executor gives each case "
                                       r"whole GPUs \(ask for 1, or share a GPU by fraction with `--executor ray`\)$"):
        executor.check_run(descriptor(tmp_path, embedded, num_gpus=0.5))


def test_cases_that_fit_are_checked_with_the_nodes_gpus_and_none_are_listed_when_none_is_asked(
        tmp_path, embedded, two_gpus, monkeypatch):
    checked = executor.check_run(descriptor(tmp_path / "a", embedded, num_gpus=2))
    assert [g.index for g in checked.gpus.gpus] == [0, 1]
    monkeypatch.setenv(contract.FAKE_GPUS_ENV, "not a row")  # not read at all: no case asks for a GPU
    assert executor.check_run(descriptor(tmp_path / "b", embedded)).gpus is None


def test_a_case_kernel_sees_only_its_gpus_and_its_result_names_them(tmp_path, embedded, two_gpus, monkeypatch):
    run = executor.prepare_run(descriptor(tmp_path, embedded, num_gpus=1), tmp_path / "run", only=["hf-bf16"])
    try:
        assert executor.manifest(run, ["gate"])["gpus"]["source"] == "$PARITY_KIT_FAKE_GPUS"
        given = {}
        monkeypatch.setattr(executor, "run_notebook",
                            lambda *a, **kw: given.update(kw) or NotebookOutcome("stopped here", None, None))
        result = executor.execute_case(run.specs[0], run.cases_dir, gpus=[Gpu(1, "GPU-bbbb2222", "NVIDIA H200")])
        assert given["env"]["CUDA_VISIBLE_DEVICES"] == "1" and given["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert result.devices == [{"index": 1, "uuid": "GPU-bbbb2222", "name": "NVIDIA H200"}]
    finally:
        run.lock.release()


def test_the_summarys_provenance_names_the_nodes_gpus_and_each_cases():
    from kit.core.records.records import CaseResult
    from kit.core.records.results import RunView
    from kit.views.audit import provenance_table

    h200 = {"index": 1, "uuid": "GPU-bbbb2222", "name": "NVIDIA H200"}
    manifest = {"cases": ["a", "b"], "kernels": {"a": "parity-kit", "b": "parity-kit"},
                "gpus": {"source": "nvidia-smi", "problem": None,
                         "gpus": [{"index": 0, "uuid": "GPU-a", "name": "NVIDIA H200", "busy": True},
                                  {**h200, "busy": False}]}}
    results = {"a": CaseResult("a", "hf", "passed", devices=[h200]), "b": CaseResult("b", "hf", "passed")}
    rows = dict(provenance_table(RunView(None, manifest, results, {})).set_index("what")["value"])
    assert rows["case a"] == "kernel parity-kit · on GPU 1 (NVIDIA H200)"
    assert rows["case b"] == "kernel parity-kit"
    assert rows["GPUs"] == ("2 from nvidia-smi: GPU 0 (NVIDIA H200), GPU 1 (NVIDIA H200); "
                            "filled by another process: GPU 0 (NVIDIA H200)")
