"""No folder claimed outside the lifecycle: a guard over kit/'s syntax tree.

A command that owns a folder (a gate run, a control, a regen, a power measurement, a history page) claims it by one
rule and locks it one way (kit.run.lifecycle: ``claim``, ``claim_locked``, ``locked``, ``owned``): a folder a live
command holds is refused naming that command, one that holds anything else is refused as full, and a stop is
recorded before the lock is let go. A command that makes its folder itself, or takes the lock itself, skips some of
that. This finds it by construction: in any module but the lifecycle and the primitives it is built on,

- a call to a claiming or locking primitive: ``claim_empty_dir``, ``runlock.acquire``, ``RunLock(...)``,
  ``fcntl.flock``;
- a folder made (``.mkdir()``, ``os.mkdir``, ``os.makedirs``, ``paths.make_dir``) whose path is a command's own
  folder: a new run directory's name (``rundir.new_run_dir``, a ``default_*dir``), a variable, attribute or local
  named like one (a ``_``-word ``run``/``control``/``regen``/``power``/``history``/``work``/``out`` with ``dir``, or
  ``out``), or the run's claim marker (``run_dir / rundir.CASES``). A folder made inside an owned one
  (``work_dir / "calibrate"``) is the owner's.

What makes such a folder and is no command's claim is listed in ``ALLOWED`` with why.
"""

from __future__ import annotations

import ast

import pytest

from support.astguard import derived, kit_modules, name_of, own_nodes, scopes, with_nothing_allowed, words

pytestmark = pytest.mark.unit

# The lifecycle, and the primitives it is built on.
OWNERS = {"kit.run.lifecycle", "kit.run.runlock", "kit.core.records.paths"}
PRIMITIVES = {"claim_empty_dir", "flock", "RunLock"}
FOLDER_WORDS = frozenset({"run", "control", "regen", "power", "history", "work", "out"})
MAKERS = {"mkdir", "makedirs", "make_dir"}
NEW_FOLDERS = {"new_run_dir"}
# (module, function): why it may make such a folder itself.
ALLOWED: dict[tuple[str, str], str] = {
    ("kit.faults.checkpoint", "write_checkpoint"):
        "makes the fault copy's folder that kit.faults.inject claimed through lifecycle.claim and emptied again, "
        "so that creating it here is atomic (it refuses one that exists)",
    ("kit.run.signing", "generate"): "a folder of signing keys, which no command owns",
    ("kit.gate.executor", "_resume"): "a resumed run's cases/, made again under the lock lifecycle.locked took",
    ("kit.refresh.build", "build_release"):
        "a refresh step's folder: inside the refresh folder lifecycle.owned holds, or, run alone from its notebook, "
        "a build-<time> folder of its own (exist_ok: the notebook may be run again in it)",
    ("kit.refresh.qualify", "qualify_release"):
        "a refresh step's folder: inside the refresh folder lifecycle.owned holds, or, run alone from its notebook, "
        "a qualify-<time> folder of its own (exist_ok: the notebook may be run again in it)",
    ("kit.run.warmkernels", "holding"): "a warm kernel's lock on its own file, not a command's folder",
    ("kit.run.warmkernels", "running"): "a warm kernel's lock on its own file, not a command's folder",
    ("kit.run.zygote", "hold_lock"): "a kernel zygote's lock on its own file, not a command's folder",
}


def _is_folder(node: ast.AST, local: set[str]) -> bool:
    """Whether ``node`` is a command's own folder: see the module's docstring."""
    if isinstance(node, ast.Name) and node.id in local:
        return True
    if isinstance(node, ast.Call):
        f = node.func
        called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if called in NEW_FOLDERS or (called.startswith("default_") and called.endswith("dir")):
            return True
        if called in ("Path", "expanduser", "resolve", "absolute") or (called == "str" and node.args):
            return any(_is_folder(a, local) for a in [*node.args, *([f.value] if isinstance(f, ast.Attribute)
                                                                    and called != "Path" else [])])
        return False
    if isinstance(node, ast.BoolOp):
        return any(_is_folder(v, local) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        right = node.right
        marker = (isinstance(right, ast.Attribute) and right.attr == "CASES") or (
            isinstance(right, ast.Constant) and right.value == "cases")
        return marker and _is_folder(node.left, local)
    name = name_of(node)
    if name is None:
        return False
    w = words(name)
    return name == "out" or (bool(w & FOLDER_WORDS) and "dir" in w)


def findings(source: str, module: str) -> list[tuple[str, str, int, str]]:
    """(module, function, line, what) for each folder claimed or locked in ``source`` outside the lifecycle."""
    if module in OWNERS:
        return []
    tree = ast.parse(source)
    out = []
    for func, scope in scopes(tree):
        local = derived(scope, lambda value, found: _is_folder(value, found))
        for node in own_nodes(scope):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            what = None
            if called in PRIMITIVES or (called == "acquire" and isinstance(f, ast.Attribute)
                                        and name_of(f.value) == "runlock"):
                what = f"claims or locks a folder itself ({called})"
            elif called in MAKERS:
                target = f.value if called == "mkdir" and isinstance(f, ast.Attribute) and not node.args else \
                    node.args[0] if node.args else None
                if target is not None and _is_folder(target, local):
                    what = f"makes a command's folder itself ({called})"
            if what and (module, func) not in ALLOWED:
                out.append((module, func, node.lineno, what))
    return out


def _kit_findings() -> list[tuple[str, str, int, str]]:
    return [f for module, _, source in kit_modules() for f in findings(source, module)]


def test_every_folder_is_claimed_through_the_lifecycle():
    found = _kit_findings()
    assert found == [], "folders claimed or locked outside kit.run.lifecycle:\n" + "\n".join(
        f"  {m}.{f}:{line}: {what}" for m, f, line, what in found)


def test_every_allowed_maker_still_makes_its_folder():
    used = {(m, f) for m, f, _, _ in with_nothing_allowed(ALLOWED, _kit_findings)}
    assert set(ALLOWED) <= used, f"allowed but no longer making a folder: {sorted(set(ALLOWED) - used)}"


@pytest.mark.parametrize("planted, what", [
    ("def f(out):\n    return paths.claim_empty_dir(out, '--out', 'history')\n", "itself (claim_empty_dir)"),
    ("def f(run_dir, command):\n    return runlock.acquire(run_dir, command)\n", "itself (acquire)"),
    ("def f(out, name):\n    Path(out or rundir.new_run_dir('regen', name)).mkdir(parents=True)\n", "itself (mkdir)"),
    ("def f(control_dir):\n    os.makedirs(control_dir, exist_ok=True)\n", "itself (makedirs)"),
    ("def f(n):\n    work = rundir.new_run_dir('power', n)\n    work.mkdir()\n", "itself (mkdir)"),
    ("def f(run_dir):\n    (run_dir / rundir.CASES).mkdir()\n", "itself (mkdir)"),
    ("def f(opts):\n    paths.make_dir(opts.out_dir, '--out')\n", "itself (make_dir)"),
    ("def f(desc):\n    d = default_control_dir(desc)\n    d.mkdir(parents=True)\n", "itself (mkdir)"),
    ("def f(fd):\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n", "itself (flock)"),
])
def test_a_planted_claim_is_found(planted, what):
    (found,) = findings(planted, "kit.planted")
    assert found[:2] == ("kit.planted", "f") and found[3].endswith(what), found


def test_the_lifecycle_and_folders_inside_an_owned_one_pass():
    clean = ("def f(out, command, work_dir, step_dir):\n"
             "    run_dir = lifecycle.claim(out, '--out', 'x', command)\n"
             "    with lifecycle.owned(run_dir, command, 'x'):\n"
             "        paths.make_dir(work_dir / 'calibrate', 'x')\n"
             "        step_dir.mkdir(parents=True)\n"
             "        (work_dir / 'figures').mkdir(exist_ok=True)\n")
    assert findings(clean, "kit.clean") == []
