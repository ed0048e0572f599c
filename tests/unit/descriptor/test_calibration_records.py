"""What a descriptor's calibration may name, held up before anything runs (`parity-kit check`): at least one
record, each under its own name, no two of one class of hardware, every listed record fitting the case (not
only the one this host chooses), and the chosen one measured on this host's class of CPU unless the case
accepts the change. Each refusal is one line, exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes
from kit.core.host.runtime import accelerator
from support import ROOT, parity_kit, write_descriptor

pytestmark = pytest.mark.unit


def refused(proc) -> str:
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def embedded_records(embedded) -> list[Path]:
    """The embedded hf-bf16 case's records (one per class of CPU), as absolute paths."""
    here = embedded.descriptor.parent
    return [(here / f).resolve() for f in embedded.doc["cases"]["hf-bf16"]["calibration"]]


def variant_of(record: Path, folder: Path, **changes) -> Path:
    """A copy of ``record`` with top-level fields changed (and a different class of hardware, when
    ``measured_on`` is given), written canonically under its own SHA-256: a record that loads."""
    doc = json.loads(record.read_text())
    measured_on = changes.pop("measured_on", None)
    if measured_on:
        runtime = {**doc["fingerprint"]["runtime"], "accelerator": {"name": measured_on, "driver": ""}}
        doc["fingerprint"] = {**doc["fingerprint"], "runtime": runtime}
    doc.update(changes)
    data = canonical_bytes(doc)
    folder.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(folder / f"{sha256_bytes(data)}.json", data)


def hf_case(embedded, calibration, **more) -> dict:
    case = {k: v for k, v in embedded.doc["cases"]["hf-bf16"].items() if k not in ("calibration", "power")}
    return {**case, "calibration": calibration, **more}


def check(tmp_path, embedded, case: dict) -> tuple[Path, object]:
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": case})
    return desc, parity_kit("check", desc, "--case", "hf-bf16")


@pytest.mark.parametrize("empty", ['""', "[]"])
def test_an_empty_calibration_is_refused_at_its_line(tmp_path, embedded, empty):
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": hf_case(embedded, "/PLACEHOLDER")})
    desc.write_text(desc.read_text().replace('calibration = "/PLACEHOLDER"', f"calibration = {empty}"))
    line = refused(parity_kit("check", desc))
    where = f"parity-kit: bad input: {desc}:{line_of(desc, 'calibration =')}: cases.hf-bf16.calibration: "
    assert line == where + ("an empty list; name a record, or one per class of hardware" if empty == "[]" else
                            "an empty path names no record; name a calibration record (calibrations/<sha256>.json, "
                            "relative to the descriptor)")


def test_a_link_is_checked_under_its_own_name(tmp_path, embedded):
    record = embedded_records(embedded)[0]
    link = tmp_path / "records" / "hf-bf16-latest.json"
    link.parent.mkdir()
    link.symlink_to(record)
    desc, proc = check(tmp_path, embedded, hf_case(embedded, str(link)))
    line = refused(proc)
    assert line.startswith(f"parity-kit: bad input: {desc}:{line_of(desc, 'calibration =')}: "
                           f"cases.hf-bf16.calibration: {link}: name is not the record's SHA-256 ({record.stem})")


def test_two_records_of_one_class_of_hardware_are_refused_naming_both(tmp_path, embedded):
    v3 = embedded_records(embedded)[0]
    again = variant_of(v3, tmp_path / "records", created_at="2026-12-24T00:00:00Z")
    desc, proc = check(tmp_path, embedded, hf_case(embedded, [str(v3), str(again)]))
    line = refused(proc)
    assert line.endswith(f"cases.hf-bf16.calibration: {v3.relative_to(ROOT)} and {again} both measured noise on "
                         "cpu (x86-64-v3); list one record per class of hardware")


def test_a_listed_record_this_host_does_not_choose_must_fit_the_case_too(tmp_path, embedded):
    # A vLLM record of a class of hardware no host has: never chosen, so never held to the case before.
    vllm = variant_of(embedded_records(embedded)[0], tmp_path / "records", backend="vllm",
                      measured_on="cpu (x86-64-v9)")
    listed = [*map(str, embedded_records(embedded)), str(vllm)]
    desc, proc = check(tmp_path, embedded, hf_case(embedded, listed))
    line = refused(proc)
    assert line.endswith(f"cases.hf-bf16.calibration: record {vllm} does not fit: it measured backend vllm, this "
                         "case runs hf")


def test_a_record_of_another_cpu_class_leaves_the_case_without_a_baseline_never_refused(tmp_path, embedded):
    elsewhere = variant_of(embedded_records(embedded)[0], tmp_path / "records", measured_on="cpu (x86-64-v9)")
    case = {k: v for k, v in hf_case(embedded, str(elsewhere)).items() if k != "accept_noise_changes"}
    desc, proc = check(tmp_path, embedded, case)
    assert proc.returncode == 0, proc.stderr  # the gate would start, and record the case as not judged here
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("case hf-bf16: ")]
    assert line == (f"case hf-bf16: not judged here: no baseline for this hardware: cases.hf-bf16 "
                    f"({desc}:{line_of(desc, 'calibration = ')}: cases.hf-bf16.calibration) lists no calibration "
                    f"record measured on {accelerator('cpu')['name']} (listed: cpu (x86-64-v9)), and the case "
                    f"accepts no hardware change; make one here with `parity-kit baseline make {desc} --case hf-bf16 "
                    '--reason "..."`')
    # Accepted, the same record passes the check (its bounds apply; the kernel leaves its drift test out).
    _, proc = check(tmp_path / "accepted", embedded, {**case, "accept_noise_changes": ["hardware"]})
    assert proc.returncode == 0, proc.stderr


def test_a_record_without_a_drift_alpha_is_one_line_not_a_traceback(tmp_path, embedded):
    doc = json.loads(embedded_records(embedded)[0].read_text())
    del doc["drift"]["alpha"]
    data = canonical_bytes(doc)
    record = atomic_write_bytes(tmp_path / "records" / f"{sha256_bytes(data)}.json", data)
    desc, proc = check(tmp_path, embedded, hf_case(embedded, str(record)))
    line = refused(proc)
    assert line.endswith(f"cases.hf-bf16.calibration: {record}: malformed calibration record: drift.alpha: missing")
