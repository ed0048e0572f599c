"""No folder of the kit holds more than about 15 modules, so that a folder's name says what is in it: a folder
that grows past that is split into packages by concern (issue 53, "The layout hides the design")."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

KIT = Path(__file__).resolve().parents[2] / "kit"
MOST = 15


def crowded(root: Path, most: int = MOST) -> list[str]:
    """Each folder under ``root`` with more than ``most`` modules (``__init__`` not counted), and how many."""
    out = []
    for folder in sorted(p for p in [root, *root.rglob("*")] if p.is_dir() and p.name != "__pycache__"):
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > most:
            out.append(f"{folder.relative_to(root.parent).as_posix()}: {len(modules)} modules")
    return out


def test_no_folder_of_the_kit_holds_more_than_about_15_modules():
    assert crowded(KIT) == []


def test_the_check_finds_a_crowded_folder(tmp_path):
    (tmp_path / "kit" / "room").mkdir(parents=True)
    for i in range(MOST + 1):
        (tmp_path / "kit" / "room" / f"m{i}.py").write_text("")
    (tmp_path / "kit" / "room" / "__init__.py").write_text("")
    assert crowded(tmp_path / "kit") == [f"kit/room: {MOST + 1} modules"]
