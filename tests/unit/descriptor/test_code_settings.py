"""A descriptor can make an engine load code and open its server: the kit names each such setting on
stderr, and refuses engine arguments that would open the server beyond loopback unless the case says so."""

from __future__ import annotations

import pytest

from kit.core.errors import BadInput
from kit.descriptor.load import load_descriptor
from support import parity_kit, write_descriptor


def _vllm(embedded, **options) -> dict:
    return {"vllm-pp1": {**embedded.doc["cases"]["vllm-pp1"], **options}}


def _line_of(path, needle):
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_code_loading_env_and_engine_args_are_named_on_stderr(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases=_vllm(
        embedded, env={"LD_PRELOAD": "/tmp/hook.so", "PYTHONPATH": "/tmp/mods", "OMP_NUM_THREADS": "2"},
        engine_args={"trust_remote_code": True, "seed": 1}))
    proc = parity_kit("spec", desc, "vllm-pp1")
    assert proc.returncode == 0, proc.stderr
    at = lambda key: f"parity-kit: warning: {desc}:{_line_of(desc, key)}: case vllm-pp1 sets "  # noqa: E731
    assert proc.stderr.splitlines() == [
        at("LD_PRELOAD =") + "env.LD_PRELOAD: the dynamic loader loads what it names into the engine",
        at("PYTHONPATH =") + "env.PYTHONPATH: Python imports or runs what it names in the engine",
        at("trust_remote_code =") + "engine_args.trust_remote_code: the engine runs the model folder's own "
                                    "Python code",
    ]


def test_release_options_that_load_code_are_named_too(tmp_path, embedded, capsys):
    releases = {"candidate": {"backends": {"vllm": {"kernel": "parity-kit",
                                                    "options": {"env": {"LD_LIBRARY_PATH": "/opt/x"}}}}}}
    desc = write_descriptor(tmp_path, embedded, cases=_vllm(embedded), releases=releases)
    load_descriptor(desc)
    line = _line_of(desc, "LD_LIBRARY_PATH =")
    assert capsys.readouterr().err.splitlines() == [
        f"parity-kit: warning: {desc}:{line}: release candidate sets env.LD_LIBRARY_PATH for case vllm-pp1: "
        "the dynamic loader loads what it names into the engine"]


def test_a_descriptor_without_such_settings_says_nothing(tmp_path, embedded, capsys):
    load_descriptor(write_descriptor(tmp_path, embedded, cases=_vllm(embedded, engine_args={"trust_remote_code":
                                                                                           False})))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("key, value", [("host", "0.0.0.0"), ("port", 8000)])
def test_an_address_beyond_loopback_needs_allow_network(tmp_path, embedded, key, value):
    desc = write_descriptor(tmp_path, embedded, cases=_vllm(embedded, mode="server", engine_args={key: value}))
    with pytest.raises(BadInput) as exc:
        load_descriptor(desc)
    what = {"host": "the address the server listens on", "port": "the port the server listens on"}[key]
    assert str(exc.value) == (f"{desc}:{_line_of(desc, '[cases.vllm-pp1]')}: cases.vllm-pp1: engine_args.{key}: "
                              f"{what}; the kit serves on 127.0.0.1 only unless the case sets allow_network = true")


def test_allow_network_lets_the_case_choose_and_says_so(tmp_path, embedded, capsys):
    desc = write_descriptor(tmp_path, embedded, cases=_vllm(embedded, mode="server", allow_network=True,
                                                            engine_args={"host": "0.0.0.0"}))
    spec = load_descriptor(desc).case_specs(["vllm-pp1"])[0]
    assert spec.options["engine_args"] == {"host": "0.0.0.0"}
    assert capsys.readouterr().err.splitlines() == [
        f"parity-kit: warning: {desc}:{_line_of(desc, 'allow_network =')}: case vllm-pp1 sets allow_network: "
        "engine_args host and port may open the server beyond loopback"]


@pytest.mark.parametrize("options, why", [
    ({"engine_args": {"model": "/elsewhere"}}, "engine_args.model: the kit sets it (the case's pinned model "
                                               "folder); remove it"),
    ({"mode": "server", "allow_network": True, "engine_args": {"served_model_name": "x"}},
     "engine_args.served_model_name: the kit sets it (the name its requests use); remove it"),
    ({"allow_network": True, "engine_args": {"port": 8000}},
     'engine_args.port: only the server (mode = "server") listens'),
])
def test_what_the_kit_sets_itself_is_refused(tmp_path, embedded, options, why):
    desc = write_descriptor(tmp_path, embedded, cases=_vllm(embedded, **options))
    with pytest.raises(BadInput) as exc:
        load_descriptor(desc)
    assert str(exc.value) == f"{desc}:{_line_of(desc, '[cases.vllm-pp1]')}: cases.vllm-pp1: {why}"
