"""`parity-kit fault list | inject`: the catalogue as a user's command writes the very copy the test suite
measures, into a new folder only, and refuses what it cannot do in one line."""

from __future__ import annotations

import json
import shutil

from kit.core.model import faultcopy
from kit.core.model.modeldigest import model_digest
from kit.core.records.paths import display
from kit.faults.cache import faulted_copy
from kit.faults.catalogue import CATALOGUE, fault
from kit.faults.checkpoint import load_checkpoint, write_checkpoint
from support import parity_kit


def test_list_names_every_fault_with_its_unit_and_magnitudes():
    proc = parity_kit("fault", "list")
    assert proc.returncode == 0, proc.stderr
    heads = [line.split(":")[0] for line in proc.stdout.splitlines() if not line.startswith(" ")]
    assert heads == [f.name for f in CATALOGUE]
    rope = fault("rope_base")
    assert f"rope_base: {rope.mimics}\n  edits {rope.edit}; magnitude: {rope.unit}; graded at 0.002, " in proc.stdout


def test_inject_writes_the_copy_the_catalogue_measures(embedded, tmp_path):
    proc = parity_kit("fault", "inject", "rope_base", "0.05", "--model", embedded.model, "--out", tmp_path / "copy")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str((tmp_path / "copy").resolve())
    config = json.loads((tmp_path / "copy" / "config.json").read_text())
    source = json.loads((embedded.model / "config.json").read_text())
    theta = source["rope_parameters"]["rope_theta"]
    assert config["rope_parameters"]["rope_theta"] == theta * 1.05
    # File for file the copy the catalogue measures, and beside them its provenance, which its digest covers: a
    # gate run of the copy is known bad to a backtest (kit.baselines.archive), which reads it from the manifest.
    reference = faulted_copy(fault("rope_base"), 0.05, embedded.model, tmp_path / "cache")
    copied = sorted(p.name for p in (tmp_path / "copy").iterdir())
    assert copied == sorted([p.name for p in reference.iterdir()] + [faultcopy.FILE])
    assert all((tmp_path / "copy" / name).read_bytes() == (reference / name).read_bytes()
               for name in copied if name != faultcopy.FILE)
    assert faultcopy.read_provenance(tmp_path / "copy") == faultcopy.fault_provenance(
        "rope_base", 0.05, fault("rope_base").unit, model_digest(embedded.model), None)
    digest = model_digest(tmp_path / "copy")
    assert digest not in (model_digest(reference), model_digest(embedded.model))
    assert f'digest = "{digest}"' in proc.stderr  # what the descriptor's [models] entry pins
    # A copy of that copy names both faults.
    twice = parity_kit("fault", "inject", "logit_scale", "0.1", "--model", tmp_path / "copy", "--out", tmp_path / "2")
    assert twice.returncode == 0, twice.stderr
    assert faultcopy.read_provenance(tmp_path / "2") == faultcopy.fault_provenance(
        "logit_scale", 0.1, fault("logit_scale").unit, digest, faultcopy.read_provenance(tmp_path / "copy"))
    # Never over anything: the same folder again is refused, and left as it was.
    again = parity_kit("fault", "inject", "logit_scale", "0.1", "--model", embedded.model, "--out", tmp_path / "copy")
    assert again.returncode == 3
    assert again.stderr.startswith("parity-kit: bad input: --out ") and "exists and is not empty" in again.stderr
    assert json.loads((tmp_path / "copy" / "config.json").read_text()) == config


def test_inject_refuses_in_one_line(embedded, tmp_path):
    def refused(*args: str) -> str:
        proc = parity_kit("fault", "inject", *args)
        assert proc.returncode == 3, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        return proc.stderr.strip()

    model = str(embedded.model)
    assert "no fault named 'rope'" in refused("rope", "0.1", "--model", model, "--out", str(tmp_path / "a"))
    assert ("fault qk_swap: magnitude 2.0 is out of range (0 to 1" in
            refused("qk_swap", "2", "--model", model, "--out", str(tmp_path / "b")))
    assert "no config.json" in refused("rope_base", "0.1", "--model", str(tmp_path), "--out", str(tmp_path / "c"))
    # A checkpoint without the layer a fault edits: named, and no folder left behind.
    c = load_checkpoint(embedded.model)
    for name in [n for n in c.tensors if n.startswith("model.layers.0.")]:
        del c.tensors[name]
        del c.dtypes[name]
    write_checkpoint(c, embedded.model, tmp_path / "no-layer-0")
    line = refused("layer_skip", "1", "--model", str(tmp_path / "no-layer-0"), "--out", str(tmp_path / "d"))
    assert "fault layer_skip cannot be applied to this checkpoint: it needs 'model.layers.0." in line
    assert not (tmp_path / "d").exists()
    assert not any(p.name in "abc" for p in tmp_path.iterdir())


def test_inject_refuses_to_write_its_copy_into_the_source_model(embedded, tmp_path):
    source = tmp_path / "model"
    shutil.copytree(embedded.model, source)
    before = model_digest(source)
    proc = parity_kit("fault", "inject", "rope_base", "0.002", "--model", str(source), "--out", str(source / "faulted"))
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip() == (f"parity-kit: bad input: --out {display(source / 'faulted')} lies inside the model "
                                   f"folder {display(source)}; write the faulted copy elsewhere")
    assert not (source / "faulted").exists() and model_digest(source) == before

