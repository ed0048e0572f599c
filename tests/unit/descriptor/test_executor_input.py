"""Descriptor resources and retries: refused with one line naming file, line and key; nothing written."""

from __future__ import annotations

from kit.descriptor.load import load_descriptor
from support import parity_kit, write_descriptor


def refused_line(proc, out) -> str:
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert not out.exists()
    return lines[0]


def line_of(path, text) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def test_misspelt_resource_key_names_file_line_and_the_keys(tmp_path, embedded):
    cases = {"hf-bf16": {**embedded.doc["cases"]["hf-bf16"], "resources": {"num_gpu": 1}}}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    line = refused_line(parity_kit("gate", desc, "--out", tmp_path / "run"), tmp_path / "run")
    assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, 'num_gpu')}: cases.hf-bf16.resources.num_gpu: "
                    "unknown key (expected one of: nodes, num_cpus, num_gpus, accelerator_type, memory_gb, custom, "
                    "max_wait_s)")


def test_bad_resource_values(tmp_path, embedded):
    hf = embedded.doc["cases"]["hf-bf16"]
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": {**hf, "resources": {"nodes": 0}}})
    line = refused_line(parity_kit("gate", desc, "--out", tmp_path / "run"), tmp_path / "run")
    assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, 'nodes = 0')}: cases.hf-bf16.resources.nodes: "
                    "expected greater than or equal to 1, got 0")
    desc = write_descriptor(tmp_path, embedded, defaults={**embedded.doc["defaults"], "retries": -1})
    line = refused_line(parity_kit("gate", desc, "--out", tmp_path / "run"), tmp_path / "run")
    assert line.endswith(f":{line_of(desc, 'retries')}: defaults.retries: expected greater than or equal to 0, got -1")


def test_a_multi_node_case_needs_the_ray_executor(tmp_path, embedded):
    cases = {"pp2": {**embedded.doc["cases"]["hf-bf16"], "resources": {"nodes": 2, "num_gpus": 1}}}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    line = refused_line(parity_kit("gate", desc, "--out", tmp_path / "run"), tmp_path / "run")
    assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, 'cases.pp2.resources')}: case pp2 asks for 2 nodes; "
                    "only `--executor ray` can place a multi-node case")


def test_resources_and_retries_resolve_per_case(tmp_path, embedded):
    hf = embedded.doc["cases"]["hf-bf16"]
    cases = {"a": hf, "b": {**hf, "retries": 0, "resources": {"num_gpus": 1, "accelerator_type": "H100",
                                                                 "memory_gb": 40, "custom": {"fast-disk": 1}}}}
    desc = load_descriptor(write_descriptor(tmp_path, embedded, cases=cases,
                                            defaults={**embedded.doc["defaults"], "retries": 2}))
    assert (desc.retries("a"), desc.retries("b")) == (2, 0)
    assert desc.resources("a").nodes == 1 and desc.resources("a").num_gpus == 0
    from kit.gate.executors.ray_executor import bundle, task_resources

    b = desc.resources("b")
    assert task_resources(b) == {"num_cpus": 1.0, "num_gpus": 1, "accelerator_type": "H100",
                                 "memory": 40 * 2**30, "resources": {"fast-disk": 1}}
    assert bundle(b) == {"CPU": 1.0, "GPU": 1, "fast-disk": 1, "memory": float(40 * 2**30),
                         "accelerator_type:H100": 0.001}
    # Resources are where a case runs, not what it computes: they leave the inputs digest alone.
    plain = load_descriptor(write_descriptor(tmp_path, embedded, name="plain.toml", cases={"b": hf}))
    assert desc.case_specs(["b"])[0].inputs_digest("f", "g") == plain.case_specs(["b"])[0].inputs_digest("f", "g")
