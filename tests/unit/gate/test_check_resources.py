"""`parity-kit check` runs the gate's own preflight, the local executor's resources included: a descriptor the gate
refuses (a fraction of a GPU, more GPUs than the node has, 1e30 of them) is refused by check in the same line, not
called ok; `--executor ray` checks what Ray would run, where a fraction below 1 shares a GPU."""

from __future__ import annotations

import pytest

from kit.core.records import contract
from kit.core.errors import BadInput
from kit.descriptor.load import load_descriptor
from kit.gate import executor
from support import parity_kit, write_descriptor

TWO = "0, GPU-aaaa1111, NVIDIA H200, 1 MiB, 143771 MiB\n1, GPU-bbbb2222, NVIDIA H200, 0 MiB, 143771 MiB"
NODE = {contract.FAKE_GPUS_ENV: TWO, "CUDA_VISIBLE_DEVICES": "0,1"}


def gpu_descriptor(tmp_path, embedded, num_gpus):
    case = {**embedded.doc["cases"]["hf-bf16"], "resources": {"num_gpus": num_gpus}}
    return write_descriptor(tmp_path, embedded, cases={"hf-bf16": case})


def one_line(proc) -> str:
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0].removeprefix("parity-kit: bad input: ")


@pytest.mark.parametrize("num_gpus", [0.5, 3, 1e30])
def test_check_refuses_what_the_gates_preflight_refuses_in_the_same_line(tmp_path, embedded, monkeypatch, num_gpus):
    desc = gpu_descriptor(tmp_path, embedded, num_gpus)
    line = one_line(parity_kit("check", desc, env=NODE))
    for name, value in NODE.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(BadInput) as gate:
        executor.check_run(load_descriptor(desc))
    assert line == str(gate.value)
    assert f"case hf-bf16 asks for {'num_gpus = 0.5' if num_gpus == 0.5 else f'{num_gpus:g} GPU(s)'}" in line


def test_a_fraction_is_checked_as_ray_runs_it_and_whole_gpus_that_fit_pass(tmp_path, embedded):
    ray = parity_kit("check", gpu_descriptor(tmp_path / "ray", embedded, 0.5), "--executor", "ray", env=NODE)
    assert ray.returncode == 0, ray.stderr
    assert ray.stdout.endswith("\nok\n") and "gpus from" not in ray.stdout  # Ray places it, not this node
    fits = parity_kit("check", gpu_descriptor(tmp_path / "two", embedded, 2), env=NODE)
    assert fits.returncode == 0, fits.stderr
    assert ("gpus from $PARITY_KIT_FAKE_GPUS limited by CUDA_VISIBLE_DEVICES=0,1: 2: GPU 0 (NVIDIA H200), "
            "GPU 1 (NVIDIA H200); every case fits: hf-bf16 (2)") in fits.stdout.splitlines()


def test_more_than_one_gpu_must_be_whole_in_the_schema(tmp_path, embedded):
    desc = gpu_descriptor(tmp_path, embedded, 1.5)
    line = one_line(parity_kit("check", desc, "--executor", "ray"))
    at = next(n for n, text in enumerate(desc.read_text().splitlines(), 1) if text.startswith("num_gpus = 1.5"))
    assert line == (f"{desc}:{at}: cases.hf-bf16.resources.num_gpus: expected a whole number of GPUs, or a "
                    "fraction below 1 to share one with `--executor ray`, got 1.5")


def test_a_gpu_list_with_one_gpu_twice_is_one_line_through_check(tmp_path, embedded):
    desc = gpu_descriptor(tmp_path, embedded, 1)
    twice = "0, GPU-aaaa1111, NVIDIA H200, 1 MiB, 143771 MiB;0, GPU-bbbb2222, NVIDIA H200, 0 MiB, 143771 MiB"
    line = one_line(parity_kit("check", desc, env={**NODE, contract.FAKE_GPUS_ENV: twice}))
    assert line == (f"${contract.FAKE_GPUS_ENV}: GPU row '0, GPU-bbbb2222, NVIDIA H200, 0 MiB, 143771 MiB': index 0 "
                    "is listed twice; each row is one GPU, as nvidia-smi lists it")
