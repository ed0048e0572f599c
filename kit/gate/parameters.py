"""A case notebook's parameters, checked before anything runs.

The gate hands a case to its notebook as two papermill parameters (kit.core.records.contract: ``spec``,
``result_path``), injected in a cell after the notebook's cell tagged ``parameters``. Papermill itself checks none of
it: it only warns of a name the notebook does not declare (its issue #818), and a notebook without a ``parameters`` cell
gets the injected cell on top, where a later ``spec = None`` of its own overwrites what the gate gave. Such a notebook
scores nothing the gate asked for, or fails half way through the run. So the preflight reads each case notebook's
parameters (``papermill.inspect_notebook``) and refuses, in one line naming the notebook and the name, one without a
``parameters`` cell, one whose ``parameters`` cell does not declare a name the gate injects, and one that assigns an
injected name again in a later cell.

A parameter of the ``parameters`` cell that names one of the case's backend options (``mode`` in parity_vllm) is an
override the notebook applies to the case's options (kit.case.runner.notebook_case): it is held to the backend's
options schema, as the descriptor's options are, so that ``mode = "sever"`` is refused instead of running offline.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from kit.core.records import contract
from kit.core.errors import BadInput
from kit.core.records.spec import CaseSpec
from kit.descriptor.load import checked_options
from kit.descriptor.schema import options_schema

INJECTED = (contract.SPEC_PARAM, contract.RESULT_PATH_PARAM)
TAG = "parameters"


def check_case_notebook(spec: CaseSpec, where: str) -> dict[str, Any]:
    """Refuse a case notebook the gate cannot hand its case to (see the module), and its option parameters that the
    backend's schema refuses; returns the options it overrides (name -> value; none for the kit's notebooks)."""
    nb_path = Path(spec.notebook)
    at = f"{where}: case {spec.name}: notebook {nb_path}"
    cells = _code_cells(nb_path, at)
    first = next((i for i, (tags, _) in enumerate(cells) if TAG in tags), None)
    if first is None:
        raise BadInput(f"{at} has no cell tagged `{TAG}`: the gate injects {' and '.join(INJECTED)} after that cell, "
                       "and without it its own cells would overwrite them")
    declared = _parameters(nb_path, at)
    missing = [name for name in INJECTED if name not in declared]
    if missing:
        raise BadInput(f"{at}: its `{TAG}` cell does not declare `{missing[0]}`, which the gate injects "
                       f"(declare `{missing[0]} = None` there)")
    for n, (_, source) in enumerate(cells[first + 1:], start=first + 2):
        again = sorted(_assigned(source) & set(INJECTED))
        if again:
            raise BadInput(f"{at}: code cell {n} assigns `{again[0]}` after the `{TAG}` cell, over what the gate "
                           "injects")
    return option_overrides(spec, declared, at)


def option_overrides(spec: CaseSpec, declared: dict[str, str], at: str) -> dict[str, Any]:
    """The notebook's parameters that name a backend option and are set (not None), held to the options schema."""
    names = set(options_schema(spec.backend).model_fields)
    overrides = {}
    for name in sorted(set(declared) & names):
        try:
            value = ast.literal_eval(declared[name])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise BadInput(f"{at}: parameter `{name} = {declared[name]}` is not a literal, so it cannot be checked "
                           f"against case {spec.name}'s options before it runs") from None
        if value is not None:
            overrides[name] = value
    if overrides:
        try:
            checked_options(spec.backend, {**spec.options, **overrides})
        except BadInput as exc:
            raise BadInput(f"{at}: parameter {exc} (a notebook's option parameters are held to the {spec.backend} "
                           "options schema, as a descriptor's are)") from None
    return overrides


def _code_cells(path: Path, at: str) -> list[tuple[list[str], str]]:
    """Each code cell's tags and source, in order."""
    import nbformat

    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # nbformat raises whatever its reader meets: JSON, schema, encoding, I/O
        raise BadInput(f"{at} cannot be read as a notebook: {type(exc).__name__}: {_first_line(exc)}") from None
    cells = []
    for cell in nb.cells:
        if cell.get("cell_type") == "code":
            tags = cell.get("metadata", {}).get("tags") or []
            cells.append(([str(t) for t in tags] if isinstance(tags, list) else [], str(cell.get("source", ""))))
    return cells


def _parameters(path: Path, at: str) -> dict[str, str]:
    """The names the ``parameters`` cell declares and their defaults' source, as papermill reads them."""
    import papermill

    try:
        found = papermill.inspect_notebook(str(path))
    except Exception as exc:  # papermill's reader and translators raise their own kinds
        raise BadInput(f"{at}: its parameters cannot be read: {type(exc).__name__}: {_first_line(exc)}") from None
    return {str(name): str(p.get("default")) for name, p in found.items()}


def _assigned(source: str) -> set[str]:
    """The names a cell binds in the notebook's namespace: by assignment, a ``for`` or ``with`` target, an import,
    a ``def`` or ``class``, a walrus, ``del``, also inside ``if``, ``for``, ``while``, ``with`` and ``try`` blocks
    (not inside functions and classes, whose names are their own). The cell is read as IPython runs it (``_python``):
    ``spec = !ls`` and ``spec = %env X`` bind ``spec``, and so does the code a ``%time`` or ``%%capture`` runs. None
    for a cell Python cannot parse even so; what ``exec`` or ``globals()`` bind is not seen."""
    try:
        tree = ast.parse(_python(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)  # its body binds names of its own
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.comprehension):  # its target is the comprehension's own
            pending += [node.iter, *node.ifs]
        elif not isinstance(node, ast.Lambda):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)  # an assignment's, a for's or a with's target, a walrus, a del
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
                names.add(node.name)
            elif isinstance(node, ast.Call):
                names |= _magic_binds(node)
            pending.extend(ast.iter_child_nodes(node))
    return names


# The magics that run code of the cell in the notebook's namespace (their argument, or the cell's body): what that
# code binds, the cell binds. ``%timeit`` is not among them: it runs its code inside a function of its own.
_RUNS_CODE = {"run_line_magic": {"time"}, "run_cell_magic": {"time", "capture"}}


def _python(source: str) -> str:
    """A cell as IPython turns it into Python before running it (``!cmd`` a call of ``system``, ``x = !cmd`` of
    ``getoutput``, ``%magic`` of ``run_line_magic``, ``%%magic`` of ``run_cell_magic``); as written if IPython
    cannot read it."""
    from IPython.core.inputtransformer2 import TransformerManager  # the kernel's own reader: a gate's, not a case's

    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # its transformers raise whatever their tokenizer meets; the cell is then parsed as written
        return source


def _magic_binds(call: ast.Call) -> set[str]:
    """What a magic call binds: the names the code it runs binds (``_RUNS_CODE``), and ``%%capture``'s variable."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _RUNS_CODE and len(call.args) >= 2
            and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "get_ipython"):
        return set()
    words = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in call.args]
    if words[0] not in _RUNS_CODE[func.attr]:
        return set()
    names = _assigned(words[-1]) if words[-1] is not None else set()
    if words[0] == "capture" and words[1] is not None:  # %%capture [--no-stdout ...] [name]: the name is bound
        names |= {w for w in words[1].split() if not w.startswith("-")}
    return names


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"
