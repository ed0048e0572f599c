"""README.md's `## Layout` section stays true to the code: its import-order sentence is the layers contract of
.importlinter, layer for layer, and its layout block names every package under kit/ and no other.

.importlinter is what the unit tier enforces (tests/unit/test_import_rules.py); the README is what a reader
trusts. Packages move and layers are added, and a README nobody checks keeps the old picture; so the expected
sentence is generated from the contract, and a failure shows it, ready to paste.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

from support import ROOT

pytestmark = pytest.mark.unit

PREFIX = "Imports run one way, "


def contract_layers(importlinter: str) -> list[list[str]]:
    """The layers contract's layers, top first, each the packages it holds (siblings split on `|`), without
    the root package: [["cli"], ["views"], ["bisect", "calibrate", ...], ...]."""
    config = configparser.ConfigParser(inline_comment_prefixes=("#",))
    config.read_string(importlinter)
    contracts = [s for s in config.sections() if config.get(s, "type", fallback="") == "layers"]
    assert len(contracts) == 1, f".importlinter has {len(contracts)} layers contracts; this test reads one"
    root = config.get("importlinter", "root_package")
    layers = [line.strip() for line in config.get(contracts[0], "layers").splitlines() if line.strip()]
    return [[name.strip().removeprefix(f"{root}.") for name in layer.split("|")] for layer in layers]


def expected_sentence(layers: list[list[str]]) -> str:
    return PREFIX + "`" + " > ".join(" | ".join(layer) for layer in layers) + "`"


def layout_section(readme: str) -> str:
    match = re.search(r"^## Layout\n(.*?)(?=^## )", readme, re.S | re.M)
    assert match, "README.md has no `## Layout` section followed by another section"
    return match.group(1)


def layout_problems(readme: str, importlinter: str, packages: set[str]) -> list[str]:
    """What README's Layout section says that .importlinter and kit/ do not: one line each."""
    section = layout_section(readme)
    problems = []
    expected = expected_sentence(contract_layers(importlinter))
    found = re.search(re.escape(PREFIX) + r"`[^`]*`", section)
    said = re.sub(r"\s+", " ", found.group(0)) if found else None
    if said != expected:
        problems.append(f"the import order reads {said!r}; .importlinter's layers say {expected!r}")
    block = re.search(r"^```\n(.*?)^```", section, re.S | re.M)
    named = set(re.findall(r"\bkit/([a-z]\w*)/", block.group(1))) if block else set()
    problems += [f"kit/{p}/ is a package the layout block does not name" for p in sorted(packages - named)]
    problems += [f"the layout block names kit/{p}/, which is no package" for p in sorted(named - packages)]
    return problems


def kit_packages(kit: Path) -> set[str]:
    return {p.parent.name for p in kit.glob("*/__init__.py")}


def test_the_readme_layout_matches_the_import_contract_and_the_packages():
    readme, importlinter = (ROOT / "README.md").read_text(), (ROOT / ".importlinter").read_text()
    assert layout_problems(readme, importlinter, kit_packages(ROOT / "kit")) == []


def test_the_contract_is_read_layer_for_layer():
    layers = contract_layers((ROOT / ".importlinter").read_text())
    assert layers[0] == ["cli"] and layers[-1] == ["core"]
    assert {name for layer in layers for name in layer} == kit_packages(ROOT / "kit")


def test_a_stale_layout_is_found():
    importlinter = ("[importlinter]\nroot_package = kit\n\n[importlinter:contract:layers]\nname = x\ntype = layers\n"
                    "layers =\n    kit.cli\n    # a comment\n    kit.goldens | kit.refresh\n    kit.core\n")
    readme = ("# kit\n\n## Layout\n\n```\nkit/core/    formats\nkit/gate/    the gate\n```\n\n"
              "Imports run one way, `cli > {refresh, goldens} >\ncore`, and more.\n\n## Next\n")
    assert layout_problems(readme, importlinter, {"core", "goldens", "refresh"}) == [
        "the import order reads 'Imports run one way, `cli > {refresh, goldens} > core`'; .importlinter's layers "
        "say 'Imports run one way, `cli > goldens | refresh > core`'",
        "kit/goldens/ is a package the layout block does not name",
        "kit/refresh/ is a package the layout block does not name",
        "the layout block names kit/gate/, which is no package",
    ]
    fixed = readme.replace("`cli > {refresh, goldens} >\ncore`", "`cli > goldens | refresh >\n    core`").replace(
        "kit/gate/    the gate", "kit/goldens/ kit/refresh/   the commands")
    assert layout_problems(fixed, importlinter, {"core", "goldens", "refresh"}) == []
