"""`calibrate --resume` continues only a calibration directory calibrate made for this descriptor, for a
case still set as its samples were measured, under the directory's lock; every refusal is one line, exit 3,
before a kernel starts or a file is written. Bad --to and --out folders are refused the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.calibrate.run import INDEX, begin_index
from kit.core.noise.calibration import Sample
from kit.descriptor.load import load_descriptor
from kit.run import runlock
from support import parity_kit, write_descriptor

pytestmark = pytest.mark.unit

SMALL = {"backend": "hf", "golden": "semantic", "bound": 0.075, "dtype": "bfloat16", "buckets": [128]}


def refused(proc) -> str:
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0].removeprefix("parity-kit: bad input: ")


def started(tmp_path: Path, embedded, case: dict = SMALL) -> tuple[Path, Path]:
    """A descriptor and a calibration directory of it as calibrate leaves one it was stopped in."""
    desc = write_descriptor(tmp_path, embedded, cases={"small": case})
    specs = load_descriptor(desc).case_specs(["small"], resolve_calibration=False)
    run = tmp_path / "cal"
    run.mkdir()
    begin_index(run, load_descriptor(desc), specs, ["parity-kit", "calibrate"], None)
    return desc, run


def resume(desc: Path, run: Path, tmp_path: Path):
    return parity_kit("calibrate", desc, "--case", "small", "--resume", run, "--to", tmp_path / "records")


def listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_folder_calibrate_did_not_make_is_refused_untouched(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"small": SMALL})
    other = tmp_path / "notes"
    other.mkdir()
    (other / "small.samples.jsonl").write_text("mine\n")
    before = listing(other)
    line = refused(resume(desc, other, tmp_path))
    assert line == f"--resume {other}: not a calibration directory (no {INDEX}); resume only a folder calibrate made"
    assert listing(other) == before and not (tmp_path / "records").exists()


def test_another_descriptors_calibration_is_refused(tmp_path, embedded):
    _, run = started(tmp_path / "a", embedded)
    desc = write_descriptor(tmp_path / "b", embedded, cases={"small": SMALL})
    before = listing(run)
    line = refused(resume(desc, run, tmp_path))
    assert line == (f"--resume {run}: it calibrates {tmp_path / 'a' / 'test.toml'}, not {desc}; calibrate in a "
                    "fresh directory (--out)")
    assert listing(run) == before


@pytest.mark.parametrize("change, said", [
    ({"dtype": "float32"}, "dtype = 'bfloat16', the case now sets 'float32'"),
    ({"buckets": [128, 256]}, "buckets [128], the case now has [128, 256]"),
])
def test_samples_measured_under_other_case_settings_are_not_reused(tmp_path, embedded, change, said):
    desc, run = started(tmp_path, embedded)
    desc = write_descriptor(tmp_path, embedded, cases={"small": {**SMALL, **change}})
    before = listing(run)
    line = refused(resume(desc, run, tmp_path))
    assert line == (f"--resume {run}: case small's samples there were measured with {said}; calibrate in a fresh "
                    "directory (--out)")
    assert listing(run) == before


def test_a_samples_line_that_is_valid_json_but_no_sample_is_named_by_its_line(tmp_path, embedded):
    desc, run = started(tmp_path, embedded)
    sample = Sample("as-set", 1, 1, {"p": 0.01}, {"p": -0.005}).to_dict()
    good = {"sample": sample, "inputs": {}, "release": {}, "runtime": {}}
    samples = run / "small.samples.jsonl"
    samples.write_text(json.dumps(good) + "\n" + json.dumps({**good, "sample": {**sample, "launch": "two"}}) + "\n")
    line = refused(resume(desc, run, tmp_path))
    assert line == (f"{samples}:2: not a sample of parity-kit calibrate (sample.launch: expected a whole number of "
                    "at least 1, got 'two'); calibrate again in a fresh directory")


def test_a_calibration_directory_in_use_is_refused(tmp_path, embedded):
    desc, run = started(tmp_path, embedded)
    with runlock.acquire(run, ["parity-kit", "calibrate", "--resume", str(run)], what="calibration"):
        line = refused(resume(desc, run, tmp_path))
    assert line.startswith(f"run directory {run} is in use by another calibration: pid ")


def test_records_folder_that_is_a_file_and_out_under_a_file_are_refused(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"small": SMALL})
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    line = refused(parity_kit("calibrate", desc, "--out", tmp_path / "cal", "--to", afile))
    assert line == f"--to {afile} is a file, not a directory"
    assert not (tmp_path / "cal").exists()
    line = refused(parity_kit("calibrate", desc, "--out", afile / "sub", "--to", tmp_path / "records"))
    assert line == f"--out {afile / 'sub'}: {afile} is a file, not a directory"
    assert afile.read_text() == "not a folder" and not (tmp_path / "records").exists()


def test_samples_another_host_measured_are_not_reused_here(tmp_path, embedded):
    # Samples relabelled as another CPU class: a resume here would have written a record of both hosts' samples,
    # labelled with the first one's class.
    from kit.core.host.runtime import accelerator, hardware

    desc, run = started(tmp_path, embedded)
    sample = Sample("as-set", 1, 1, {"p": 0.01}, {"p": -0.005}).to_dict()
    runtime = {"hardware": hardware(), "accelerator": {"name": "cpu (x86-64-v9)", "driver": ""}}
    (run / "small.samples.jsonl").write_text(json.dumps(
        {"sample": sample, "inputs": {}, "release": {}, "runtime": runtime}) + "\n")
    before = listing(run)
    line = refused(resume(desc, run, tmp_path))
    assert line == (f"--resume {run}: case small's samples there were measured on accelerator 'cpu (x86-64-v9)', "
                    f"where this host has {accelerator('cpu')['name']!r}; a record holds for the host that measured "
                    "it: resume on that host, or calibrate in a fresh directory (--out)")
    assert listing(run) == before and not (tmp_path / "records").exists()


def test_a_record_is_never_built_of_samples_of_two_runtimes(tmp_path, embedded):
    from kit.calibrate.run import build_record
    from kit.core.errors import BadInput

    desc = write_descriptor(tmp_path, embedded, cases={"small": SMALL})
    spec = load_descriptor(desc).case_specs(["small"], resolve_calibration=False)[0]
    runtime = {"hardware": "a CPU", "accelerator": {"name": "cpu (x86-64-v4)"}, "packages": {"torch": "2.11.0"}}
    entries = [{"sample": Sample(name, 1, 1, {}, {}).to_dict(), "inputs": {}, "release": {},
                "runtime": {**runtime, "packages": {"torch": torch}}}
               for name, torch in (("a", "2.11.0"), ("b", "2.12.0"))]
    with pytest.raises(BadInput, match=r"^case small: its samples were measured on different runtimes \(packages "
                                       r"\{'torch': '2.12.0'\} against \{'torch': '2.11.0'\}\); calibrate again"):
        build_record(spec, [{"name": "a"}, {"name": "b"}], entries, ["test"])
