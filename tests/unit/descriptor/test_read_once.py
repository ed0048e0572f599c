"""A command reads its descriptor from its file once and resolves each descriptor it holds once: what follows the
command's entry reads the loaded descriptor and its plan, never the path again (docs/architecture.md, Reading
down the layers).

Both commands run as a user runs them (``kit.cli.main``), on a one-case descriptor, with the case's kernel left
out (every case passes on no prompts): ``gate`` whole, and ``baseline make`` remaking the exact golden, its
maker a copy of the golden the descriptor names (the real one runs torch in a process of its own), through its
evidence gate to the placed files. Counted: the descriptor file read (``_read_text``, which only
``load_descriptor`` calls) and the resolutions (``LoadedDescriptor.case_specs``) per loaded descriptor.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from kit import cli
from kit.descriptor import load
from support import cases_pass_without_kernels, write_descriptor

pytestmark = pytest.mark.unit


@pytest.fixture
def counted(monkeypatch) -> dict[str, Counter]:
    """Every read of a descriptor's file (by path) and every resolution (by the loaded descriptor's identity)."""
    seen: dict[str, Counter] = {"read": Counter(), "resolved": Counter()}
    read, case_specs = load._read_text, load.LoadedDescriptor.case_specs

    def reading(path, shown):
        seen["read"][str(Path(path).resolve())] += 1
        return read(path, shown)

    def resolving(self, *args, **kwargs):
        seen["resolved"][id(self)] += 1
        return case_specs(self, *args, **kwargs)

    monkeypatch.setattr(load, "_read_text", reading)
    monkeypatch.setattr(load.LoadedDescriptor, "case_specs", resolving)
    cases_pass_without_kernels(monkeypatch)
    return seen


def one_case(tmp_path: Path, embedded, **parts) -> Path:
    return write_descriptor(tmp_path, embedded, cases={"checkpoint": embedded.doc["cases"]["checkpoint"]}, **parts)


def test_a_gate_reads_and_resolves_its_descriptor_once(tmp_path, embedded, counted):
    desc = one_case(tmp_path, embedded)
    code = cli.main(["-q", "gate", str(desc), "--no-summary", "--out", str(tmp_path / "run")])
    assert code == 0 and (tmp_path / "run" / "result.json").is_file()
    assert counted["read"] == {str(desc.resolve()): 1}
    assert list(counted["resolved"].values()) == [1]


def test_baseline_make_reads_its_descriptor_once_and_resolves_each_descriptor_it_holds_once(
        tmp_path, embedded, counted, monkeypatch):
    from kit.baselines import make
    from kit.goldens.make import MadeGolden

    portable = Path(embedded.golden_files["exact"][0])

    def made_as_before(out, *args, **keywords):  # the golden the descriptor names, as its maker would write it
        Path(out).mkdir(parents=True, exist_ok=True)
        return MadeGolden(Path(shutil.copy(portable, Path(out) / portable.name)))

    monkeypatch.setattr(make, "make_golden_apart", made_as_before)
    monkeypatch.setattr(make, "_render_evidence", lambda work_dir: None)  # a notebook's kernel: not here
    desc = one_case(tmp_path, embedded, goldens={**embedded.golden_files, "exact": [portable]},
                    baselines={"lineage": str(tmp_path / "lineage"), "goldens": str(tmp_path / "goldens")})
    code = cli.main(["-q", "baseline", "make", str(desc), "--again", "--no-power", "--reason", "new host",
                     "--archive", str(tmp_path / "no-runs"), "--out", str(tmp_path / "work")])
    assert code == 0, (tmp_path / "work" / "evidence.md").read_text()
    assert list((tmp_path / "lineage").glob("*.json")), "the make went through to its placed files"
    assert counted["read"] == {str(desc.resolve()): 1}
    # The descriptor as read, and as the evidence gate sees it with the made golden in place: once each.
    assert sorted(counted["resolved"].values()) == [1, 1]


def test_the_plan_digests_the_bytes_it_was_loaded_from_without_reading_the_file_again(tmp_path, embedded):
    import hashlib

    from kit.descriptor.plan import resolve

    path = one_case(tmp_path, embedded)
    loaded_bytes = path.read_bytes()
    desc = load.load_descriptor(path)
    path.write_bytes(loaded_bytes + b"\n# edited after it was loaded\n")  # a second read would digest this
    assert resolve(desc, ["checkpoint"]).sha256 == hashlib.sha256(loaded_bytes).hexdigest()
