"""Every number of a descriptor is finite and in range, refused at its file:line by the schema: NaN passes
every comparison a bound makes, and an infinite timeout turns the timeout off."""

from __future__ import annotations

import pytest

from kit.core.errors import BadInput
from kit.descriptor.load import load_descriptor
from support import write_descriptor


def _refusal(tmp_path, embedded, **parts) -> tuple[str, list[str]]:
    desc = write_descriptor(tmp_path, embedded, **parts)
    with pytest.raises(BadInput) as exc:
        load_descriptor(desc)
    return str(exc.value), desc.read_text().splitlines()


def _line(lines, needle: str) -> int:
    return next(n for n, line in enumerate(lines, start=1) if needle in line)


CASE = {
    "bound NaN": ({"bound": float("nan")}, "bound = nan", "bound: expected a finite number, got nan"),
    "bound above 1": ({"bound": 1.5}, "bound = 1.5", "bound: expected less than or equal to 1, got 1.5"),
    "bucket bound NaN": ({"bucket_bounds": {"128": float("nan")}}, '128 = nan',
                         "bucket_bounds.128: expected a finite number, got nan"),
    "bucket bound negative": ({"bucket_bounds": {"128": -0.5}}, '128 = -0.5',
                              "bucket_bounds.128: expected greater than 0, got -0.5"),
    "bucket bound above 1": ({"bucket_bounds": {"128": 2.0}}, '128 = 2.0',
                             "bucket_bounds.128: expected less than or equal to 1, got 2.0"),
    "timeout infinite": ({"timeout_s": float("inf")}, "timeout_s = inf",
                         "timeout_s: expected a finite number, got inf"),
    "top_n zero": ({"top_n": 0}, "top_n = 0", "top_n: expected greater than or equal to 1, got 0"),
    "repeats zero": ({"repeats": 0}, "repeats = 0", "repeats: expected greater than or equal to 1, got 0"),
    "calibration launches zero": ({"calibration_launches": 0}, "calibration_launches = 0",
                                  "calibration_launches: expected greater than or equal to 1, got 0"),
    "cpus infinite": ({"resources": {"num_cpus": float("inf")}}, "num_cpus = inf",
                      "resources.num_cpus: expected a finite number, got inf"),
    "gpus negative": ({"resources": {"num_gpus": -1.0}}, "num_gpus = -1.0",
                      "resources.num_gpus: expected greater than or equal to 0, got -1.0"),
    "custom resource negative": ({"resources": {"custom": {"tpu": -2.0}}}, "tpu = -2.0",
                                 "resources.custom.tpu: expected greater than or equal to 0, got -2.0"),
}


@pytest.mark.parametrize("what", list(CASE))
def test_a_case_number_out_of_range_is_refused_at_its_line(tmp_path, embedded, what):
    change, needle, expected = CASE[what]
    case = {**embedded.doc["cases"]["hf-bf16"], **change}
    message, lines = _refusal(tmp_path, embedded, cases={"hf-bf16": case})
    desc = tmp_path / "test.toml"
    assert message == f"{desc}:{_line(lines, needle)}: cases.hf-bf16.{expected}"


def test_an_infinite_default_timeout_is_refused(tmp_path, embedded):
    message, lines = _refusal(tmp_path, embedded, defaults={**embedded.doc["defaults"], "timeout_s": float("inf")})
    assert message == (f"{tmp_path / 'test.toml'}:{_line(lines, 'timeout_s = inf')}: defaults.timeout_s: "
                       "expected a finite number, got inf")


def test_a_backend_option_is_finite_too(tmp_path, embedded):
    case = {**embedded.doc["cases"]["vllm-pp1"], "server_start_timeout_s": float("inf")}
    message, lines = _refusal(tmp_path, embedded, cases={"vllm-pp1": case})
    assert message == (f"{tmp_path / 'test.toml'}:{_line(lines, 'server_start_timeout_s = inf')}: "
                       "cases.vllm-pp1.server_start_timeout_s: expected a finite number, got inf")
