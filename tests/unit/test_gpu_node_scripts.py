"""The helpers scripts/gpu-checks.sh uses on a GPU node: pointing a case at a calibration record, naming the
checkout's backends without installing it, and running the gates (scripts/gpu-gates.sh) so that each run
reports its own result and exit code."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

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


# A stand-in for the node's Python: `-m kit.cli gate ... --out DIR` acts as the gate (refuses a run directory
# that exists, as the real one does, with exit code 3 and nothing written); it writes a result.json with
# $VERDICT_<label> and exits with $CODE_<label> (<label> is the run directory's name: cold, warm1, ...),
# and writes nothing when $VERDICT_<label> is empty. Anything else runs the real Python.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1 $2 $3" = "-m kit.cli gate" ]; then
  while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
  [ -e "$out" ] && { echo "error: $out exists" >&2; exit 3; }
  label=$(basename "$out"); verdict_var=VERDICT_$label; code_var=CODE_$label
  if [ -n "${!verdict_var:-}" ]; then
    mkdir -p "$out"
    printf '{"verdict": "%s", "duration_s": 1, "cases": {"c": {"case": "c", "status": "%s", "bound": 0.1, ' \
      "${!verdict_var}" "${!verdict_var}" > "$out/result.json"
    printf '"duration_s": 1, "prompts": []}}}' >> "$out/result.json"
    echo "evidence of $out" > "$out/evidence.md"
  fi
  exit "${!code_var:-0}"
fi
exec %(python)s "$@"
"""


def run_gates(tmp_path: Path, out: Path, **env: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "python"
    if not fake.exists():
        fake.write_text(FAKE_PYTHON.replace("%(python)s", sys.executable))
        fake.chmod(0o755)
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu-gates.sh"), str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PY": str(fake), **env})


def verdicts(stdout: str) -> list[str]:
    return [line.split(":", 1)[1].strip() for line in stdout.splitlines() if line.startswith("gate verdict:")]


def test_gpu_gates_run_twice_in_one_folder_each_report_their_own_result(tmp_path):
    out = tmp_path / "out"
    first = run_gates(tmp_path, out, VERDICT_cold="passed", CODE_cold="0")
    assert first.returncode == 0, first.stdout + first.stderr
    assert verdicts(first.stdout) == ["passed"]
    # The second run on the same machine and folder: its gate is not refused, and it says its own verdict.
    second = run_gates(tmp_path, out, VERDICT_cold="failed", CODE_cold="1")
    assert second.returncode == 1, second.stdout + second.stderr
    assert verdicts(second.stdout) == ["failed"]
    assert json.loads((out / "result.json").read_text())["verdict"] == "failed"
    assert json.loads((out / "result-cold.json").read_text())["verdict"] == "failed"
    assert len(list(out.glob("gates-*/cold"))) == 2, "each run writes a fresh run directory"
    copied_from = (out / "evidence.md").read_text().split()[-1]
    assert f"into {copied_from} " in second.stdout and copied_from not in first.stdout


def test_gpu_gates_never_show_an_earlier_result_and_exit_with_the_worst_code(tmp_path):
    out = tmp_path / "out"
    assert run_gates(tmp_path, out, VERDICT_cold="passed").returncode == 0
    # A gate that refuses its input writes nothing: no verdict is printed, and none is left in the folder.
    refused = run_gates(tmp_path, out, VERDICT_cold="", CODE_cold="3")
    assert refused.returncode == 3
    assert verdicts(refused.stdout) == []
    assert "gate (cold) wrote no result.json" in refused.stdout
    assert not (out / "result.json").exists() and not (out / "result-cold.json").exists()
    assert not (out / "evidence.md").exists()
    # Cold then warm: the exit code is the worst of the two, the verdict the last one's.
    both = run_gates(tmp_path, out, GATE_RUNS="2", VERDICT_cold="incomplete", CODE_cold="2",
                     VERDICT_warm1="passed", CODE_warm1="0")
    assert both.returncode == 2, both.stdout + both.stderr
    assert verdicts(both.stdout) == ["passed"]
    assert {p.name for p in out.glob("result-*.json")} == {"result-cold.json", "result-warm1.json"}
    # A gate that says 0 but leaves no result is not a pass.
    silent = run_gates(tmp_path, out, VERDICT_cold="", CODE_cold="0")
    assert silent.returncode == 2 and verdicts(silent.stdout) == []
