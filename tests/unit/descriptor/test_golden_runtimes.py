"""An exact [goldens] entry names one golden per runtime (the key of what decides its bits); a case uses the
golden of its own runtime and never another's: without one it reads "no baseline for this runtime", with
the command that makes one. A float64 case's runtime is the portable one, the same on every host; a float32
case's names the CPU it runs on. A semantic entry stays one file."""

from __future__ import annotations

import collections

import kit.core.host.runtime
from kit.backends.hf.kernels import exact_runtime
from kit.core.records import paths
from kit.core.host.portable import PORTABLE_RUNTIME
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from support import golden_made_on, parity_kit, write_descriptor

PINNED = exact_runtime({"cpu_kernels": "avx2", "dtype": "float32"})
NATIVE = exact_runtime({"dtype": "float32"})
ELSEWHERE = "torch-cpu x86_64 aten=avx512 onednn=avx512_core_amx mkl=GenuineIntel Some Xeon"
# The key a pinned golden recorded before keys named the CPU: an Intel and an AMD host both computed it, and their
# float32 bits differed (docs/exact-baselines.md).
UNNAMED_CPU = "torch-cpu x86_64 aten=avx2 onednn=avx2 mkl=AVX2"


def refused_line(proc, out) -> str:
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert not out.exists(), "a refused gate must not create its run directory"
    return lines[0]


def line_of(path, text) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def checkpoint_descriptor(tmp_path, embedded, *runtimes: str, pinned: bool = True):
    """The checkpoint case in float32 (its kernels pinned, or native) against an exact entry listing copies of its
    golden made on ``runtimes``."""
    copies = [golden_made_on(embedded.goldens["exact"], tmp_path / "goldens" / f"exact-{n}.json", "a host", rt)
              for n, rt in enumerate(runtimes)]
    goldens = {"semantic": embedded.goldens["semantic"], "exact": copies}
    case = {**embedded.doc["cases"]["checkpoint"], "dtype": "float32", "cpu_kernels": "avx2" if pinned else "native"}
    return write_descriptor(tmp_path, embedded, goldens=goldens, cases={"checkpoint": case}), copies


def spec(desc):
    return load_descriptor(desc).case_specs(["checkpoint"])[0]


def test_the_pinned_case_uses_the_pinned_golden_whatever_else_is_listed(tmp_path, embedded):
    desc, (elsewhere, pinned, native) = checkpoint_descriptor(tmp_path, embedded, ELSEWHERE, PINNED, NATIVE + "x")
    s = spec(desc)
    assert (s.golden_path, s.runtime, s.no_baseline) == (str(pinned), PINNED, None)


def test_the_native_case_uses_its_own_runtimes_golden(tmp_path, embedded):
    desc, (pinned, native) = checkpoint_descriptor(tmp_path, embedded, PINNED, NATIVE, pinned=False)
    assert spec(desc).golden_path == str(native)


def test_the_embedded_checkpoint_case_is_float64_and_holds_on_any_host(embedded):
    s = load_descriptor(embedded.descriptor).case_specs(["checkpoint"])[0]
    assert s.options["dtype"] == "float64" and s.runtime == PORTABLE_RUNTIME and s.no_baseline is None
    assert s.golden_path.endswith("-exact-portable.json")


def test_a_float32_key_names_the_cpu_so_a_golden_keyed_without_it_holds_nowhere(tmp_path, embedded, monkeypatch):
    # The third CPU class: the same pinned kernels on another vendor's CPU computed other float32 bits under one key.
    assert PINNED != UNNAMED_CPU and PINNED.startswith(UNNAMED_CPU + " threads=1 cpu=")
    desc, _ = checkpoint_descriptor(tmp_path, embedded, UNNAMED_CPU)
    assert spec(desc).no_baseline.kind == "exact-golden"
    desc, (here,) = checkpoint_descriptor(tmp_path / "here", embedded, PINNED)
    assert spec(desc).golden_path == str(here)
    intel = {"vendor_id": "GenuineIntel", "model name": "Intel(R) Xeon(R) Platinum 8480+", "cpu family": "6",
             "model": "143", "stepping": "8", "flags": "fpu avx2 fma avx512f avx512bw avx512vl avx512dq amx_tile"}
    monkeypatch.setattr(kit.core.host.runtime, "_cpuinfo_map", lambda: intel)
    faked = spec(desc)
    assert faked.runtime != PINNED and "cpu=GenuineIntel Intel(R) Xeon(R) Platinum 8480+ family=6" in faked.runtime
    assert faked.golden_path == "" and faked.no_baseline.text.startswith("no baseline for this runtime: ")


def test_the_float64_case_keeps_its_golden_on_any_cpu(embedded, monkeypatch):
    intel = {"vendor_id": "GenuineIntel", "model name": "Intel(R) Xeon(R) Platinum 8480+", "flags": "avx2 fma"}
    monkeypatch.setattr(kit.core.host.runtime, "_cpuinfo_map", lambda: intel)
    s = load_descriptor(embedded.descriptor).case_specs(["checkpoint"])[0]
    assert s.runtime == PORTABLE_RUNTIME and s.golden_path.endswith("-exact-portable.json") and not s.no_baseline


def test_the_embedded_levanter_native_case_is_judged_in_its_kernel_not_by_a_golden(embedded):
    s = load_descriptor(embedded.descriptor).case_specs(["levanter-native"])[0]
    assert (s.golden_path, s.golden_kind, s.no_baseline) == ("", "exact", None)
    assert s.reference["options"]["checkpoint"] == "hf" and s.options["checkpoint"] == "native"
    assert s.reference["model_path"] == str(embedded.model)


def test_no_golden_for_this_runtime_is_no_baseline_with_the_command_that_makes_one(tmp_path, embedded):
    desc, copies = checkpoint_descriptor(tmp_path, embedded, ELSEWHERE, pinned=False)
    s = spec(desc)
    assert s.golden_path == "" and s.runtime == NATIVE
    assert s.no_baseline.text == (
        f"no baseline for this runtime: goldens.exact ({desc}:{line_of(desc, 'exact = [')}) holds no exact golden "
        f"made on {NATIVE}; its goldens were made on {ELSEWHERE}; make one here with `parity-kit golden make "
        f"--model fixtures/tiny-llama --fixture fixtures/{embedded.fixture.name} --kind exact --top-k 25 "
        f"--out {tmp_path / 'goldens'}` and add it to the list")
    assert (s.no_baseline.kind, s.no_baseline.command) == ("exact-golden", s.no_baseline.text.split("`")[1])


def test_the_remake_command_carries_the_cases_pin(tmp_path, embedded):
    desc, _ = checkpoint_descriptor(tmp_path, embedded, ELSEWHERE)
    assert "--top-k 25 --cpu-kernels avx2 --out" in spec(desc).no_baseline.command


def test_an_exact_entry_without_this_runtimes_golden_touches_only_its_cases(tmp_path, embedded):
    copy = golden_made_on(embedded.goldens["exact"], tmp_path / "exact.json", "a host", ELSEWHERE)
    goldens = {**embedded.golden_files, "exact": [copy]}
    desc = load_descriptor(write_descriptor(tmp_path, embedded, goldens=goldens))
    specs = {s.name: s for s in desc.case_specs(["hf-bf16", "checkpoint"])}
    assert specs["hf-bf16"].golden_path == str(embedded.goldens["semantic"]) and not specs["hf-bf16"].no_baseline
    assert specs["checkpoint"].no_baseline.text.startswith("no baseline for this runtime")


def test_two_goldens_for_one_runtime_are_refused_before_anything_runs(tmp_path, embedded):
    desc, (a, b) = checkpoint_descriptor(tmp_path, embedded, PINNED, PINNED)
    out = tmp_path / "run"
    line = refused_line(parity_kit("gate", desc, "--out", out), out)
    assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, 'exact = [')}: goldens.exact: {a} and {b} were "
                    f"both made on {PINNED}; list one golden per runtime")


def test_a_golden_whose_runtime_cannot_be_read_is_refused(tmp_path, embedded):
    unknown = golden_made_on(embedded.goldens["exact"], tmp_path / "goldens" / "old.json",
                             "AMD EPYC (Linux x86_64)", "")
    goldens = {"semantic": embedded.goldens["semantic"], "exact": [unknown]}
    desc = write_descriptor(tmp_path, embedded, goldens=goldens,
                            cases={"checkpoint": embedded.doc["cases"]["checkpoint"]})
    out = tmp_path / "run"
    line = refused_line(parity_kit("gate", desc, "--out", out), out)
    assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, 'exact = [')}: goldens.exact: exact golden "
                    f"{unknown} records no runtime it holds on (made on 'AMD EPYC (Linux x86_64)'); remake it with "
                    "`parity-kit golden make`")


def test_a_case_names_a_golden_or_a_reference_not_both_nor_neither(tmp_path, embedded):
    native = embedded.doc["cases"]["levanter-native"]
    for case, what in (({**native, "golden": "exact"}, "names both"),
                       ({k: v for k, v in native.items() if k != "reference"}, "names neither")):
        desc = write_descriptor(tmp_path, embedded, cases={"levanter-native": case})
        out = tmp_path / "run"
        line = refused_line(parity_kit("check", desc), out)
        assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, '[cases.levanter-native]')}: "
                        f"cases.levanter-native: {what} a `golden` and a `reference`; a case is judged against one "
                        "of them")


def test_a_reference_with_an_unknown_model_or_option_is_refused(tmp_path, embedded):
    native = embedded.doc["cases"]["levanter-native"]
    case = {**native, "reference": {"model": "nope", "options": {"checkpoint": "hf"}}}
    desc = write_descriptor(tmp_path, embedded, cases={"levanter-native": case})
    line = refused_line(parity_kit("check", desc), tmp_path / "run")
    assert "cases.levanter-native.reference: no [models] entry 'nope'" in line
    case = {**native, "reference": {"options": {"checkpoint": "safetensors"}}}
    desc = write_descriptor(tmp_path, embedded, cases={"levanter-native": case})
    line = refused_line(parity_kit("check", desc), tmp_path / "run")
    assert "checkpoint" in line and "safetensors" in line


def test_a_semantic_entry_is_one_file_not_a_list(tmp_path, embedded):
    goldens = {"semantic": [embedded.goldens["semantic"]], "exact": embedded.golden_files["exact"]}
    desc = write_descriptor(tmp_path, embedded, goldens=goldens)
    out = tmp_path / "run"
    line = refused_line(parity_kit("gate", desc, "--out", out), out)
    assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, 'semantic = [')}: goldens.semantic: a semantic "
                    "golden is one file, not a list (only an exact entry names one golden per runtime)")


def test_every_case_is_checked_whichever_a_run_selects(tmp_path, embedded):
    cases = {**embedded.doc["cases"], "hf-bf16-decode": {**embedded.doc["cases"]["hf-bf16-decode"],
                                                          "golden": "decode-semantik"}}
    desc = write_descriptor(tmp_path, embedded, cases=cases)
    line = refused_line(parity_kit("check", desc, "--case", "hf-bf16"), tmp_path / "run")
    assert line == (f"parity-kit: bad input: {desc}:{line_of(desc, 'decode-semantik')}: cases.hf-bf16-decode.golden: "
                    "no [goldens] entry 'decode-semantik' (have: semantic, decode-semantic, exact)")


def test_every_baseline_file_is_hashed_once_however_many_cases_and_checks_read_it(monkeypatch):
    # Goldens of a GPU descriptor are hundreds of megabytes; a lineage head is also a listed file every case names.
    import kit.descriptor.baselines

    hashed: collections.Counter = collections.Counter()
    real = kit.descriptor.baselines.sha256_file
    monkeypatch.setattr(kit.descriptor.baselines, "sha256_file",
                        lambda path: (hashed.update([str(path)]), real(path))[1])
    desc = load_descriptor(paths.EMBEDDED_DESCRIPTOR)
    resolve(desc, None)
    assert desc.baselines.verify_lineage() == []
    assert hashed and max(hashed.values()) == 1, hashed.most_common(3)
