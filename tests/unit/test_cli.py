"""The command's face for CI logs and editors: help texts, check, schema, backends, `python -m kit`."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib

import jsonschema
import pytest

from kit.backends import registry
from kit.cli import entry
from kit.cli.entry import _parser
from kit.core.exitcodes import ExitCode
from support import ROOT, parity_kit, write_descriptor


def all_parsers(parser: argparse.ArgumentParser, name: str = "parity-kit"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from all_parsers(sub, f"{name} {sub_name}")


def test_every_command_help_lists_its_exit_codes_and_explains_every_argument():
    parsers = dict(all_parsers(_parser()))
    assert {"parity-kit check", "parity-kit schema", "parity-kit backends", "parity-kit golden regen",
            "parity-kit fixture verify"} <= set(parsers)
    for name, parser in parsers.items():
        text = parser.format_help()
        assert "\nexit codes:\n" in text, name
        assert f"    3  {ExitCode.BAD_INPUT.meaning}\n" in text, name  # the epilog keeps its line breaks
        assert f"  130  {ExitCode.INTERRUPTED.meaning}" in text, name
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{name}: {action.option_strings or action.dest} has no help text"


def test_each_command_names_its_own_exit_codes():
    parsers = dict(all_parsers(_parser()))
    assert "    4  control, refresh: baseline blocker" in parsers["parity-kit control"].format_help()
    assert "    4  " not in parsers["parity-kit gate"].format_help()
    assert "    6  refresh: qualification failed" in parsers["parity-kit refresh"].format_help()
    bisect = parsers["parity-kit bisect"].format_help()
    assert "    1  found: the first bad commit is named" in bisect and "    4  no overlay commit is bad" in bisect
    regen = parsers["parity-kit golden regen"].format_help()
    assert "    1  refused: fewer than two backends agree with it" in regen
    assert "    1  a kernel is missing" in parsers["parity-kit kernels"].format_help()
    top = parsers["parity-kit"].format_help()
    assert all(f"{int(code):>5}  {code.meaning}" in top for code in ExitCode)


def test_help_through_the_real_command():
    proc = parity_kit("check", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "exit codes:\n    0  every check passed\n    3  bad input" in proc.stdout


def test_check_prints_each_passed_check_then_ok_and_writes_nothing(tmp_path, embedded):
    proc = parity_kit("check", embedded.descriptor, "--case", "hf-bf16", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"descriptor {embedded.descriptor}: valid, 1 cases (hf-bf16)"
    assert lines[-1] == "ok"
    digest = embedded.doc["model"]["digest"]
    assert f"model {embedded.model}: digest {digest[:16]}... as pinned" in lines
    assert "backend hf: installed here (transformers + torch; the reference that makes the goldens)" in lines
    assert lines[-2] == "case hf-bf16: 64 prompts, top_n 64, golden semantic"
    assert any(line.startswith("kernel parity-kit: installed (") for line in lines)
    assert proc.stderr == ""
    assert list(tmp_path.iterdir()) == []  # no run directory, no lock, nothing


def test_check_quiet_and_verbose(embedded):
    quiet = parity_kit("-q", "check", embedded.descriptor, "--case", "hf-bf16")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "ok\n", "")
    loud = parity_kit("-v", "check", embedded.descriptor, "--case", "hf-bf16")
    assert loud.returncode == 0, loud.stderr
    assert loud.stderr.startswith("hashing model folder ") and " (6 files, 2.4 MiB)...\n" in loud.stderr


def test_check_refuses_with_one_line(tmp_path, embedded):
    bad = write_descriptor(tmp_path, embedded, model_digest="0" * 64, cases={
        "hf-bf16": embedded.doc["cases"]["hf-bf16"]})
    proc = parity_kit("check", bad)
    assert proc.returncode == ExitCode.BAD_INPUT
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"parity-kit: bad input: {bad}:")
    assert f"model folder {embedded.model} has digest {embedded.doc['model']['digest'][:16]}..., " \
           f"but {'0' * 16}... is pinned" in proc.stderr


def test_check_refuses_an_unknown_release(embedded):
    proc = parity_kit("check", embedded.descriptor, "--release", "nope")
    assert proc.returncode == ExitCode.BAD_INPUT
    assert proc.stderr.startswith("parity-kit: bad input: ") and "nope" in proc.stderr


@pytest.fixture(scope="module")
def schema() -> dict:
    proc = parity_kit("schema")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # valid JSON, nothing else on stdout


def test_schema_is_json_that_validates_the_embedded_descriptor(schema, embedded):
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = tomllib.loads(embedded.descriptor.read_text())
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
    # Each case is one backend's schema, chosen by `backend`: every registered backend is in it.
    cases = schema["properties"]["cases"]["additionalProperties"]
    assert cases["discriminator"]["propertyName"] == "backend"
    assert sorted(cases["discriminator"]["mapping"]) == registry.names()
    hf = schema["$defs"]["HfCase"]
    assert hf["properties"]["backend"] == {"const": "hf", "title": "Backend", "type": "string"}
    assert "dtype" in hf["properties"] and hf["additionalProperties"] is False


def test_schema_rejects_what_the_loader_rejects(schema, embedded):
    validator = jsonschema.Draft202012Validator(schema)
    doc = tomllib.loads(embedded.descriptor.read_text())
    typo = {**doc, "cases": {"x": {"backend": "hf", "golden": "semantic", "bound": 0.1, "dtyp": "bfloat16"}}}
    unknown = {**doc, "cases": {"x": {"backend": "nope", "golden": "semantic"}}}
    wrong_option = {**doc, "cases": {"x": {"backend": "hf", "golden": "semantic", "flash_above": 512}}}
    for bad in (typo, unknown, wrong_option):
        errors = list(validator.iter_errors(bad))
        assert errors and list(errors[0].absolute_path)[:2] == ["cases", "x"], bad["cases"]


def test_backends_lists_the_registry():
    proc = parity_kit("backends")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[::2]] == registry.names() == ["hf", "jax", "levanter", "vllm"]
    assert lines[:2] == ["hf: transformers + torch; the reference that makes the goldens",
                         "  kernel parity-kit, notebook parity_hf.ipynb, makes goldens; installed here"]
    # Levanter lives in its own environment: its kernel, not this environment's packages, decides.
    assert lines[5] == ("  kernel parity-kit-levanter, notebook parity_levanter.ipynb, makes goldens; "
                        "its kernel is installed")


@pytest.mark.parametrize("module", ["kit", "kit.cli"])
def test_python_dash_m_is_the_command(module):
    proc = subprocess.run([sys.executable, "-m", module, "--version"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("parity-kit ")


def test_every_command_of_every_group_is_listed_once_in_the_order_help_shows():
    """A group module adds its commands; the entry adds them in its ORDER. A command a group adds but ORDER leaves
    out would silently vanish from the CLI, and one listed twice or by no group would fail every start."""
    added = [name for group in entry.GROUPS for name in group.COMMANDS]
    assert sorted(added) == sorted(entry.ORDER) and len(set(added)) == len(added)
    shown = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(shown.choices) == entry.ORDER


# The commands that live beside another's in its module (kit.cli.entry's docstring, docs/layout.md): every other
# command's handler is in the module named for it.
BESIDE = {"check": "gate", "kernels": "gate", "spec": "gate", "power": "calibrate", "fault": "calibrate",
          "digest": "fixture", "publish": "history", "bisect": "refresh", "lab": "report",
          "schema": "tools", "backends": "tools", "key": "tools"}


def misplaced_handlers(parser: argparse.ArgumentParser) -> list[str]:
    """Each command (or subcommand) whose handler lives in a module named neither for its command nor for the
    group BESIDE names, with that module."""
    out = []
    for name, sub in all_parsers(parser):
        func = sub.get_default("func")
        if func is None:  # a group of subcommands: its leaves have the handlers
            continue
        command = name.split()[1]
        module = func.__module__.rsplit(".", 1)[-1]
        if module != BESIDE.get(command, command):
            out.append(f"{name}: {func.__module__}")
    return out


def test_each_command_is_handled_in_the_module_named_for_it():
    assert misplaced_handlers(_parser()) == []


def test_the_check_finds_a_handler_in_another_commands_module():
    from kit.cli import report

    p = _parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["verify"].set_defaults(func=report._report)
    assert misplaced_handlers(p) == ["parity-kit verify: kit.cli.report"]
