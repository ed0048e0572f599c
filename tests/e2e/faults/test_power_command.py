"""`parity-kit power` end to end on the embedded hf-bf16 case (one family, its 128 bucket): the faulted model is
scored by every clean variant, judged by the case's record, and the written power record states what the
samples show; a descriptor then lists it and the case carries it."""

from __future__ import annotations

import json

from kit.core.noise.power import DETECTION_PROBABILITY, load_power
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from support import parity_kit, write_descriptor


def test_power_measures_a_family_and_the_record_it_writes_is_what_the_case_carries(tmp_path, embedded):
    case = {**{k: v for k, v in embedded.doc["cases"]["hf-bf16"].items() if k != "power"}, "buckets": [128]}
    cases = {"checkpoint": embedded.doc["cases"]["checkpoint"], "hf-bf16": case}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    out, to = tmp_path / "power-run", tmp_path / "power"
    proc = parity_kit("power", desc, "--case", "hf-bf16", "--family", "output=logit_scale", "--steps-down", "0",
                      "--out", out, "--to", to)
    assert proc.returncode == 0, proc.stderr
    [written] = list(to.glob("*.json"))
    assert proc.stdout.strip() == str(written)
    spec = resolve(load_descriptor(desc), ["hf-bf16"]).cases["hf-bf16"].spec
    record = load_power(written, {r.sha256: r for r in load_descriptor(desc).baselines.calibration_records(
        "hf-bf16", load_descriptor(desc).cases["hf-bf16"])}[spec.calibration["sha256"]].reference())
    family = record.summary["families"]["output"]
    assert record.families == {"output": "logit_scale"} and record.summary["prompts"] == 16
    # Started at the first magnitude whose float32 effect reaches the clean error, stopped where it was caught.
    [(magnitude, effect, caught)] = family["tried"]
    assert effect >= record.clean_error and caught >= DETECTION_PROBABILITY
    assert family["magnitude"] == magnitude and family["ratio"] == round(effect / record.clean_error, 4)
    # Every clean variant of the record, once each (on a CPU a second launch repeats the first bit for bit).
    clean = json.loads(open(spec.calibration["path"]).read())["samples"]
    assert sorted(s.variant for s in record.trials[0].samples) == sorted({s["variant"] for s in clean})
    assert not (out / "faulted").exists()  # faulted copies go once their family is measured
    assert f"output (logit_scale): from {family['ratio']:.2g}x" in proc.stderr

    # Listed by the case, the record is what its gate result carries.
    doc = json.loads(json.dumps(cases))
    doc["hf-bf16"]["power"] = [str(written)]
    listed = resolve(load_descriptor(write_descriptor(tmp_path / "listed", embedded, cases=doc)), ["hf-bf16"])
    assert listed.cases["hf-bf16"].spec.power["detects_from"] == family["ratio"]

    again = parity_kit("power", desc, "--case", "hf-bf16", "--family", "output=logit_scale", "--steps-down", "0",
                       "--resume", out, "--to", to)
    assert again.returncode == 0, again.stderr
    # The same samples and float32 effects (kept in the run, nothing scored again), judged the same; a record of its
    # own (its time and command).
    assert "logit_scale" in (out / "effects.jsonl").read_text()
    [second] = [p for p in to.glob("*.json") if p != written]
    assert json.loads(second.read_text())["summary"] == record.summary
    assert again.stdout.strip() == str(second)
