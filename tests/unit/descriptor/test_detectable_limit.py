"""A descriptor's detectable-effect limit and power records: bad input is one line and nothing runs."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest

from kit.cli import main
from kit.core.records import paths
from kit.core.errors import BadInput
from kit.core.noise.power import read_power
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from kit.descriptor.standing import Standing

EMBEDDED = paths.EMBEDDED_DESCRIPTOR
FAMILIES = {"position", "attention", "mlp", "normalization", "output"}


def _copy(tmp_path: Path, edit) -> Path:
    """The embedded descriptor with its relative paths made absolute, edited by ``edit`` (text -> text)."""
    text = EMBEDDED.read_text().replace('"../', f'"{EMBEDDED.parent.parent}/')
    path = tmp_path / "power.toml"
    path.write_text(edit(text))
    return path


def _in_case(case: str, lines: str):
    """An edit adding ``lines`` at the top of ``[cases.<case>]``."""
    return lambda text: text.replace(f"[cases.{case}]\n", f"[cases.{case}]\n{lines}\n", 1)


def _without_power(text: str, case: str) -> str:
    """The descriptor without the case's ``power = [...]`` line."""
    lines, inside = text.splitlines(keepends=True), False
    for i, line in enumerate(lines):
        inside = line.strip() == f"[cases.{case}]" or (inside and not line.startswith("["))
        if inside and line.startswith("power = "):
            return "".join(lines[:i] + lines[i + 1:])
    raise AssertionError(f"case {case} lists no power record")


def test_every_semantic_case_of_the_embedded_descriptor_states_its_detectable_effect_per_family():
    plan = resolve(load_descriptor(EMBEDDED))
    stated = {n: c.spec.power for n, c in plan.cases.items()
              if c.spec.golden_kind == "semantic" and c.spec.calibration and not c.spec.decode}
    assert set(stated) == {"hf-bf16", "levanter", "vllm-pp1", "vllm-pp2"}
    for name, power in stated.items():
        assert power is not None, name
        assert set(power["families"]) == FAMILIES, name
        assert power["probability"] == 0.8
        for family, p in power["families"].items():
            assert p["tried"], (name, family)  # measured, never assumed


@pytest.mark.parametrize("value, expected", [
    ("0", "greater than 0"), ("-1.5", "greater than 0"), ("nan", "finite number"), ('"2x"', "valid number")])
def test_a_limit_that_is_not_a_positive_number_is_one_line_naming_its_key(tmp_path, capsys, value, expected):
    desc = _copy(tmp_path, _in_case("hf-bf16", f"detectable_limit = {value}"))
    assert main(["check", str(desc)]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cases.hf-bf16.detectable_limit" in err and expected in err
    assert re.search(r"power\.toml:\d+", err)


def test_a_limit_without_a_power_record_for_the_record_in_use_is_no_baseline_with_the_command_that_makes_it(
        tmp_path, capsys):
    desc = _copy(tmp_path, lambda t: _in_case("hf-bf16", "detectable_limit = 2")(_without_power(t, "hf-bf16")))
    spec = resolve(load_descriptor(desc), ["hf-bf16"]).cases["hf-bf16"].spec
    missing = spec.no_baseline
    assert missing is not None and missing.kind == "power" and "\n" not in missing.reason
    assert ("cases.hf-bf16.detectable_limit: a limit of 2x the clean error, but no power record measured"
            in missing.reason)
    assert missing.command == f"parity-kit baseline make {paths.display(desc)} --case hf-bf16 --reason \"...\""
    # Never bad input: the preflight passes and says the case is not judged here; status says what is missing.
    assert main(["check", str(desc), "--case", "hf-bf16"]) == 0
    assert "case hf-bf16: not judged here: no baseline for this hardware: " in capsys.readouterr().out
    assert main(["baseline", "status", str(desc), "--case", "hf-bf16", "--json"]) == 7
    rows = {r["kind"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["power"]["standing"] == Standing.MISSING and rows["power"]["remedy"] == missing.command


def test_a_power_record_of_a_calibration_record_the_case_never_listed_is_refused_in_one_line(tmp_path, capsys,
                                                                                             host_class):
    # Levanter's record on hf-bf16: its figures are another case's, which `check` used to pass and leave unused.
    # The record levanter lists, not the one this host's class makes it use: on a host of no class it has records
    # for, the case may use none.
    levanter_power = str((EMBEDDED.parent / tomllib.loads(EMBEDDED.read_text())["cases"]["levanter"]["power"][0])
                         .resolve())
    desc = _copy(tmp_path, lambda t: _in_case("hf-bf16", f'power = ["{levanter_power}"]')(_without_power(t, "hf-bf16")))
    assert main(["check", str(desc), "--case", "hf-bf16"]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(r"power\.toml:\d+: cases\.hf-bf16\.power: ", err)
    # The record it names, which on a host of another class than it was measured on is not the one levanter uses.
    named = read_power(Path(levanter_power))["record_sha256"]
    assert (f"{paths.display(Path(levanter_power))} was measured against calibration record {named[:12]}, which the "
            "case does not list, nor did it through its lineage") in err


def test_a_power_record_that_is_not_one_is_one_line_naming_it(tmp_path):
    data = b'{"record_sha256":7}\n'  # named by its digest, as a power record is: only what it holds is wrong
    bogus = tmp_path / f"{hashlib.sha256(data).hexdigest()}.json"
    bogus.write_bytes(data)
    desc = _copy(tmp_path, lambda t: _in_case("hf-bf16", f'power = ["{bogus}"]')(_without_power(t, "hf-bf16")))
    with pytest.raises(BadInput) as exc:
        resolve(load_descriptor(desc), ["hf-bf16"])
    assert str(exc.value).endswith(f"cases.hf-bf16.power: {bogus}: record_sha256: expected the calibration record "
                                   "it was measured against")
