"""Each row of the GPU list ($PARITY_KIT_FAKE_GPUS, or nvidia-smi's) is one GPU of its own: a list where two rows
share an index handed "GPU 0" to two cases at once. A row that parses but is no GPU of its own is refused in one
line naming the variable and the row."""

from __future__ import annotations

import pytest

from kit.core.records.contract import FAKE_GPUS_ENV
from kit.core.errors import BadInput
from kit.run import devices

GPU0 = "0, GPU-aaaa1111, NVIDIA H200, 1 MiB, 143771 MiB"


@pytest.mark.parametrize("row, problem", [
    ("0, GPU-bbbb2222, NVIDIA H200, 0 MiB, 143771 MiB", "index 0 is listed twice"),
    ("1, GPU-aaaa1111, NVIDIA H200, 0 MiB, 143771 MiB", "uuid GPU-aaaa1111 is listed twice"),
    ("-1, GPU-bbbb2222, NVIDIA H200, 0 MiB, 143771 MiB", "index -1 is negative"),
    ("1, , NVIDIA H200, 0 MiB, 143771 MiB", "its uuid is empty"),
    ("1, GPU-bbbb2222, NVIDIA H200, nan, 143771 MiB", "a memory figure is negative or not finite"),
    ("1, GPU-bbbb2222, NVIDIA H200, 0 MiB, -5 MiB", "a memory figure is negative or not finite"),
    ("1, GPU-bbbb2222, NVIDIA H200, 0 MiB, inf", "a memory figure is negative or not finite"),
])
def test_a_row_that_is_no_gpu_of_its_own_is_refused_naming_the_variable_and_the_row(row, problem):
    with pytest.raises(BadInput) as refused:
        devices.discover({FAKE_GPUS_ENV: f"{GPU0};{row}"})
    assert str(refused.value) == (f"${FAKE_GPUS_ENV}: GPU row {row!r}: {problem}; each row is one GPU, "
                                  "as nvidia-smi lists it")


def test_distinct_rows_and_unknown_memory_still_pass():
    gpus = devices.discover({FAKE_GPUS_ENV: f"{GPU0};1, GPU-bbbb2222, NVIDIA H200, [N/A], [N/A]"}).gpus
    assert [(g.index, g.uuid, g.memory_total_mib) for g in gpus] == [(0, "GPU-aaaa1111", 143771.0),
                                                                     (1, "GPU-bbbb2222", None)]
