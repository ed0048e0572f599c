"""An exact [goldens] entry names one golden per runtime; a case uses this host's, or is refused before
anything runs with the line that makes one here. A semantic entry stays one file."""

from __future__ import annotations

from kit.core.runtime import hardware, host_isa_level, without_level
from kit.descriptor.load import load_descriptor
from support import golden_made_on, parity_kit, write_descriptor

HOST = hardware()
LEGACY = without_level(HOST)  # as this host's CPU model and OS read before fingerprints named the ISA level
ELSEWHERE = f"{LEGACY[:-1]}, {'x86-64-v2' if host_isa_level() == 'x86-64-v4' else 'x86-64-v4'})"


def refused_line(proc, out) -> str:
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert not out.exists(), "a refused gate must not create its run directory"
    return lines[0]


def line_of(path, text) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def checkpoint_descriptor(tmp_path, embedded, *made_on: str):
    """The checkpoint case against an exact entry listing copies of its golden made on ``made_on``."""
    copies = [golden_made_on(embedded.goldens["exact"], tmp_path / "goldens" / f"exact-{n}.json", hw)
              for n, hw in enumerate(made_on)]
    goldens = {"semantic": embedded.goldens["semantic"], "exact": copies}
    cases = {"checkpoint": embedded.doc["cases"]["checkpoint"]}
    return write_descriptor(tmp_path, embedded, goldens=goldens, cases=cases), copies


def chosen(desc) -> str:
    return load_descriptor(desc).case_specs(["checkpoint"])[0].golden_path


def test_this_runtimes_golden_is_preferred_over_a_legacy_one(tmp_path, embedded):
    desc, (legacy, elsewhere, here) = checkpoint_descriptor(tmp_path, embedded, LEGACY, ELSEWHERE, HOST)
    assert chosen(desc) == str(here)


def test_a_legacy_golden_holds_where_cpu_model_and_os_agree(tmp_path, embedded):
    desc, (elsewhere, legacy) = checkpoint_descriptor(tmp_path, embedded, ELSEWHERE, LEGACY)
    assert chosen(desc) == str(legacy)


def test_the_embedded_exact_entries_resolve_on_this_host(embedded):
    specs = {s.name: s for s in load_descriptor(embedded.descriptor).case_specs(["checkpoint", "levanter-native"])}
    assert specs["checkpoint"].golden_path in map(str, embedded.golden_files["exact"])
    assert specs["levanter-native"].golden_path in map(str, embedded.golden_files["levanter-exact"])


def test_no_golden_for_this_runtime_is_refused_with_the_command_that_makes_one(tmp_path, embedded):
    other_cpu = "Some Other CPU (Linux x86_64)"
    desc, copies = checkpoint_descriptor(tmp_path, embedded, ELSEWHERE, other_cpu)
    out = tmp_path / "run"
    line = refused_line(parity_kit("gate", desc, "--out", out), out)
    assert line == (
        f"parity-kit: bad input: {desc}:{line_of(desc, 'exact = [')}: goldens.exact: no exact golden holds on this "
        f"host: made on {ELSEWHERE}; {other_cpu}; this host is {HOST}; make one here with `parity-kit golden make "
        f"--model fixtures/tiny-llama --fixture fixtures/{embedded.fixture.name} --kind exact --top-k 25 "
        f"--out {tmp_path / 'goldens'}` and add it to the list")


def test_a_levanter_golden_names_its_own_environment_in_the_refusal(tmp_path, embedded):
    copy = golden_made_on(embedded.goldens["levanter-exact"], tmp_path / "goldens" / "lev.json", ELSEWHERE)
    goldens = {"semantic": embedded.goldens["semantic"], "levanter-exact": [copy]}
    desc = write_descriptor(tmp_path, embedded, goldens=goldens,
                            cases={"levanter-native": embedded.doc["cases"]["levanter-native"]})
    out = tmp_path / "run"
    line = refused_line(parity_kit("gate", desc, "--out", out), out)
    assert line.endswith(
        f"make one here with `parity-kit golden make --backend levanter --checkpoint native --model "
        f"fixtures/tiny-llama-levanter --fixture fixtures/{embedded.fixture.name} --kind exact --top-k 25 "
        f"--out {tmp_path / 'goldens'}` with the parity-kit of levanter's own environment and add it to the list")


def test_an_exact_entry_without_this_runtimes_golden_blocks_only_its_cases(tmp_path, embedded):
    copy = golden_made_on(embedded.goldens["exact"], tmp_path / "exact.json", ELSEWHERE)
    goldens = {"semantic": embedded.goldens["semantic"], "exact": [copy]}
    desc = load_descriptor(write_descriptor(tmp_path, embedded, goldens=goldens))
    assert desc.host_golden("exact") is None
    assert [s.golden_path for s in desc.case_specs(["hf-bf16"])] == [str(embedded.goldens["semantic"])]


def test_a_semantic_entry_is_one_file_not_a_list(tmp_path, embedded):
    goldens = {"semantic": [embedded.goldens["semantic"]], "exact": embedded.goldens["exact"]}
    desc = write_descriptor(tmp_path, embedded, goldens=goldens)
    out = tmp_path / "run"
    line = refused_line(parity_kit("gate", desc, "--out", out), out)
    assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, 'semantic = [')}: goldens.semantic: a semantic "
                    "golden is one file, not a list (only an exact entry names one golden per runtime)")
