#!/usr/bin/env python
"""Make a checkout's backends findable without installing it: write a dist-info folder (METADATA and
entry_points.txt from pyproject.toml) into a folder on PYTHONPATH.

The backends register through entry points (kit.backends.registry), which only an installed
distribution provides. A GPU node runs the checkout from PYTHONPATH with its own torch and jax and
without a build backend to ``pip install -e .`` with; this gives it the entry points and nothing else.

    python scripts/register_checkout.py FOLDER
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_dist_info(folder: Path) -> Path:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = project["name"], project["version"]
    target = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    target.mkdir(parents=True, exist_ok=True)
    (target / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    text = "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
                   for group, entries in groups.items() if entries)
    (target / "entry_points.txt").write_text(text, encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print(write_dist_info(Path(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
