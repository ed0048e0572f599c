"""A case notebook's parameters are checked before anything runs (kit.gate.parameters): one without a `parameters`
cell, one that does not declare a name the gate injects, one that assigns it again later, and an option parameter
the backend's schema refuses are each one line naming the notebook and the name (exit 3), as `parity-kit check`
and the gate's preflight say alike. Run by hand, a notebook's option parameters are held to the same schema by
`parity-kit spec --options`."""

from __future__ import annotations

import json

import nbformat
import pytest

from kit.case import runner
from kit.core.errors import BadInput
from kit.descriptor.load import load_descriptor
from kit.gate import executor
from support import parity_kit, trusted, write_descriptor


def notebook(path, parameters: str | None, *later: str):
    cells = []
    if parameters is not None:
        cell = nbformat.v4.new_code_cell(parameters)
        cell.metadata["tags"] = ["parameters"]
        cells.append(cell)
    cells += [nbformat.v4.new_code_cell(source) for source in later]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "parity-kit", "display_name": "parity-kit", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def refused(tmp_path, embedded, nb) -> str:
    case = {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(nb)}
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": case})
    proc = parity_kit("check", desc)
    assert proc.returncode == 3 and proc.stdout == "", (proc.stdout, proc.stderr)
    [line] = proc.stderr.splitlines()
    with pytest.raises(BadInput) as gate:
        executor.check_run(load_descriptor(desc))
    assert line == f"parity-kit: bad input: {gate.value}"  # the gate's preflight says the same
    return str(gate.value)


PLAIN = "spec = None\nresult_path = None"


@pytest.mark.parametrize("parameters, later, says", [
    (None, [PLAIN + "\nprint(spec)"], "has no cell tagged `parameters`: the gate injects spec and result_path"),
    ("spec = None", ["print(spec)"], "its `parameters` cell does not declare `result_path`, which the gate injects"),
    ("result_path = None", [], "its `parameters` cell does not declare `spec`, which the gate injects"),
    (PLAIN, ["x = 1", "spec = None  # a default of its own, over the gate's"],
     "code cell 3 assigns `spec` after the `parameters` cell, over what the gate injects"),
    (PLAIN, ["result_path: str = 'mine.json'"], "code cell 2 assigns `result_path` after the `parameters` cell"),
    (PLAIN + "\ndtype = 'bfloat17'", [],
     "parameter dtype: expected 'float32', 'bfloat16', 'float16' or 'float64', got 'bfloat17' (a notebook's option "
     "parameters are held to the hf options schema, as a descriptor's are)"),
    (PLAIN + "\nbatch_size = 'two'", [], "parameter batch_size: expected a valid integer, got 'two'"),
    (PLAIN + "\ndtype = 'bf' + '16'", [], "parameter `dtype = 'bf' + '16'` is not a literal, so it cannot be checked "
                                          "against case hf-bf16's options before it runs"),
])
def test_a_notebook_the_gate_cannot_hand_its_case_to_is_refused(tmp_path, embedded, parameters, later, says):
    nb = notebook(tmp_path / "mine.ipynb", parameters, *later)
    line = refused(tmp_path, embedded, nb)
    assert line.startswith(f"{tmp_path / 'test.toml'}:") and f": case hf-bf16: notebook {nb}" in line
    assert says in line


def test_a_notebook_that_is_no_notebook_is_one_line(tmp_path, embedded):
    nb = tmp_path / "mine.ipynb"
    nb.write_text('{"cells": [')
    assert "cannot be read as a notebook: " in refused(tmp_path, embedded, nb)


def test_what_the_schema_accepts_and_what_is_not_an_option_pass(tmp_path, embedded):
    nb = notebook(tmp_path / "mine.ipynb", PLAIN + "\ndtype = 'float32'\nmy_threshold = 'anything'\nmode = 'sever'",
                  "x = spec")
    case = {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(nb)}
    proc = parity_kit("check", write_descriptor(tmp_path, embedded, cases={"hf-bf16": case}))
    assert proc.returncode == 0, proc.stderr  # mode is no hf option: the notebook's own business


def test_the_kits_own_notebooks_pass(embedded):
    executor.check_run(load_descriptor(embedded.descriptor))


def test_run_by_hand_an_option_parameter_is_held_to_the_schema_in_the_main_environment():
    with pytest.raises(BadInput) as exc:
        runner.resolve_spec(None, "tiny-cpu", "vllm-pp1", mode="sever", pipeline_parallel_size=None)
    assert str(exc.value).startswith("cannot resolve case vllm-pp1 of ")
    assert "--options: case vllm-pp1: mode: expected 'offline' or 'server', got 'sever'" in str(exc.value)
    spec = runner.resolve_spec(None, "tiny-cpu", "vllm-pp1", mode="server", pipeline_parallel_size=None)
    assert spec.options["mode"] == "server"


def test_spec_options_must_be_a_json_object(embedded):
    for given, says in (("[1]", "--options: expected a JSON object of option names and values"),
                        ("{", "--options: not JSON: ")):
        proc = parity_kit("spec", embedded.descriptor, "vllm-pp1", "--options", given)
        assert proc.returncode == 3 and says in proc.stderr and len(proc.stderr.splitlines()) == 1
    proc = parity_kit("spec", embedded.descriptor, "vllm-pp1", "--options", '{"pipeline_parallel_size": 2}')
    assert proc.returncode == 0 and json.loads(proc.stdout)["options"]["pipeline_parallel_size"] == 2


@pytest.mark.parametrize("later, name", [
    ("for spec in [None]:\n    pass", "spec"), ("with open(__file__) as result_path:\n    pass", "result_path"),
    ("import json as spec", "spec"), ("def result_path():\n    pass", "result_path"), ("(spec := None)", "spec"),
    ("try:\n    pass\nexcept Exception as spec:\n    pass", "spec"), ("if True:\n    result_path = 'x'", "result_path"),
])
def test_every_way_a_later_cell_binds_an_injected_name_is_seen(tmp_path, embedded, later, name):
    nb = notebook(tmp_path / "mine.ipynb", PLAIN, later)
    assert f"code cell 2 assigns `{name}` after the `parameters` cell" in refused(tmp_path, embedded, nb)


def test_a_name_a_later_cell_only_uses_or_binds_in_its_own_scope_passes(tmp_path, embedded):
    nb = notebook(tmp_path / "mine.ipynb", PLAIN, "x = [spec for spec in [1]]\ndef f(result_path):\n    spec = 1",
                  "print(spec['name'], result_path)\ny = lambda spec: spec")
    case = {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(nb)}
    proc = parity_kit("check", write_descriptor(tmp_path, embedded, cases={"hf-bf16": case}))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("later, name", [
    ("!echo hi\nspec = None", "spec"), ("result_path = !echo mine.json", "result_path"),
    ("%pwd\nspec = {}", "spec"), ("spec = %time 1 + 1", "spec"), ("%time result_path = 'x'", "result_path"),
    ("%%capture spec\nprint(1)", "spec"), ("%%time\nif True:\n    result_path = !echo x", "result_path"),
])
def test_a_later_cell_in_ipython_syntax_is_read_as_ipython_runs_it(tmp_path, embedded, later, name):
    nb = notebook(tmp_path / "mine.ipynb", PLAIN, later)
    assert f"code cell 2 assigns `{name}` after the `parameters` cell" in refused(tmp_path, embedded, nb)


def test_magics_that_only_use_an_injected_name_pass(tmp_path, embedded):
    # %timeit runs its code in a function of its own; %%capture's variable here is another name
    nb = notebook(tmp_path / "mine.ipynb", PLAIN, "!echo {result_path}\nx = !ls\n%timeit spec = 1",
                  "%%capture out\nprint(spec)", "y = %time len(spec)")
    case = {**embedded.doc["cases"]["hf-bf16"], "notebook": trusted(nb)}
    proc = parity_kit("check", write_descriptor(tmp_path, embedded, cases={"hf-bf16": case}))
    assert proc.returncode == 0, proc.stderr
