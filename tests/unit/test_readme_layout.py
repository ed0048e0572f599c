"""The `## Layout` section of docs/layout.md stays true to the code: its import-order sentence is the layers contract
of .importlinter, layer for layer, and its layout block names every package under kit/ and no other. Every module
path (`kit/...`) and dotted name (`kit.x.y`, a module or a name a module defines) that README.md and the pages of
docs/ give exists.

.importlinter is what the unit tier enforces (tests/unit/test_import_rules.py); the docs are what a reader
trusts. Packages move and layers are added, and a page nobody checks keeps the old picture; so the expected
sentence is generated from the contract, and a failure shows it, ready to paste. Names are checked by reading the
sources (ast), not by importing them: a backend's runtime imports its engine.
"""

from __future__ import annotations

import ast
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
    # The kit's own layers: a contract of the packages inside one of them (kit.core's) names its container.
    contracts = [s for s in config.sections() if config.get(s, "type", fallback="") == "layers"
                 and not config.has_option(s, "containers")]
    assert len(contracts) == 1, f".importlinter has {len(contracts)} layers contracts of kit's packages; reading one"
    root = config.get("importlinter", "root_package")
    layers = [line.strip() for line in config.get(contracts[0], "layers").splitlines() if line.strip()]
    return [[name.strip().removeprefix(f"{root}.") for name in layer.split("|")] for layer in layers]


def expected_sentence(layers: list[list[str]]) -> str:
    return PREFIX + "`" + " > ".join(" | ".join(layer) for layer in layers) + "`"


LAYOUT = "docs/layout.md"


def layout_section(page: str) -> str:
    match = re.search(r"^## Layout\n(.*?)(?=^## )", page, re.S | re.M)
    assert match, f"{LAYOUT} has no `## Layout` section followed by another section"
    return match.group(1)


def layout_problems(page: str, importlinter: str, packages: set[str]) -> list[str]:
    """What the Layout section of ``page`` says that .importlinter and kit/ do not: one line each."""
    section = layout_section(page)
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


def test_the_layout_page_matches_the_import_contract_and_the_packages():
    page, importlinter = (ROOT / LAYOUT).read_text(), (ROOT / ".importlinter").read_text()
    assert layout_problems(page, importlinter, kit_packages(ROOT / "kit")) == []


def test_the_contract_is_read_layer_for_layer():
    layers = contract_layers((ROOT / ".importlinter").read_text())
    assert layers[0] == ["cli"] and layers[-1] == ["core"]
    assert {name for layer in layers for name in layer} == kit_packages(ROOT / "kit")


def test_a_stale_layout_is_found():
    importlinter = ("[importlinter]\nroot_package = kit\n\n[importlinter:contract:layers]\nname = x\ntype = layers\n"
                    "layers =\n    kit.cli\n    # a comment\n    kit.goldens | kit.refresh\n    kit.core\n")
    page = ("# kit\n\n## Layout\n\n```\nkit/core/    formats\nkit/gate/    the gate\n```\n\n"
            "Imports run one way, `cli > {refresh, goldens} >\ncore`, and more.\n\n## Next\n")
    assert layout_problems(page, importlinter, {"core", "goldens", "refresh"}) == [
        "the import order reads 'Imports run one way, `cli > {refresh, goldens} > core`'; .importlinter's layers "
        "say 'Imports run one way, `cli > goldens | refresh > core`'",
        "kit/goldens/ is a package the layout block does not name",
        "kit/refresh/ is a package the layout block does not name",
        "the layout block names kit/gate/, which is no package",
    ]
    fixed = page.replace("`cli > {refresh, goldens} >\ncore`", "`cli > goldens | refresh >\n    core`").replace(
        "kit/gate/    the gate", "kit/goldens/ kit/refresh/   the commands")
    assert layout_problems(fixed, importlinter, {"core", "goldens", "refresh"}) == []


DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
# Named on purpose though not in the tree: the wheel's data folder (the build maps the checkout's data folders
# into it) and the module a page's example of adding an executor would create.
NOT_IN_THE_TREE = {"kit/_data/", "kit.gate.slurm_executor"}
PATH = re.compile(r"(?<![\w/.-])kit/[\w./-]*\w/?")
DOTTED = re.compile(r"(?<![\w./-])kit(?:\.[A-Za-z_]\w*)+")


def _module_file(root: Path, parts: list[str]) -> Path | None:
    base = root.joinpath(*parts)
    return next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)


def _defines(tree: ast.Module, names: list[str]) -> bool:
    """Whether the module defines ``names`` (a function, class or assignment; a method or attribute of a class
    it defines), each within the one before it."""
    body: list[ast.stmt] = tree.body
    for name in names:
        found = None
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                found = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom)):
                bound = ([a.asname or a.name.split(".")[-1] for a in node.names]
                         if isinstance(node, (ast.Import, ast.ImportFrom)) else
                         [n.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                          for n in ast.walk(t) if isinstance(n, ast.Name)])
                found = node if name in bound else found
        if found is None:
            return False
        body = getattr(found, "body", [])
    return True


def name_problems(text: str, where: str, root: Path) -> list[str]:
    """Each `kit/...` path of ``text`` that is not in ``root``, and each dotted `kit.` name that is no module
    and no name a module defines: one line each."""
    problems = []
    for found in sorted({m.group(0).rstrip(".") for m in PATH.finditer(text)} - NOT_IN_THE_TREE):
        if not (root / found).exists():
            problems.append(f"{where}: {found} does not exist")
    for found in sorted({m.group(0) for m in DOTTED.finditer(text)} - NOT_IN_THE_TREE):
        parts = found.split(".")
        module = next(((n, f) for n in range(len(parts), 0, -1) if (f := _module_file(root, parts[:n]))), None)
        if module is None:
            problems.append(f"{where}: {found} is no module")
        elif parts[module[0]:] and not _defines(ast.parse(module[1].read_text()), parts[module[0]:]):
            problems.append(f"{where}: {found}: {'.'.join(parts[:module[0]])} defines no "
                            f"{'.'.join(parts[module[0]:])}")
    return problems


def test_every_module_path_and_name_the_docs_give_exists():
    assert "docs/architecture.md" in DOCS
    assert [p for doc in DOCS for p in name_problems((ROOT / doc).read_text(), doc, ROOT)] == []


def test_a_stale_path_or_name_is_found(tmp_path):
    (tmp_path / "kit" / "core" / "records").mkdir(parents=True)
    (tmp_path / "kit" / "__init__.py").write_text("")
    (tmp_path / "kit" / "core" / "__init__.py").write_text("")
    (tmp_path / "kit" / "core" / "records" / "__init__.py").write_text("")
    (tmp_path / "kit" / "core" / "records" / "paths.py").write_text(
        "ROOT = 1\n\n\nclass Tree:\n    def walk(self):\n        pass\n")
    text = ("`kit/core/records/paths.py` and `kit/core/paths.py`; kit.core.records.paths.ROOT, "
            "`kit.core.records.paths.Tree.walk`, kit.core.records.paths.Tree.read, kit.core.paths, "
            "kit.core.records.paths.gone. The wheel's kit/_data/ is named on purpose.")
    assert name_problems(text, "README.md", tmp_path) == [
        "README.md: kit/core/paths.py does not exist",
        "README.md: kit.core.paths: kit.core defines no paths",
        "README.md: kit.core.records.paths.Tree.read: kit.core.records.paths defines no Tree.read",
        "README.md: kit.core.records.paths.gone: kit.core.records.paths defines no gone",
    ]
