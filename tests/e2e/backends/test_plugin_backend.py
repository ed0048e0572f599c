"""A backend defined outside kit/ joins the gate through the entry-point group alone.

The plugin here is a distribution written into a temporary folder (its package and its dist-info with
entry_points.txt) and put on PYTHONPATH, as `pip install` would put it on the path: no kit file
changes. It uses the generic case notebook, so adding it took one subpackage and one entry point.
Its engine replays the golden, scaled by an option, so the same plugin can pass and fail; it makes
goldens and exposes activations through the hooks of its BackendInfo, as the built-ins do.
"""

from __future__ import annotations

import json
import re

from kit.core.exitcodes import ExitCode
from kit.core.records.fixture import load_fixture
from kit.core.baselines.golden import load_golden
from kit.faults.cache import faulted_copy
from kit.faults.catalogue import fault
from support import install_echo_plugin, parity_kit, write_descriptor


def echo_descriptor(tmp_path, embedded, **options):
    case = {"backend": "echo", "golden": "semantic", "bound": 0.05, "buckets": [256], **options}
    return write_descriptor(tmp_path, embedded, cases={"echo": case})


def test_a_plugin_backend_is_listed_validated_and_gated(tmp_path, embedded):
    env = install_echo_plugin(tmp_path / "site")
    listed = parity_kit("spec", echo_descriptor(tmp_path / "a", embedded), "echo", env=env)
    assert listed.returncode == 0, listed.stderr
    spec = json.loads(listed.stdout)
    assert spec["options"] == {"temperature": 1.0} and spec["notebook"].endswith("parity.ipynb")

    good = parity_kit("gate", echo_descriptor(tmp_path / "b", embedded), "--out", tmp_path / "good", env=env)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "passed echo (echo)" in good.stderr

    # A temperature error moves every probability: the same plugin now fails its bound.
    cold = parity_kit("gate", echo_descriptor(tmp_path / "c", embedded, temperature=0.7), "--out", tmp_path / "cold",
                      env=env)
    assert cold.returncode == 1, cold.stdout + cold.stderr
    assert "failed echo (echo)" in cold.stderr

    # Above 1, the scaled logprobs are no distribution (their probabilities sum to more than 1): the kit
    # checks every answer before scoring it, whatever the backend, and the case is the backend's error.
    hot = parity_kit("gate", echo_descriptor(tmp_path / "d", embedded, temperature=1.3), "--out", tmp_path / "hot",
                     env=env)
    assert hot.returncode == 2, hot.stdout + hot.stderr
    error = json.loads((tmp_path / "hot" / "cases" / "echo.json").read_text())["error"]
    assert re.search(r"raised InvalidObservation: backend echo returned an invalid distribution for prompt "
                     r"\S+: its 25 probabilities sum to 1\.\d+; a distribution's probabilities sum to at most 1", error)


def test_a_plugin_option_typo_and_an_unregistered_backend_are_refused(tmp_path, embedded):
    env = install_echo_plugin(tmp_path / "site")
    typo = parity_kit("gate", echo_descriptor(tmp_path / "a", embedded, temprature=1.0), "--out", tmp_path / "r",
                      env=env)
    assert typo.returncode == 3 and "cases.echo.temprature: unknown key" in typo.stderr
    assert not (tmp_path / "r").exists()
    # Without the plugin on the path, the backend is unknown, and the registered ones are listed.
    gone = parity_kit("gate", echo_descriptor(tmp_path / "b", embedded), "--out", tmp_path / "r")
    assert gone.returncode == 3
    assert "unknown backend 'echo' (registered: hf, jax, levanter, vllm)" in gone.stderr


def test_a_plugin_that_fails_to_import_is_named_with_its_error(tmp_path, embedded):
    env = install_echo_plugin(tmp_path / "site")
    (tmp_path / "site" / "echo_backend" / "__init__.py").write_text("import no_such_engine\n")
    proc = parity_kit("gate", echo_descriptor(tmp_path / "a", embedded), "--out", tmp_path / "r", env=env)
    assert proc.returncode == 3
    assert proc.stderr.strip() == ("parity-kit: bad input: backend plugin 'echo' (echo_backend:BACKEND) failed to "
                                   "import: ModuleNotFoundError: No module named 'no_such_engine'")


def test_a_plugin_backend_makes_a_golden_with_its_own_engine(tmp_path, embedded):
    env = install_echo_plugin(tmp_path / "site")
    made = parity_kit("golden", "make", "--backend", "echo", "--model", embedded.model, "--fixture", embedded.fixture,
                      "--kind", "semantic", "--top-k", "8", "--out", tmp_path / "goldens", env=env)
    assert made.returncode == ExitCode.PASSED, made.stderr
    golden = load_golden(made.stdout.strip())
    assert golden.provenance["backend"] == "echo"
    assert golden.provenance["release"] == {"backend": "echo", "temperature": 1.0}
    # The echo's own engine made it, not the reference's: each prompt's tokens are its latest ones, echoed.
    prompt = load_fixture(embedded.fixture).prompts[0]
    latest = list(dict.fromkeys(reversed(prompt.prompt_token_ids)))[:8]
    assert [t for t, _ in golden.prompts[prompt.id]] == latest

    # The golden judges the plugin's cases as any golden does.
    desc = write_descriptor(tmp_path / "a", embedded, goldens={"semantic": golden.path},
                            cases={"echo": {"backend": "echo", "golden": "semantic", "bound": 0.05, "buckets": [256],
                                            "temperature": 0.7}})
    cold = parity_kit("gate", desc, "--out", tmp_path / "cold", "--no-summary", env=env)
    assert cold.returncode == ExitCode.FAILED, cold.stdout + cold.stderr
    assert "failed echo (echo)" in cold.stderr


def test_a_plugin_backend_localizes_a_fault_through_its_own_activations(tmp_path, embedded):
    env = install_echo_plugin(tmp_path / "site")
    # At 0.7 the echo fails every prompt, so the localizer has prompts to read; its stream is the model's.
    desc = echo_descriptor(tmp_path / "a", embedded, temperature=0.7)
    candidate = faulted_copy(fault("o_proj_scale"), 0.2, str(embedded.model), cache_dir=tmp_path / "faulted")
    out = tmp_path / "loc"
    proc = parity_kit("localize", desc, "echo", "--model", candidate, "--out", out, env=env)
    assert proc.returncode == ExitCode.PASSED, proc.stderr
    assert proc.stdout.splitlines() == ["first divergent: layer 1 attention", str(out.resolve())]
    doc = json.loads((out / "localize.json").read_text())
    assert doc["backend"] == "echo" and doc["options"] == {"temperature": 0.7}
    # The echo says nothing of where it runs: the reference runs at its own defaults.
    assert doc["reference_options"] == {"dtype": "float32", "attn_implementation": "sdpa"}
