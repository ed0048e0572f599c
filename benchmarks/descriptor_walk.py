"""How far a descriptor travels through the kit in one command: stays, rooms, climbs, loader entries.

    PYTHONPATH=. .venv/bin/python benchmarks/descriptor_walk.py [gate] [make] [--json OUT]

Runs each command in this process, as `parity-kit` would (``kit.cli.main``), under ``sys.setprofile`` (and
``threading.setprofile``, since a gate runs its cases in threads), and follows the descriptor:

- a **stay** is a call of a function defined under ``kit/`` that is handed the descriptor: an argument other than
  ``self`` holds its path, the loaded descriptor, the plan resolved from it (or its outline, or a checked plan),
  or an object that carries one of those in a field (a run, a request, a making); a call of a method on such an
  object itself (``plan.name``, ``desc.where(...)``) is a **read**, counted apart: the object answering, not the
  descriptor passed on;
- a **room** is a module with at least one stay;
- a **climb** is a stay entered from a stay of another module (its nearest caller on the stack that is a stay)
  that is either higher in the layers of ``.importlinter`` than that caller, or a module the walk has entered
  before (back into a room already left, a call back into a caller's room included);
- the **loader** is ``kit.descriptor.load.load_descriptor``: the descriptor read from its path, counted per call;
  ``load.py entries`` counts the stays and reads entered in ``kit/descriptor/load.py`` from another module.

What runs inside a case's kernel is another process and is not followed: only the commanding process is. The
commands are the smallest real ones on the embedded descriptor (docs/architecture.md, Reading down the layers):
``gate`` is ``parity-kit gate --case checkpoint --no-summary``; ``make`` is ``parity-kit baseline make --case
checkpoint --again --no-power`` on a copy of the embedded descriptor holding that case only, whose [baselines]
folders are a scratch folder (so the evidence gate runs one case and nothing lands in the checkout).
"""

from __future__ import annotations

import argparse
import configparser
import json
import sys
import tempfile
import threading
import tomllib
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KIT = str(ROOT / "kit") + "/"
LOADER = ("kit/descriptor/load.py", "load_descriptor")
# Attributes through which an object carries the descriptor (a run's plan, a making's descriptor, a request's).
CARRIERS = ("plan", "desc", "descriptor", "loaded", "checked", "source", "request", "making")
# The classes that are the descriptor or what is resolved from it, by module and name.
DERIVED = {("kit.descriptor.load", "LoadedDescriptor"), ("kit.descriptor.plan", "Plan"),
           ("kit.descriptor.plan", "Outline"), ("kit.gate.executor", "Checked")}


def layers() -> list[str]:
    """The packages of the layers contract, top first; a line's siblings (``a | b``) share a layer."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / ".importlinter")
    rows = [line.strip() for line in cfg["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]
    return rows


def layer_of(module: str, rows: list[str]) -> int:
    """The index of a module's layer (0 the top); a module under none of them is below them all."""
    for i, row in enumerate(rows):
        if any(module == p or module.startswith(p + ".") for p in (s.strip() for s in row.split("|"))):
            return i
    return len(rows)


@dataclass
class Walk:
    command: str
    argv: list[str]
    exit_code: int | None = None
    stays: int = 0
    rooms: list[str] = field(default_factory=list)
    climbs: int = 0
    loader_calls: int = 0
    load_py_entries: int = 0
    stays_by_room: dict[str, int] = field(default_factory=dict)
    climbs_list: list[str] = field(default_factory=list)
    reads: int = 0  # calls of a method of the descriptor, its plan or an object that carries one, on itself
    path: list[str] = field(default_factory=list)  # each stay, in the order entered
    wall_s: float = 0.0


class Tracer:
    """The profile hook: for each call of a kit function, whether it is a stay, and its nearest stay caller."""

    def __init__(self, descriptor: Path) -> None:
        self.names = {str(descriptor), str(descriptor.resolve())}
        self.rows = layers()
        # (module, nearest stay caller's module, nearest holding caller's module, function, whether a stay)
        self.sequence: list[tuple[str, str | None, str | None, str, bool]] = []
        self.loader_calls = 0
        # id(frame) -> (module, whether a stay) of the frames that hold the descriptor, while they run
        self.frames: dict[int, tuple[str, bool]] = {}
        self.lock = threading.Lock()

    def _holds(self, value: Any, depth: int = 0) -> bool:
        if isinstance(value, (str, Path)):
            return str(value) in self.names
        cls = type(value)
        if (cls.__module__, cls.__name__) in DERIVED:
            return True
        if depth >= 1 or not cls.__module__.startswith("kit."):
            if depth == 0 and isinstance(value, (list, tuple)) and len(value) <= 8:
                return any(self._holds(v, depth + 1) for v in value)
            return False
        fields = getattr(cls, "__dataclass_fields__", None)
        held = vars(value) if hasattr(value, "__dict__") else {}
        for attr in CARRIERS:  # fields and plain attributes only: a property may compute, a traced call itself
            if attr in held:
                inner = held[attr]
            elif fields is not None and attr in fields:
                inner = object.__getattribute__(value, attr)
            else:
                continue
            if inner is not None and inner is not value and self._holds(inner, depth + 1):
                return True
        return False

    def hook(self, frame, event, arg) -> None:
        if event == "return":
            self.frames.pop(id(frame), None)
            return
        if event != "call":
            return
        code = frame.f_code
        filename = code.co_filename
        if not filename.startswith(KIT):
            return
        rel = filename[len(str(ROOT)) + 1:]
        if (rel, code.co_name) == LOADER:
            with self.lock:
                self.loader_calls += 1
        f_locals = frame.f_locals
        nargs = code.co_argcount + code.co_kwonlyargcount
        names = code.co_varnames[:nargs + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)]
        passed = any(self._holds(f_locals.get(n)) for n in names if n in f_locals and n != "self")
        read = not passed and "self" in names[:1] and self._holds(f_locals.get("self"))
        if not (passed or read):
            return
        module = rel[:-3].replace("/", ".").removesuffix(".__init__")
        caller, nearest = frame.f_back, None
        while caller is not None:
            held = self.frames.get(id(caller))
            if held is not None:
                nearest = nearest or held[0]
                if held[1]:
                    break
            caller = caller.f_back
        stay_caller = self.frames[id(caller)][0] if caller is not None else None
        with self.lock:
            self.frames[id(frame)] = (module, passed)
            self.sequence.append((module, stay_caller, nearest, code.co_name, passed))

    def walk(self, walk: Walk) -> Walk:
        seen: set[str] = set()
        rooms: Counter[str] = Counter()
        loader = LOADER[0][:-3].replace("/", ".")
        for module, caller, nearest, function, stay in self.sequence:
            if nearest is not None and nearest != module and module == loader:
                walk.load_py_entries += 1
            if not stay:
                walk.reads += 1
                continue
            rooms[module] += 1
            if caller is not None and caller != module:
                if layer_of(module, self.rows) < layer_of(caller, self.rows) or module in seen:
                    walk.climbs += 1
                    walk.climbs_list.append(f"{caller} -> {module}.{function}")
            seen.add(module)
            walk.path.append(f"{module}.{function}")
        walk.stays = sum(rooms.values())
        walk.rooms = sorted(rooms)
        walk.stays_by_room = dict(rooms.most_common())
        walk.loader_calls = self.loader_calls
        return walk


def run(command: str, argv: list[str], descriptor: Path) -> Walk:
    """One command in this process under the tracer."""
    import time

    from kit import cli

    tracer = Tracer(descriptor)
    walk = Walk(command, argv)
    t0 = time.perf_counter()
    threading.setprofile(tracer.hook)
    sys.setprofile(tracer.hook)
    try:
        walk.exit_code = cli.main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    walk.wall_s = round(time.perf_counter() - t0, 1)
    return tracer.walk(walk)


def one_case_copy(folder: Path, case: str) -> Path:
    """The embedded descriptor with one case, its paths absolute, its [baselines] folders in ``folder``."""
    from kit.core.records import paths

    here = paths.EMBEDDED_DESCRIPTOR.parent
    doc = tomllib.loads(paths.EMBEDDED_DESCRIPTOR.read_text())

    def absolute(value: Any) -> Any:
        if isinstance(value, list):
            return [absolute(v) for v in value]
        return str((here / value).resolve()) if isinstance(value, str) else value

    for table in ("model", "fixture"):
        doc[table]["path"] = absolute(doc[table]["path"])
    for entry in doc.get("models", {}).values():
        entry["path"] = absolute(entry["path"])
    doc["goldens"] = {k: absolute(v) for k, v in doc["goldens"].items()}
    kept = doc["cases"][case]
    for key in ("calibration", "power", "notebook"):
        if key in kept:
            kept[key] = absolute(kept[key])
    doc["cases"] = {case: kept}
    doc["baselines"] = {"lineage": str(folder / "lineage"), "goldens": str(folder / "goldens"),
                        "calibrations": str(folder / "calibrations")}
    import tomli_w

    out = folder / "walk.toml"
    out.write_text(tomli_w.dumps(doc))
    return out


COMMANDS = ("gate", "make")


def command(name: str) -> str:
    """One command to walk, checked by name: a ``choices`` on a ``nargs="*"`` positional would check its list
    default against the choices as one value, and refuse the command line that names none."""
    if name not in COMMANDS:
        raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(COMMANDS)})")
    return name


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: the commands to walk (default: every one), the case, the JSON file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commands", nargs="*", type=command, default=list(COMMANDS), metavar="{gate,make}",
                    help="the commands to walk (default: both)")
    ap.add_argument("--case", default="checkpoint", help="the one case each command runs (default: checkpoint)")
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from kit.core.records import paths

    args = parse_args(argv)
    walks = []
    with tempfile.TemporaryDirectory(prefix="descriptor-walk-") as tmp:
        work = Path(tmp)
        for command in args.commands:
            if command == "gate":
                descriptor = paths.EMBEDDED_DESCRIPTOR
                argv = ["-q", "gate", str(descriptor), "--case", args.case, "--no-summary", "--out",
                        str(work / "gate-run")]
            else:
                descriptor = one_case_copy(work, args.case)
                argv = ["-q", "baseline", "make", str(descriptor), "--case", args.case, "--again", "--no-power",
                        "--reason", "descriptor walk", "--archive", str(work / "no-archive"),
                        "--out", str(work / "make")]
                (work / "no-archive").mkdir(exist_ok=True)
            walks.append(run(command, argv, descriptor))
    print(f"{'command':<8} {'exit':>4} {'stays':>6} {'rooms':>6} {'climbs':>7} {'reads':>6} {'loader':>7} "
          f"{'load.py':>8} {'wall s':>7}")
    for w in walks:
        print(f"{w.command:<8} {w.exit_code!s:>4} {w.stays:>6} {len(w.rooms):>6} {w.climbs:>7} {w.reads:>6} "
              f"{w.loader_calls:>7} {w.load_py_entries:>8} {w.wall_s:>7}")
    if args.json:
        args.json.write_text(json.dumps([asdict(w) for w in walks], indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
