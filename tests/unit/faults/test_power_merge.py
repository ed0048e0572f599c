"""`parity-kit power --merge`: a case's families measured in separate calls become one record, judged by its
evidence; a descriptor listing two records of one calibration record is refused, never half used."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from kit.cli import main
from kit.core.records import paths
from kit.core.errors import BadInput
from kit.core.noise.power import PowerRecord, load_power, merged
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve

EMBEDDED = paths.EMBEDDED_DESCRIPTOR


@pytest.fixture(scope="module")
def measured():
    """The embedded hf-bf16 case's power record, its calibration reference, and the record split in two: the
    position family, and every other, as two calls would have written them."""
    case = resolve(load_descriptor(EMBEDDED), ["hf-bf16"]).cases["hf-bf16"]
    # The record the power was measured against, whichever class of hardware this host is (the host's own record
    # may be another class's: its power is then not this record's to judge).
    power_path = EMBEDDED.parent / tomllib.loads(EMBEDDED.read_text())["cases"]["hf-bf16"]["power"][0]
    against = json.loads(power_path.read_text())["record_sha256"]
    reference = next(r for r in case.records if r.sha256 == against).reference()
    whole = load_power(power_path, reference)

    def part(families):
        return PowerRecord.measured(
            reference, case=whole.case, backend=whole.backend, record_sha256=whole.record_sha256,
            measured_on=whole.measured_on, fingerprint=whole.fingerprint,
            families={f: x for f, x in whole.families.items() if f in families},
            trials=[t for t in whole.trials if t.family in families], command=["parity-kit", "power"],
            created_at=whole.created_at)

    rest = set(whole.families) - {"position"}
    return whole, reference, part({"position"}), part(rest)


def _write(tmp_path: Path, record: PowerRecord) -> Path:
    path = tmp_path / f"{record.sha256}.json"
    path.write_bytes(record.canonical())
    return path


def _descriptor(tmp_path: Path, *power: Path) -> Path:
    text = EMBEDDED.read_text().replace('"../', f'"{EMBEDDED.parent.parent}/')
    lines = text.splitlines(keepends=True)
    start = lines.index("[cases.hf-bf16]\n")
    at = next(i for i in range(start, len(lines)) if lines[i].startswith("power = "))
    lines[at] = f"power = {json.dumps([str(p) for p in power])}\n"
    path = tmp_path / "merge.toml"
    path.write_text("".join(lines))
    return path


def test_parts_merged_give_the_whole_measurement(tmp_path, measured, capsys):
    whole, _, position, rest = measured
    a, b = _write(tmp_path, position), _write(tmp_path, rest)
    desc = _descriptor(tmp_path, a)
    out = tmp_path / "power"
    assert main(["power", str(desc), "--case", "hf-bf16", "--merge", str(a), str(b), "--to", str(out)]) == 0
    written = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert written.parent == out
    loaded = load_power(written, measured[1])
    assert loaded.summary == whole.summary and loaded.families == whole.families
    at = loaded.command.index("--merge")  # the record names the records it was made of, by their SHA-256s
    assert loaded.command[at + 1:at + 3] == [a.name, b.name]


def test_a_descriptor_listing_two_records_of_one_calibration_record_is_refused(tmp_path, measured):
    _, _, position, rest = measured
    a, b = _write(tmp_path, position), _write(tmp_path, rest)
    with pytest.raises(BadInput) as exc:
        resolve(load_descriptor(_descriptor(tmp_path, a, b)), ["hf-bf16"])
    message = str(exc.value)
    assert "cases.hf-bf16.power: " in message and "were both measured against calibration record" in message
    assert "--case hf-bf16 --merge A B" in message and "\n" not in message


def test_records_of_another_measurement_or_measured_twice_are_not_merged(tmp_path, measured):
    whole, reference, position, rest = measured
    _write(tmp_path, position)
    with pytest.raises(BadInput, match=r"rope_base at [0-9.e-]+ is measured in .* too"):
        merged([position, position], reference, ["test"], "now")
    other_host = dataclasses.replace(
        PowerRecord.measured(reference, **{**_fields(rest), "fingerprint": {"runtime": "another"}}),
        path=tmp_path / "other.json")
    with pytest.raises(BadInput, match=r"other\.json: fingerprint: .* only records of one measurement are merged"):
        merged([position, other_host], reference, ["test"], "now")
    relabelled = dataclasses.replace(
        PowerRecord.measured(reference, **{**_fields(position), "families": {"position": "rotary_interleave"}}),
        trials=[])
    with pytest.raises(BadInput, match="family position measured by rotary_interleave, elsewhere by rope_base"):
        merged([position, relabelled], reference, ["test"], "now")


def test_a_record_the_case_does_not_list_the_calibration_of_is_refused_in_one_line(tmp_path, measured, capsys):
    whole, _, position, _ = measured
    levanter = resolve(load_descriptor(EMBEDDED), ["levanter"]).cases["levanter"].spec.power["path"]
    code = main(["power", str(EMBEDDED), "--case", "hf-bf16", "--merge", str(levanter), "--to", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3 and "which case hf-bf16 of" in err and "does not list" in err
    assert list(tmp_path.iterdir()) == []


def _fields(record: PowerRecord) -> dict:
    return {"case": record.case, "backend": record.backend, "record_sha256": record.record_sha256,
            "measured_on": record.measured_on, "fingerprint": record.fingerprint, "families": dict(record.families),
            "trials": list(record.trials), "command": ["test"], "created_at": "now"}


def test_records_that_differ_only_in_how_openmp_loads_are_one_measurement(tmp_path, measured):
    """Two nodes' images set different loader switches of Intel's OpenMP runtime, which change no number: their
    records merge, and the merged record keeps the fingerprint without them. A thread count still differs."""
    _, reference, position, rest = measured

    def on(record: PowerRecord, env: dict) -> PowerRecord:
        fingerprint = {"runtime": {"accelerator": {"name": "NVIDIA H200"}, "env": env}}
        return PowerRecord.measured(reference, **{**_fields(record), "fingerprint": fingerprint})

    plain = {"CUDA_VERSION": "13.0.2", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    loader = {**plain, "KMP_DUPLICATE_LIB_OK": "True", "KMP_INIT_AT_FORK": "FALSE"}
    joined = merged([on(position, loader), on(rest, plain)], reference, ["test"], "now")
    assert joined.fingerprint == {"runtime": {"accelerator": {"name": "NVIDIA H200"}, "env": plain}}
    assert set(joined.families) == set(position.families) | set(rest.families)
    threads = dataclasses.replace(on(rest, {**plain, "OMP_NUM_THREADS": "4"}), path=tmp_path / "threads.json")
    with pytest.raises(BadInput, match=r"threads\.json: fingerprint: .* only records of one measurement are merged"):
        merged([on(position, loader), threads], reference, ["test"], "now")
