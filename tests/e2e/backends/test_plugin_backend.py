"""A backend defined outside kit/ joins the gate through the entry-point group alone.

The plugin here is a distribution written into a temporary folder (its package and its dist-info with
entry_points.txt) and put on PYTHONPATH, as `pip install` would put it on the path: no kit file
changes. It uses the generic case notebook, so adding it took one subpackage and one entry point.
Its engine replays the golden, scaled by an option, so the same plugin can pass and fail.
"""

from __future__ import annotations

import json
import re

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
