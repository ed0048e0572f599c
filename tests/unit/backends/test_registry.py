"""The backend registry: a name belongs to one distribution. A plugin that registers a built-in's name
(or another plugin's) is refused, naming both, instead of silently taking it from whichever the path
lists first. The plugin is laid out as pip installs one and put on PYTHONPATH, through the real CLI."""

from __future__ import annotations

from support import ECHO_PLUGIN, install_backend_plugin, parity_kit


def test_a_plugin_taking_a_built_in_name_is_refused_naming_both_distributions(tmp_path):
    files = {**ECHO_PLUGIN, "__init__.py": ECHO_PLUGIN["__init__.py"].replace('name="echo"', 'name="hf"')}
    site = install_backend_plugin(tmp_path / "site", "hf", "shadow_hf", files)
    proc = parity_kit("backends", env={"PYTHONPATH": str(site)})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "parity-kit: bad input: backend 'hf' is registered by two distributions: parity-kit 0.1.0 "
        "(kit.backends.hf:BACKEND) and shadow-hf 0.1 (shadow_hf:BACKEND); uninstall one (a plugin takes a "
        "name of its own)"]


def test_a_plugin_of_its_own_name_joins_the_built_ins(tmp_path):
    site = install_backend_plugin(tmp_path / "site", "echo", "echo_backend", ECHO_PLUGIN)
    proc = parity_kit("backends", env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    assert "echo" in proc.stdout and "hf" in proc.stdout
