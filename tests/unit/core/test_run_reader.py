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
from kit.core.records.records import CaseResult, Status
from kit.core.records.results import RunDir
from kit.core.records.store import open_store
from support.astguard import derived, docstrings, kit_modules, own_nodes, scopes, with_nothing_allowed

pytestmark = pytest.mark.unit

# The modules that read a run directory's records: the reader, its store, and the names and checks it uses.
READERS = {"core/records/rundir.py", "core/records/results.py", "core/records/store.py",
           "core/records/resultcheck.py"}
# Calls that read a file's content, or list a folder's: each is a read of the run when its path is the run's.
READ_CALLS = {"read_json", "read_json_input", "read_checked", "read_shaped", "read_input_bytes", "read_bytes",
              "read_text", "read_text_input", "open", "load", "loads", "load_case_result", "read_limited", "glob",
              "rglob", "iterdir", "scandir", "listdir", "load_golden", "read_notebook"}
# A gate run's own files (kit.core.records.rundir): the names its readers would build a path from.
RUN_FILES = {"MANIFEST", "RESULT", "EVIDENCE", "CASES", "MODEL_DIGESTS", "TREND", "BAD_MARK", "PUBLISHED",
             "ATTESTATION", "SUMMARY_NOTEBOOK", "SUMMARY_HTML", "SUMMARY_PENDING", "CASE_RESULT", "CASE_NOTEBOOK",
             "CASE_EVIDENCE", "CASE_REFERENCE", "ATTEMPTS", "SUPERSEDED", "RETRIED", "RECORDS"}
# Their literal spellings (not the case files' suffixes, ``.json`` alone, which any file may end with).
RUN_FILE_NAMES = {getattr(rundir, n) for n in RUN_FILES
                  if isinstance(getattr(rundir, n), str) and not getattr(rundir, n).startswith(".")}
# rundir's path builders: what they return is a file of a run.
RUN_PATHS = {"case_file", "case_member", "attempt_notebook", "case_files_present", "member", "newest"}
# (module, function): why it may touch a run's file other than through the reader. Listing a folder's names is
# not reading a record; each entry says what it does with the files.
ALLOWED: dict[tuple[str, str], str] = {
    ("kit.gate.verify.runcheck", "stray_files"):
        "verify lists cases/ for files no listed case left: names, not records",
    ("kit.gate.verify.readable", "_evidence_problems"):
        "verify reads a run anyone may have built through its bounded, non-blocking reads (kit.gate.verify.safeio), "
        "found through the reader",
    ("kit.gate.verify.rederive", "_golden"):
        "verify reads a case's in-kernel reference through its bounded reads (kit.gate.verify.safeio), found "
        "through the reader",
    ("kit.views.summary", "scrap_result"):
        "a running case's notebook scraps, which scrapbook reads from a path (held inside the run by rundir.inside)",
    ("kit.case.interpreter", "run_case_fresh"):
        "a fresh interpreter's case result in a temporary folder of its own (named result.json), not a run's file",
}


def _names_run_file(node: ast.AST, local: set[str]) -> bool:
    """Whether ``node`` builds a path to a gate run's file: a rundir name (``rundir.RESULT``) or path builder
    (``rundir.case_file``), a literal file name of a run (``"manifest.json"``, ``"cases/x.json"``, ``"cases"``),
    or a local assigned from one."""
    # doc["cases"] and doc.get("cases") name a key, not a file
    keys = {id(n.slice) for n in ast.walk(node) if isinstance(n, ast.Subscript)} | {
        id(n.args[0]) for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr == "get" and n.args}
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "rundir" and \
                (n.attr in RUN_FILES or n.attr in RUN_PATHS):
            return True
        if isinstance(n, ast.Name) and (n.id in local or n.id in RUN_PATHS):
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in keys and (
                n.value in RUN_FILE_NAMES or n.value.startswith(f"{rundir.CASES}/")):
            return True
    return False


def _is_reader(node: ast.AST, readers: set[str]) -> bool:
    """Whether ``node`` is the run's reader: ``RunDir(...)``, ``RunDir.local(...)``, a local assigned from one, or an
    attribute holding one (``self.run``)."""
    if isinstance(node, ast.Name):
        return node.id in readers
    if isinstance(node, ast.Call):
        f = node.func
        return (isinstance(f, ast.Name) and f.id == "RunDir") or (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "RunDir")
    return isinstance(node, ast.Attribute) and node.attr == "run"


def _writes(call: ast.Call) -> bool:
    """Whether ``call`` opens a file to write it (``open(p, "w")``, ``p.open("ab")``): writing is the owner's."""
    modes = [a for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    modes += [k.value for k in call.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
    return any(isinstance(m, ast.Constant) and set(str(m.value)) & set("wax") for m in modes)


def offences(source: str, where: str, module: str = "") -> list[str]:
    """What in ``source`` reads a gate run's file (or lists its folders) other than through the reader, builds a
    kernel log's name by hand or defines a control's runs again."""
    tree = ast.parse(source)
    docs = docstrings(tree)
    out = []
    for func, scope in scopes(tree):
        local = derived(scope, lambda value, found: _names_run_file(value, found))
        readers = derived(scope, lambda value, found: _is_reader(value, found))
        for node in own_nodes(scope):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                through_reader = isinstance(f, ast.Attribute) and _is_reader(f.value, readers)
                if name in READ_CALLS and not through_reader and not (name == "open" and _writes(node)) and \
                        (module, func) not in ALLOWED:
                    subject = [*node.args, *(k.value for k in node.keywords)]
                    if isinstance(f, ast.Attribute):
                        subject.append(f.value)
                    if any(_names_run_file(a, local) for a in subject):
                        out.append(f"{where}:{node.lineno}: reads a run's file by hand ({name})")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and rundir.KERNEL_LOG in node.value:
                out.append(f"{where}:{node.lineno}: builds a kernel log's name by hand (rundir.kernel_log)")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("control_runs",
                                                                                     "control_run_dirs"):
            out.append(f"{where}:{node.lineno}: a second definition of a control's runs (rundir.control_run_dirs)")
    return out


def _kit_offences() -> list[str]:
    return [o for module, rel, source in kit_modules() if rel not in READERS for o in offences(source, f"kit/{rel}",
                                                                                               module)]


def test_no_module_outside_the_reader_reads_a_run_or_names_a_kernel_log():
    assert _kit_offences() == []


def test_every_allowed_reader_still_reads_a_run():
    found = with_nothing_allowed(ALLOWED, _kit_offences)
    modules = {m: rel for m, rel, _ in kit_modules()}
    gone = [(m, f) for m, f in ALLOWED if not any(o.startswith(f"kit/{modules.get(m)}:") for o in found)]
    assert gone == [], f"allowed but no longer reading a run's file: {gone}"


@pytest.mark.parametrize("planted, what", [
    ("doc = read_json_input(run_dir / rundir.RESULT, 'x')", "reads a run's file by hand (read_json_input)"),
    ("m = json.loads((run / 'manifest.json').read_text())", "reads a run's file by hand (loads)"),
    ("r = load_case_result(rundir.case_file(cases_dir, name))", "reads a run's file by hand (load_case_result)"),
    ("path = run_dir / 'cases' / f'{name}.evidence.json'\ndata = path.read_bytes()",
     "reads a run's file by hand (read_bytes)"),
    ("with open(Path(d) / rundir.EVIDENCE) as f:\n    text = f.read()", "reads a run's file by hand (open)"),
    ("runs = sorted(Path(root).glob(f'*/{rundir.MANIFEST}'))", "reads a run's file by hand (glob)"),
    ("t = json.load(open(out / rundir.TREND))", "reads a run's file by hand"),
    ("done = [p for p in (run_dir / rundir.CASES).iterdir()]", "reads a run's file by hand (iterdir)"),
    ("marked = read_shaped(Path(run) / 'bad.json', 'bad mark', shape)", "reads a run's file by hand (read_shaped)"),
    ("log = run_dir / 'summary.kernel.log'", "builds a kernel log's name by hand"),
    ("log = run_dir / f'{name}.kernel.log'", "builds a kernel log's name by hand"),
    ("def control_runs(d):\n    return d", "a second definition of a control's runs"),
])
def test_the_guard_finds_a_planted_reader(planted, what):
    found = offences(planted, "kit/planted.py")
    assert len(found) >= 1 and what in found[0] and found[0].startswith("kit/planted.py:"), found


def test_writing_a_run_and_reading_through_the_reader_are_no_offence():
    clean = ("def f(run_dir, result):\n"
             "    write_json(run_dir / rundir.RESULT, result)\n"
             "    with open(run_dir / rundir.EVIDENCE, 'w') as out:\n        out.write('x')\n"
             "    run = RunDir.local(run_dir)\n"
             "    return run.read_json(rundir.TREND), RunDir.local(run_dir).read_bytes(rundir.EVIDENCE), \\\n"
             "        Path('x.json').read_text()\n")
    assert offences(clean, "k.py") == []


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
    run = reader({"a": Status.PASSED, "b": Status.FAILED})
    assert run.manifest()["cases"] == ["a", "b"]
    assert run.case_result("b", "0").status == Status.FAILED
    assert run.case_result("gone") is None  # a case stopped before it wrote its result
    recorded = run.recorded()
    assert recorded.verdict == "failed" and recorded.statuses == {"a": Status.PASSED, "b": Status.FAILED}
    assert run.recorded_verdict() == "failed"


def test_a_run_that_wrote_no_result_states_no_verdict(reader):
    run = reader({"a": Status.PASSED}, verdict=None)
    assert run.recorded() is None and run.recorded_verdict() is None


def test_a_damaged_case_result_is_one_line_naming_its_file(reader):
    run = reader({"a": Status.PASSED})
    run.store.fs.pipe_file(run.store.path(run.rel("cases/a.json")), b'{"case": "a"}') if not run.store.is_local \
        else Path(run.store.path(run.rel("cases/a.json"))).write_text('{"case": "a"}')
    with pytest.raises(BadInput) as refused:
        run.case_result("a")
    assert str(refused.value).startswith(run.where("cases/a.json") + ": ") and "\n" not in str(refused.value)


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/b", ".."])
def test_a_case_name_leading_out_of_the_run_is_refused(reader, name):
    with pytest.raises(BadInput, match="not a file name inside the run directory"):
        reader({"a": Status.PASSED}).case_result(name)


def test_a_link_leading_out_of_a_local_run_is_refused(tmp_path):
    outside = tmp_path / "other"
    outside.mkdir()
    write_json(outside / "a.json", _case("a", Status.PASSED))
    run = _local(tmp_path / "run", {"a": Status.PASSED})
    (tmp_path / "run" / "cases" / "a.json").unlink()
    (tmp_path / "run" / "cases" / "a.json").symlink_to(outside / "a.json")
    with pytest.raises(BadInput, match="a link leading out of"):
        run.case_result("a")


def test_a_kernel_log_is_named_by_one_function(tmp_path):
    assert rundir.kernel_log(tmp_path, "summary") == tmp_path / "summary.kernel.log"
    with pytest.raises(BadInput):
        rundir.kernel_log(tmp_path, "../x")
