"""Three outcomes with stated power: a case within its bounds that cannot see the fault size its descriptor asks
for reads inconclusive (exit 8, JUnit skipped), never passed; one that can see it passes and says what it sees."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from kit.core.noise.calibration import measured_on
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from support import parity_kit, write_descriptor


def _measured_case(embedded) -> dict:
    """hf-bf16 with the one record its power was measured against: whatever this host's class, the case's
    detectable effect is then its own record's (a host of another class uses its bounds, not its drift test)."""
    spec = resolve(load_descriptor(embedded.descriptor), ["hf-bf16"]).cases["hf-bf16"].spec
    power = spec.power
    assert power is not None
    case = {k: v for k, v in embedded.doc["cases"]["hf-bf16"].items() if k not in ("calibration", "power")}
    record = next(r for r in load_descriptor(embedded.descriptor).baselines.calibration_records(
        "hf-bf16", load_descriptor(embedded.descriptor).cases["hf-bf16"]) if r.sha256 == power["record_sha256"])
    assert measured_on({"fingerprint": record.fingerprint}) == power["measured_on"]
    return {**case, "calibration": str(record.path), "power": [power["path"]],
            "accept_noise_changes": ["hardware"]}, power


def test_an_underpowered_case_reads_inconclusive_and_a_powered_one_passes_saying_what_it_detects(tmp_path, embedded):
    case, power = _measured_case(embedded)
    worst, hardest = power["detects_from"], power["hardest"]
    assert worst is not None and worst > 1.0
    limit_under = round(worst * 0.8, 2)  # asks for more than the case can see
    cases = {"underpowered": {**case, "detectable_limit": limit_under},
             "few-prompts": {**case, "buckets": [128], "detectable_limit": round(worst * 2, 2)},
             "powered": {**case, "detectable_limit": round(worst * 2, 2)}}
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", write_descriptor(tmp_path, embedded, cases=cases), "--out", run_dir, "--no-summary",
                      "--junit", tmp_path / "junit.xml", "--jobs", "2")
    assert proc.returncode == 8, proc.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] == "inconclusive"
    by = result["cases"]
    fault = power["families"][hardest]["fault"]
    assert by["underpowered"]["status"] == "inconclusive"
    assert by["underpowered"]["error"] == (f"it detects faults only from {worst:.2g}x the clean error ({hardest}: "
                                           f"{fault}), over the limit of {limit_under:g}x "
                                           "(cases.underpowered.detectable_limit)")
    assert by["few-prompts"]["status"] == "inconclusive"
    assert by["few-prompts"]["error"] == (f"it scored 16 prompts and its detectable effect ({worst:.2g}x) was measured "
                                          f"on {power['prompts']}: with fewer prompts it may see less")
    assert by["powered"]["status"] == "passed"
    assert by["powered"]["detectable"]["detects_from"] == worst
    assert f"detects faults from {worst:.2g}x the clean error" in proc.stderr
    assert "gate inconclusive" in proc.stderr
    skipped = {c.get("name"): c.find("skipped") for c in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    assert skipped["underpowered"].get("type") == "inconclusive" and skipped["powered"] is None
    md = (run_dir / "evidence.md").read_text()
    assert "**Parity gate `test`: inconclusive.**" in md
    assert "- `underpowered` (hf): **inconclusive**, within its bounds but it detects faults only from" in md
