"""Golden regen: a stale semantic golden regenerated, diffed, checked by the backends that must agree with it,
and placed (with its calibrated cases' records measured again) only when enough of them do.

A stale golden is one made from an older model (tests/support/shared.py's, shared with the control runs).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kit.core.noise.calibration import load_record
from support import install_echo_plugin, parity_kit, write_descriptor


def golden_copy(folder, golden):
    """A copy of ``golden`` in a folder of its own, where regen may place its successor."""
    folder.mkdir()
    copy = folder / golden.name
    copy.write_bytes(golden.read_bytes())
    return copy


def refused_regen(tmp_path, embedded, desc, old, stale_golden, env=None) -> str:
    """Run regen on a descriptor whose checks will not all agree; assert the one-backend refusal, that the
    candidate stays in the work folder and the old golden is untouched; return the report."""
    work = tmp_path / "regen"
    proc = parity_kit("golden", "regen", desc, "--out", work, env=env)
    assert proc.returncode == 1, proc.stderr
    new = work / f"{embedded.fixture.name[:12]}-tiny-llama-{embedded.doc['model']['digest'][:12]}-semantic.json"
    assert proc.stdout.strip() == str(new)
    report = (work / "regen.md").read_text()
    assert (f"**Refused:** at least 2 backends must agree with it; 1 did (hf). The candidate golden stays at "
            f"`{new}` and nothing was placed.") in report
    assert sorted(p.name for p in old.parent.iterdir()) == [old.name]  # nothing placed, the old one untouched
    assert old.read_bytes() == stale_golden.read_bytes()
    return report


def test_golden_regen_diffs_and_refuses_with_one_backend(tmp_path, embedded, stale_golden):
    """Regenerating a stale golden: the diff names what moved; one agreeing backend is not enough."""
    old = golden_copy(tmp_path / "goldens", stale_golden)
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": old},
                            cases={"hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    report = refused_regen(tmp_path, embedded, desc, old, stale_golden)
    new_name = f"{embedded.fixture.name[:12]}-tiny-llama-{embedded.doc['model']['digest'][:12]}-semantic.json"
    assert "| hf | yes | — |" in report
    # Scaling the output layer sharpens every distribution and keeps every winner.
    assert f"-> new `{new_name}`: 64 of 64 cases moved" in report and "0 winners changed" in report
    assert sum(line.startswith("| `") for line in report.splitlines()) == 20 and "| ... 44 more | | |" in report


def test_golden_regen_refuses_a_golden_the_second_backend_disagrees_with(tmp_path, embedded, stale_golden):
    """Two backends check the new golden and one disagrees (the echo plugin at temperature 0.7 moves every
    probability): one agreeing backend is not enough, so nothing is placed."""
    env = install_echo_plugin(tmp_path / "site")
    old = golden_copy(tmp_path / "goldens", stale_golden)
    cases = {"hf-bf16": embedded.doc["cases"]["hf-bf16"],
             "echo": {"backend": "echo", "golden": "semantic", "bound": 0.05, "temperature": 0.7}}
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": old}, cases=cases)
    report = refused_regen(tmp_path, embedded, desc, old, stale_golden, env=env)
    assert "| echo | no | echo |" in report and "| hf | yes | — |" in report
    checked = json.loads((tmp_path / "regen" / "check" / "result.json").read_text())["cases"]
    assert {n: c["status"] for n, c in checked.items()} == {"hf-bf16": "passed", "echo": "failed"}


def test_golden_regen_refuses_exact(tmp_path, embedded):
    proc = parity_kit("golden", "regen", "--kind", "exact", "--out", tmp_path / "regen")
    assert proc.returncode == 3
    assert "golden regen makes semantic goldens only" in proc.stderr


@pytest.mark.levanter  # the second backend that checks the new golden
def test_golden_regen_places_a_golden_two_backends_agree_with(tmp_path, embedded, stale_golden):
    old = golden_copy(tmp_path / "goldens", stale_golden)
    cases = {n: embedded.doc["cases"][n] for n in ("hf-bf16", "levanter")}
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": old}, cases=cases)
    assert parity_kit("gate", desc, "--out", tmp_path / "before", "--no-summary").returncode == 1  # stale: fails
    proc = parity_kit("golden", "regen", desc, "--out", tmp_path / "regen")
    assert proc.returncode == 0, proc.stderr
    placed = Path(proc.stdout.strip())
    assert placed.parent == old.parent and placed != old and placed.name.endswith("-semantic.json")
    assert old.read_bytes() == stale_golden.read_bytes()  # never over the old one
    report = (tmp_path / "regen" / "regen.md").read_text()
    assert ("**Accepted for review:** 2 backends agree with the new golden within their bounds (hf, levanter). "
            f"Written to `{placed}`, beside `{old.name}`") in report
    assert "| hf | yes | — |" in report and "| levanter | yes | — |" in report
    # Pointing the descriptor at it makes the gate pass again.
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": placed}, cases=cases)
    assert parity_kit("gate", desc, "--out", tmp_path / "after", "--no-summary").returncode == 0


def test_golden_regen_calibrates_a_calibrated_case_again_against_the_new_golden(tmp_path, embedded, stale_golden):
    """A calibrated case's record names the golden its noise was measured against: regen measures the case's
    record again against the new golden on this host, checks with it, and places it beside the old record;
    the old record (and its bounds, measured against the stale golden) judges nothing."""
    env = install_echo_plugin(tmp_path / "site")
    old = golden_copy(tmp_path / "goldens", stale_golden)
    echo = {"backend": "echo", "golden": "semantic", "bound": 0.05}  # replays whatever golden it is given
    cases = {"hf-bf16": embedded.doc["cases"]["hf-bf16"], "echo": echo}
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": old}, cases=cases)
    records = tmp_path / "calibrations"
    proc = parity_kit("calibrate", desc, "--case", "hf-bf16", "--out", tmp_path / "cal", "--to", records, env=env)
    assert proc.returncode == 0, proc.stderr
    (stale_record,) = records.iterdir()
    hf = {k: v for k, v in embedded.doc["cases"]["hf-bf16"].items() if k not in ("calibration", "power")}
    cases = {"hf-bf16": {**hf, "calibration": str(stale_record)}, "echo": echo}
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": old}, cases=cases)
    assert parity_kit("check", desc, env=env).returncode == 0  # a consistent descriptor: the record fits the golden

    proc = parity_kit("golden", "regen", desc, "--out", tmp_path / "regen", env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    placed = Path(proc.stdout.strip())
    report = (tmp_path / "regen" / "regen.md").read_text()
    assert "**Accepted for review:** 2 backends agree" in report and "| hf | yes | — |" in report
    new_records = list((tmp_path / "regen" / "calibrations").iterdir())
    assert len(new_records) == 1
    new_record = new_records[0]
    assert sorted(p.name for p in records.iterdir()) == sorted([stale_record.name, new_record.name])
    assert (records / new_record.name).read_bytes() == new_record.read_bytes()
    assert f"| hf-bf16 | `{new_record.name}` | `{records / new_record.name}` | — |" in report
    new_doc, stale_doc = json.loads(new_record.read_text()), json.loads(stale_record.read_text())
    golden_sha = hashlib.sha256(placed.read_bytes()).hexdigest()
    assert new_doc["inputs"]["golden_sha256"] == golden_sha != stale_doc["inputs"]["golden_sha256"]
    # Measured against the stale golden (its output layer x1.5) the noise was the model's difference; against
    # the new one it is bfloat16's: the check used the new record's bounds, far tighter.
    new_bounds, stale_bounds = load_record(new_record).bounds, load_record(stale_record).bounds
    assert max(new_bounds.values()) < max(stale_bounds.values()) / 3
    checked = json.loads((tmp_path / "regen" / "check" / "result.json").read_text())["cases"]
    assert checked["hf-bf16"]["status"] == "passed"
    assert checked["hf-bf16"]["bound_source"]["record"] == new_record.stem
    # The descriptor naming the new golden and the new record is consistent again.
    cases["hf-bf16"]["calibration"] = str(records / new_record.name)
    desc = write_descriptor(tmp_path, embedded, goldens={**embedded.goldens, "semantic": placed}, cases=cases)
    assert parity_kit("check", desc, env=env).returncode == 0
