"""The two helpers scripts/gpu-checks.sh uses on a GPU node: pointing a case at a calibration record, and
naming the checkout's backends without installing it."""

from __future__ import annotations

import importlib.util
import tomllib
from importlib import metadata

import pytest

from kit.core.errors import BadInput
from support import ROOT

pytestmark = pytest.mark.unit

RECORD = ROOT / "calibrations" / "5f2f3207c5705415a80e37f807f1bc96f291f9adbbea8330cd5b081324ed9444.json"
DESCRIPTOR = """# top comment
name = "d"

[cases.a]
backend = "hf"
# the bound below is replaced
bound = 0.075
dtype = "bfloat16"

[cases.b]
backend = "hf"
bound = 0.075
"""


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_use_calibration_replaces_the_cases_bound_line_only(tmp_path):
    use = script("use_calibration")
    (tmp_path / "descriptors").mkdir()
    desc = tmp_path / "descriptors" / "d.toml"
    desc.write_text(DESCRIPTOR)
    record = tmp_path / "calibrations" / RECORD.name
    record.parent.mkdir()
    record.write_bytes(RECORD.read_bytes())
    assert use.main([str(desc), "a", str(record)]) == 0
    text = desc.read_text()
    assert text == DESCRIPTOR.replace("bound = 0.075\ndtype", f'calibration = "../calibrations/{RECORD.name}"\ndtype')
    # Pointing again replaces the calibration line, and nothing else moves.
    assert use.main([str(desc), "a", str(record)]) == 0
    assert desc.read_text() == text
    assert tomllib.loads(text)["cases"]["b"]["bound"] == 0.075


def test_use_calibration_refuses_an_unknown_case_and_a_changed_record_without_writing(tmp_path, capsys):
    use = script("use_calibration")
    desc = tmp_path / "d.toml"
    desc.write_text(DESCRIPTOR)
    assert use.main([str(desc), "c", str(RECORD)]) == 3
    assert capsys.readouterr().err == f"error: {desc}: no table [cases.c]\n"
    tampered = tmp_path / RECORD.name
    tampered.write_bytes(RECORD.read_bytes().replace(b'"hf-bf16"', b'"hf-bf17"', 1))
    with pytest.raises(BadInput, match="name is not the record's SHA-256"):
        use.point(desc, "a", tampered)
    assert desc.read_text() == DESCRIPTOR


def test_use_calibration_leaves_a_list_of_records_per_hardware_class_alone(tmp_path, capsys):
    use = script("use_calibration")
    desc = tmp_path / "d.toml"
    listed = DESCRIPTOR.replace("bound = 0.075\ndtype", 'calibration = [\n  "x.json",\n]\ndtype', 1)
    desc.write_text(listed)
    assert use.main([str(desc), "a", str(RECORD)]) == 3
    assert capsys.readouterr().err.startswith(f"error: {desc}: [cases.a] lists one record per class of hardware; "
                                              f"add ")
    assert desc.read_text() == listed


def test_register_checkout_names_the_pyproject_entry_points(tmp_path):
    folder = script("register_checkout").write_dist_info(tmp_path)
    assert folder.name == "parity_kit-0.1.0.dist-info"
    (dist,) = metadata.distributions(path=[str(tmp_path)])
    assert dist.metadata["Name"] == "parity-kit"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = {ep.name: ep.value for ep in dist.entry_points if ep.group == "parity_kit.backends"}
    assert found == project["entry-points"]["parity_kit.backends"]
    assert {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"} == project["scripts"]
