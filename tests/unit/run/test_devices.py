"""The local executor's GPUs: listed from nvidia-smi (or a stand-in list), handed out whole, one case each."""

from __future__ import annotations

import subprocess
import threading

import pytest

from kit.core.records.contract import FAKE_GPUS_ENV
from kit.core.errors import BadInput
from kit.run import devices
from kit.run.devices import DevicePool, Gpu, Inventory, Slots, Unavailable, WaitStopped

TWO = "0, GPU-aaaa1111, NVIDIA H200, 1 MiB, 143771 MiB\n1, GPU-bbbb2222, NVIDIA H200, 0 MiB, 143771 MiB"


def inventory(*used_mib: float, total: float = 1000.0) -> Inventory:
    return Inventory(tuple(Gpu(i, f"GPU-{i}", "Fake", u, total) for i, u in enumerate(used_mib)), "test")


def smi(stdout: str = "", returncode: int = 0, stderr: str = ""):
    return lambda cmd, **kw: subprocess.CompletedProcess(cmd, returncode, stdout, stderr)


def test_nvidia_smi_rows_are_read_with_or_without_units():
    rows = ("0, GPU-aaaa1111, NVIDIA H200, 1 MiB, 143771 MiB\n"
            "1, GPU-bbbb2222, NVIDIA A100-SXM4-80GB, 80000, 81920\n"
            "2, GPU-cccc3333, Odd, Name, [N/A], [N/A]\n")
    gpus = devices.parse_rows(rows, "nvidia-smi")
    assert gpus == [Gpu(0, "GPU-aaaa1111", "NVIDIA H200", 1.0, 143771.0),
                    Gpu(1, "GPU-bbbb2222", "NVIDIA A100-SXM4-80GB", 80000.0, 81920.0),
                    Gpu(2, "GPU-cccc3333", "Odd, Name", None, None)]
    assert [g.busy for g in gpus] == [False, True, False]  # 80000 of 81920 MiB: another process fills it


def test_a_row_that_is_not_nvidia_smis_is_refused_naming_where_it_came_from():
    with pytest.raises(BadInput, match=r"^\$PARITY_KIT_FAKE_GPUS: cannot read GPU row 'zero, GPU-a, H200, 1, 2'"):
        devices.discover({FAKE_GPUS_ENV: "zero, GPU-a, H200, 1, 2"})


def test_the_stand_in_list_replaces_nvidia_smi_and_an_inherited_cuda_visible_devices_limits_it():
    def no_smi(*a, **kw):
        raise AssertionError("nvidia-smi must not run when the stand-in list is set")

    found = devices.discover({FAKE_GPUS_ENV: TWO.replace("\n", ";")}, run=no_smi)
    assert [g.index for g in found.gpus] == [0, 1] and found.source == "$PARITY_KIT_FAKE_GPUS"
    assert devices.discover({FAKE_GPUS_ENV: ""}, run=no_smi).describe() == "none ($PARITY_KIT_FAKE_GPUS lists no GPU)"

    by_uuid = devices.discover({FAKE_GPUS_ENV: TWO, "CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, run=no_smi)
    assert [g.index for g in by_uuid.gpus] == [1]
    assert by_uuid.source == "$PARITY_KIT_FAKE_GPUS limited by CUDA_VISIBLE_DEVICES=GPU-bbbb"
    assert devices.discover({FAKE_GPUS_ENV: TWO, "CUDA_VISIBLE_DEVICES": "0"}, run=no_smi).describe() \
        == "1: GPU 0 (NVIDIA H200)"
    assert devices.discover({FAKE_GPUS_ENV: TWO, "CUDA_VISIBLE_DEVICES": ""}, run=no_smi).gpus == ()


def test_nvidia_smi_missing_or_failing_means_no_gpu_and_says_why():
    def missing(*a, **kw):
        raise FileNotFoundError("nvidia-smi")

    assert devices.discover({}, run=missing).describe() == "none (nvidia-smi: not found)"
    failed = devices.discover({}, run=smi(returncode=9, stderr="NVIDIA-SMI has failed because it couldn't "
                                                                 "communicate with the NVIDIA driver.\nmore"))
    assert failed.describe() == ("none (nvidia-smi: exit 9: NVIDIA-SMI has failed because it couldn't "
                                 "communicate with the NVIDIA driver.)")
    listed = devices.discover({}, run=smi(TWO + "\n"))
    assert listed.describe() == "2: GPU 0 (NVIDIA H200), GPU 1 (NVIDIA H200)" and listed.problem is None


def test_a_fraction_of_a_gpu_is_refused_with_the_rule_and_whole_ones_are_counted():
    assert devices.whole_gpus(2.0, "c", "d.toml:9") == 2
    assert devices.whole_gpus(0.0, "c", "d.toml:9") == 0
    with pytest.raises(BadInput) as refused:
        devices.whole_gpus(0.5, "c", "d.toml:9")
    assert str(refused.value) == ("d.toml:9: case c asks for num_gpus = 0.5; the local executor gives each case "
                                  "whole GPUs (ask for 1, or share a GPU by fraction with `--executor ray`)")


def test_more_gpus_than_the_node_has_is_refused_naming_both():
    devices.check_fits("c", 2, inventory(0, 0), "d.toml:9")
    with pytest.raises(BadInput) as refused:
        devices.check_fits("c", 3, inventory(0, 0), "d.toml:9")
    assert str(refused.value) == ("d.toml:9: case c asks for 3 GPU(s) (num_gpus); "
                                  "this node has 2: GPU 0 (Fake), GPU 1 (Fake)")
    with pytest.raises(BadInput, match=r"this node has none \(nvidia-smi: not found\)$"):
        devices.check_fits("c", 1, Inventory((), "nvidia-smi", "nvidia-smi: not found"), "d.toml:9")


def test_a_kernel_sees_only_its_gpus_counted_as_nvidia_smi_counts_them():
    env = devices.gpu_env([Gpu(3, "GPU-d", "Fake"), Gpu(5, "GPU-f", "Fake")])
    assert env == {"CUDA_VISIBLE_DEVICES": "3,5", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "JAX_CUDA_VISIBLE_DEVICES": "all"}


def waiter(pool: DevicePool, req, got: dict, **kw) -> threading.Thread:
    def wait():
        try:
            got[req.case] = pool.wait(req, **kw)
        except (Unavailable, WaitStopped) as exc:
            got[req.case] = exc

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    return t


def test_each_case_gets_its_own_gpus_and_the_third_waits_for_one_to_be_released():
    pool, slots, got = DevicePool(inventory(0, 0), poll_s=0.01), Slots(None), {}
    a, b, c = (pool.request(name, 1, slots) for name in "abc")
    first = [waiter(pool, a, got), waiter(pool, b, got)]
    for t in first:
        t.join(10)
    assert [g.index for g in got["a"]] == [0] and [g.index for g in got["b"]] == [1]
    third = waiter(pool, c, got)
    third.join(0.3)
    assert third.is_alive() and "c" not in got  # both GPUs are held
    pool.release(b)
    third.join(10)
    assert [g.index for g in got["c"]] == [1]


def test_cases_start_in_their_order_as_slots_come_free():
    pool, one, got = DevicePool(poll_s=0.01), Slots(1), {}
    reqs = [pool.request(name, 0, one) for name in "abc"]
    threads = {r.case: waiter(pool, r, got) for r in reversed(reqs)}  # the last one asks first
    for r in reqs:
        threads[r.case].join(10)
        assert set(got) == {r.case}, "the next case in order, and only it, holds the one slot"
        got.clear()
        pool.release(r)


def test_two_runs_sharing_the_pool_never_share_a_gpu():
    pool, got = DevicePool(inventory(0), poll_s=0.01), {}
    mine, theirs = pool.request("mine", 1, Slots(None)), pool.request("theirs", 1, Slots(None))
    waiter(pool, mine, got).join(10)
    other = waiter(pool, theirs, got)
    other.join(0.3)
    assert other.is_alive()
    pool.release(mine)
    other.join(10)
    assert [g.index for g in got["theirs"]] == [0]


def test_a_gpu_another_process_fills_is_never_handed_out_and_a_case_that_needs_it_errs_at_once():
    pool = DevicePool(inventory(5, 990), poll_s=0.01)
    got = {}
    waiter(pool, pool.request("two", 2, Slots(None)), got).join(10)
    assert str(got["two"]) == ("needs 2 GPU(s) but only 1 of this node's 2 are free: GPU 1 (Fake) has 990 of "
                               "1000 MiB in use by another process")
    waiter(pool, pool.request("one", 1, Slots(None)), got).join(10)
    assert [g.index for g in got["one"]] == [0]


def test_a_case_waits_no_longer_than_its_max_wait_and_a_stopped_run_wakes_every_waiter():
    pool, slots, got = DevicePool(inventory(0), poll_s=0.01), Slots(None), {}
    holder = pool.request("holder", 1, slots)
    waiter(pool, holder, got).join(10)
    waiter(pool, pool.request("patient", 1, slots), got, max_wait_s=0.05).join(10)
    assert str(got["patient"]) == "waited 0.05 s (max_wait_s) for 1 free GPU(s) and never started"
    stop = threading.Event()
    stopped = waiter(pool, pool.request("stopped", 1, slots), got, stopped=stop.is_set)
    stop.set()
    stopped.join(10)
    assert isinstance(got["stopped"], WaitStopped)
