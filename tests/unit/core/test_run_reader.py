"""One reader of a run directory (kit.core.records.results.RunDir over kit.core.records.store.Store): the manifest,
result.json and case files are read in one module, here or in a bucket, and no other module of the kit reads them
or builds a kernel log's name by hand (issue 53, "Run directories read many ways")."""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path

import pytest

from kit.core.errors import BadInput
from kit.core.records import rundir
from kit.core.records.jsonio import write_json
from kit.core.records.records import FAILED, PASSED, CaseResult
from kit.core.records.results import RunDir
from kit.core.records.store import open_store

pytestmark = pytest.mark.unit

KIT = Path(__file__).resolve().parents[3] / "kit"
# The modules that read a run directory's records: the reader, its store, and the names and checks it uses.
READERS = {"core/records/rundir.py", "core/records/results.py", "core/records/store.py",
           "core/records/resultcheck.py"}
# Calls that read a file's content.
READ_CALLS = {"read_json", "read_json_input", "read_checked", "read_shaped", "read_input_bytes", "read_bytes",
              "read_text", "read_text_input", "open", "load", "loads"}
RECORDS = {"RESULT", "MANIFEST"}
RECORD_NAMES = {"result.json", "manifest.json"}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of ``tree``: a docstring may name a file without reading it."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _names_record(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Attribute) and n.attr in RECORDS and isinstance(n.value, ast.Name)
                and n.value.id == "rundir")
               or (isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in RECORD_NAMES)
               for n in ast.walk(node))


def offences(source: str, where: str) -> list[str]:
    """What in ``source`` reads a run's manifest or result.json, builds a kernel log's name or defines a control's
    runs, other than through the reader."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in READ_CALLS and any(_names_record(a) for a in [*node.args, *(k.value for k in node.keywords)]):
                out.append(f"{where}:{node.lineno}: reads a run's record by hand ({name})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                and rundir.KERNEL_LOG in node.value:
            out.append(f"{where}:{node.lineno}: builds a kernel log's name by hand (rundir.kernel_log)")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("control_runs",
                                                                                       "control_run_dirs"):
            out.append(f"{where}:{node.lineno}: a second definition of a control's runs (rundir.control_run_dirs)")
    return out


def test_no_module_outside_the_reader_reads_a_run_or_names_a_kernel_log():
    found = []
    for path in sorted(KIT.rglob("*.py")):
        rel = path.relative_to(KIT).as_posix()
        if rel not in READERS:
            found += offences(path.read_text(encoding="utf-8"), f"kit/{rel}")
    assert found == []


@pytest.mark.parametrize("planted, what", [
    ("doc = read_json_input(run_dir / rundir.RESULT, 'x')", "reads a run's record by hand (read_json_input)"),
    ("m = json.loads((run / 'manifest.json').read_text())", "reads a run's record by hand (loads)"),
    ("log = run_dir / 'summary.kernel.log'", "builds a kernel log's name by hand"),
    ("log = run_dir / f'{name}.kernel.log'", "builds a kernel log's name by hand"),
    ("def control_runs(d):\n    return d", "a second definition of a control's runs"),
])
def test_the_guard_finds_a_planted_reader(planted, what):
    found = offences(planted, "kit/planted.py")
    assert len(found) == 1 and what in found[0] and found[0].startswith("kit/planted.py:1")


def test_a_docstring_naming_a_kernel_log_is_no_offence():
    assert offences('def f():\n    """Writes x.kernel.log."""\n    return rundir.kernel_log(d, "x")\n', "k.py") == []


def _case(name: str, status: str) -> dict:
    return CaseResult(case=name, backend="hf", status=status).to_dict()


def _write_run(put, cases: dict[str, str], verdict: str | None) -> None:
    """A gate run through ``put(relative, bytes)``: its manifest, each case's result, and result.json."""
    put(rundir.MANIFEST, json.dumps({"name": "t", "cases": list(cases), "kit_version": "0"}).encode())
    for name, status in cases.items():
        put(f"{rundir.CASES}/{name}.json", json.dumps(_case(name, status)).encode())
    if verdict is not None:
        put(rundir.RESULT, json.dumps({"verdict": verdict, "cases": {n: {"status": s} for n, s in cases.items()}})
            .encode())


def _local(tmp_path: Path, cases: dict[str, str], verdict: str | None = "failed") -> RunDir:
    def put(rel: str, data: bytes) -> None:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    _write_run(put, cases, verdict)
    return RunDir.local(tmp_path)


def _memory(cases: dict[str, str], verdict: str | None = "failed") -> RunDir:
    store = open_store(f"memory://runs-{uuid.uuid4().hex}")
    _write_run(lambda rel, data: store.fs.pipe_file(store.path(f"r1/{rel}"), data), cases, verdict)
    return RunDir(store, "r1")


@pytest.fixture(params=["local", "memory"])
def reader(request, tmp_path):
    def make(cases, verdict="failed"):
        return _local(tmp_path, cases, verdict) if request.param == "local" else _memory(cases, verdict)
    return make


def test_the_reader_reads_a_run_the_same_here_and_in_a_store(reader):
    run = reader({"a": PASSED, "b": FAILED})
    assert run.manifest()["cases"] == ["a", "b"]
    assert run.case_result("b", "0").status == FAILED
    assert run.case_result("gone") is None  # a case stopped before it wrote its result
    recorded = run.recorded()
    assert recorded.verdict == "failed" and recorded.statuses == {"a": PASSED, "b": FAILED}
    assert run.recorded_verdict() == "failed"


def test_a_run_that_wrote_no_result_states_no_verdict(reader):
    run = reader({"a": PASSED}, verdict=None)
    assert run.recorded() is None and run.recorded_verdict() is None


def test_a_damaged_case_result_is_one_line_naming_its_file(reader):
    run = reader({"a": PASSED})
    run.store.fs.pipe_file(run.store.path(run.rel("cases/a.json")), b'{"case": "a"}') if not run.store.is_local \
        else Path(run.store.path(run.rel("cases/a.json"))).write_text('{"case": "a"}')
    with pytest.raises(BadInput) as refused:
        run.case_result("a")
    assert str(refused.value).startswith(run.where("cases/a.json") + ": ") and "\n" not in str(refused.value)


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/b", ".."])
def test_a_case_name_leading_out_of_the_run_is_refused(reader, name):
    with pytest.raises(BadInput, match="not a file name inside the run directory"):
        reader({"a": PASSED}).case_result(name)


def test_a_link_leading_out_of_a_local_run_is_refused(tmp_path):
    outside = tmp_path / "other"
    outside.mkdir()
    write_json(outside / "a.json", _case("a", PASSED))
    run = _local(tmp_path / "run", {"a": PASSED})
    (tmp_path / "run" / "cases" / "a.json").unlink()
    (tmp_path / "run" / "cases" / "a.json").symlink_to(outside / "a.json")
    with pytest.raises(BadInput, match="a link leading out of"):
        run.case_result("a")


def test_a_kernel_log_is_named_by_one_function(tmp_path):
    assert rundir.kernel_log(tmp_path, "summary") == tmp_path / "summary.kernel.log"
    with pytest.raises(BadInput):
        rundir.kernel_log(tmp_path, "../x")
