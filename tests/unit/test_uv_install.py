"""scripts/uv_install.py: uv is handed the package sources pip is configured with, so that it installs what pip
would (a local CPU torch rather than PyPI's CUDA build, a mirror's packages) and picks versions as pip does."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

import pytest

from support import ROOT

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def uv_install():
    spec = importlib.util.spec_from_file_location("uv_install", ROOT / "scripts" / "uv_install.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


CONFIG = """\
:env:.find-links='/srv/wheels'
:env:.default-timeout='180'
global.cert='/etc/ssl/bundle.pem'
global.constraint='/etc/pip/constraints.txt'
global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'
global.find-links='/elsewhere'
global.index-url='https://mirror.example/simple'
install.index-url='https://install.example/simple'
global.trusted-host='mirror.example'
"""


def test_every_source_of_pip_becomes_uvs_with_pips_precedence(uv_install):
    sources = uv_install.pip_sources(CONFIG)
    assert sources.find_links == ("/srv/wheels",)  # a PIP_* variable over a file
    assert sources.index_url == "https://install.example/simple"  # [install] over [global]
    assert uv_install.uv_arguments(sources) == [
        "--index-strategy", "unsafe-best-match",
        "--index-url", "https://install.example/simple",
        "--extra-index-url", "file:///srv/a/simple", "--extra-index-url", "file:///srv/b/simple",
        "--find-links", "/srv/wheels",
        "--constraint", "/etc/pip/constraints.txt",
        "--allow-insecure-host", "mirror.example"]


def test_pips_ca_bundle_and_timeout_reach_uv_unless_set_already(uv_install):
    sources = uv_install.pip_sources(CONFIG)
    env = uv_install.uv_environment(sources, {"PATH": "/bin"})
    assert env["SSL_CERT_FILE"] == "/etc/ssl/bundle.pem" and env["UV_HTTP_TIMEOUT"] == "180"
    kept = uv_install.uv_environment(sources, {"SSL_CERT_FILE": "/mine.pem", "UV_HTTP_TIMEOUT": "5"})
    assert kept["SSL_CERT_FILE"] == "/mine.pem" and kept["UV_HTTP_TIMEOUT"] == "5"


def test_no_configuration_leaves_uv_its_defaults_and_no_index_is_kept(uv_install):
    assert uv_install.uv_arguments(uv_install.pip_sources("")) == ["--index-strategy", "unsafe-best-match"]
    assert "--no-index" in uv_install.uv_arguments(uv_install.pip_sources(":env:.no-index='true'\n"))


def test_this_interpreters_pip_configuration_is_read(uv_install):
    # The real `pip config list` of this machine, whatever it holds, parses into the sources it names.
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                            check=True).stdout
    sources = uv_install.pip_sources(listed)
    named = {line.partition("=")[0].rpartition(".")[2] for line in listed.splitlines()}
    assert bool(sources.find_links) == ("find-links" in named)
    assert bool(sources.extra_index_urls) == ("extra-index-url" in named)


def find_uv(venv, **env) -> subprocess.CompletedProcess:
    # An empty PATH: no uv of the host's is found; the function needs only the shell's builtins.
    return subprocess.run([shutil.which("bash"), "-c", '. scripts/installer.sh && find_uv "$1"', "find_uv", str(venv)],
                          cwd=ROOT, capture_output=True, text=True, env={"PATH": str(venv / "empty"), **env},
                          timeout=60)


def test_the_installer_is_uv_unless_pip_is_asked_for(tmp_path):
    (tmp_path / "bin").mkdir()
    uv = tmp_path / "bin" / "uv"
    uv.write_text("#!/bin/sh\n")
    uv.chmod(0o755)
    assert find_uv(tmp_path).stdout.strip() == str(uv)  # one already in the environment
    assert find_uv(tmp_path, PARITY_KIT_UV="/opt/uv").stdout.strip() == "/opt/uv"  # the one the caller found
    assert find_uv(tmp_path, PARITY_KIT_INSTALLER="pip").stdout == ""


def test_where_uv_cannot_be_had_pip_installs_and_says_so(tmp_path):
    (tmp_path / "bin").mkdir()
    python = tmp_path / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 1\n")  # its pip cannot install uv (no index, no network)
    python.chmod(0o755)
    proc = find_uv(tmp_path)
    assert proc.returncode == 0 and proc.stdout == ""
    assert "installing with pip" in proc.stderr
