"""GPU scheduling of the local executor, on CPU: a stand-in list of two GPUs ($PARITY_KIT_FAKE_GPUS) and
cases that ask for one each. The case notebooks print the CUDA_VISIBLE_DEVICES their kernel got, note when
they ran, then score with the echo plugin (which replays the golden) so that each case passes."""

from __future__ import annotations

import itertools
import json

from kit.core.records.contract import FAKE_GPUS_ENV
from kit.views.audit import provenance_table
from kit.views.summary import load_run
from support import install_echo_plugin, parity_kit, trusted, write_descriptor, write_notebook

TWO = "0, GPU-aaaa1111, NVIDIA H200, 1 MiB, 143771 MiB; 1, GPU-bbbb2222, NVIDIA H200, 0 MiB, 143771 MiB"
ONE_FILLED = "0, GPU-aaaa1111, NVIDIA H200, 1 MiB, 143771 MiB; 1, GPU-bbbb2222, NVIDIA H200, 140000 MiB, 143771 MiB"

# The first case to start waits (at most 30 s) until a second one runs beside it: that the two ran at once
# is then a fact the test can assert, not a race of kernel start-up times.
STAND_IN = """import json, os, pathlib, time
visible = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
print("CUDA_VISIBLE_DEVICES=" + visible)
folder, t0 = pathlib.Path({folder!r}), time.time()
(folder / ("started-" + spec["name"])).touch()
while len(list(folder.glob("started-*"))) < 2 and time.time() - t0 < 30:
    time.sleep(0.1)
import scrapbook as sb
from kit.case import runner
from kit.core.records import contract
sb.glue(contract.CASE_RESULT_SCRAP, runner.notebook_case(spec, None, None, result_path).to_dict())
with (folder / "ran.jsonl").open("a") as log:
    log.write(json.dumps({{"case": spec["name"], "visible": visible, "start": t0, "end": time.time()}}) + "\\n")
"""


def gpu_cases(tmp_path, names, num_gpus=1):
    notebook = write_notebook(tmp_path / "stand_in.ipynb", STAND_IN.format(folder=str(tmp_path)))
    case = {"backend": "echo", "golden": "semantic", "bound": 0.05, "buckets": [256], "notebook": trusted(notebook),
            "resources": {"num_gpus": num_gpus}}
    return {name: case for name in names}


def fake_node(tmp_path, gpus: str) -> dict:
    # An inherited CUDA_VISIBLE_DEVICES limits the node's GPUs; this one names both stand-ins.
    return {**install_echo_plugin(tmp_path / "site"), FAKE_GPUS_ENV: gpus, "CUDA_VISIBLE_DEVICES": "0,1"}


def test_three_one_gpu_cases_on_two_gpus_never_share_one_and_the_third_waits(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases=gpu_cases(tmp_path, ["a", "b", "c"]))
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary", env=fake_node(tmp_path, TWO), timeout=120)
    assert proc.returncode == 0, proc.stderr

    ran = {r["case"]: r for r in map(json.loads, (tmp_path / "ran.jsonl").read_text().splitlines())}
    assert set(ran) == {"a", "b", "c"}
    for name, r in ran.items():
        result = json.loads((run_dir / "cases" / f"{name}.json").read_text())
        assert result["status"] == "passed"
        assert [d["index"] for d in result["devices"]] == [int(r["visible"])], "the result names the GPU it ran on"
        assert f"CUDA_VISIBLE_DEVICES={r['visible']}" in (run_dir / "cases" / f"{name}.ipynb").read_text()
        assert f"passed {name} (echo) on GPU {r['visible']}" in proc.stderr

    overlapping = [(x, y) for x, y in itertools.combinations(ran.values(), 2)
                   if x["start"] < y["end"] and y["start"] < x["end"]]
    assert overlapping, "two cases ran at once, one GPU each"
    assert all(x["visible"] != y["visible"] for x, y in overlapping), "cases running at once shared a GPU"
    first, second, third = sorted(ran.values(), key=lambda r: r["start"])
    assert third["start"] >= min(first["end"], second["end"]), "the third case waited for a GPU to be free"

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert [g["uuid"] for g in manifest["gpus"]["gpus"]] == ["GPU-aaaa1111", "GPU-bbbb2222"]
    # The summary reads each result, the GPUs among it, from the executor's record (a notebook's scrap only for
    # a case the executor recorded nothing for).
    view = load_run(run_dir)
    assert set(view.sources.values()) == {"executor"}
    rows = dict(provenance_table(view).set_index("what")["value"])
    for name, r in ran.items():
        assert rows[f"case {name}"].endswith(f" · on GPU {r['visible']} (NVIDIA H200)")


def test_more_gpus_than_the_node_has_is_refused_before_anything_runs(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases=gpu_cases(tmp_path, ["big"], num_gpus=3))
    proc = parity_kit("gate", desc, "--out", tmp_path / "run", env=fake_node(tmp_path, TWO))
    assert proc.returncode == 3
    assert proc.stderr.strip().endswith("case big asks for 3 GPU(s) (num_gpus); this node has 2: GPU 0 (NVIDIA H200), "
                                        "GPU 1 (NVIDIA H200)")
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_case_that_needs_a_gpu_another_process_fills_ends_at_once_as_an_error_naming_it(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases=gpu_cases(tmp_path, ["pair"], num_gpus=2))
    run_dir = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", run_dir, "--no-summary", env=fake_node(tmp_path, ONE_FILLED), timeout=120)
    assert proc.returncode == 2, proc.stderr
    result = json.loads((run_dir / "cases" / "pair.json").read_text())
    assert (result["status"], result["error"]) == ("error", (
        "cannot start: needs 2 GPU(s) but only 1 of this node's 2 are free: GPU 1 (NVIDIA H200) has 140000 of "
        "143771 MiB in use by another process"))
    assert not (tmp_path / "ran.jsonl").exists() and not (run_dir / "cases" / "pair.ipynb").exists()
