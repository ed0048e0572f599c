"""The runtime fingerprint (CPU model, OS, ISA level) and which exact golden a host uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.core.golden import Golden, choose_for_host, golden_filename, remake_command
from kit.core.runtime import (cpuinfo_fields, hardware, has_level, host_isa_level, isa_level, runtime_match,
                              without_level)

V1 = {"cmov", "cx8", "fpu", "fxsr", "mmx", "syscall", "sse", "sse2"}
V2 = V1 | {"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"}
V3 = V2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
V4 = V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
# Part of an AVX2 EPYC's flags line, as /proc/cpuinfo prints it (AVX-512 absent).
EPYC_AVX2 = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
             "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid "
             "tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c "
             "rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext "
             "fsgsbase bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec "
             "xgetbv1 xsaves clzero xsaveerptr rdpru arat npt nrip_save umip vaes vpclmulqdq rdpid")


@pytest.mark.parametrize("flags, level", [
    (V1, "x86-64-v1"), (V2, "x86-64-v2"), (V3, "x86-64-v3"), (V4, "x86-64-v4"),
    (set(EPYC_AVX2.split()), "x86-64-v3"),
    (set(EPYC_AVX2.split()) | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx512_bf16"}, "x86-64-v4"),
    (V4 - {"avx512vl"}, "x86-64-v3"),      # AVX-512 without all five of v4's subsets is v3
    (V4 - {"movbe"}, "x86-64-v2"),         # a level needs every level below it
    (V3 - {"pni"}, "x86-64-v1"),
    (V1 - {"sse2"}, "x86-64"),
])
def test_isa_level_from_cpuinfo_flags(flags, level):
    assert isa_level(set(flags), "x86_64") == level


def test_isa_level_elsewhere_is_the_machine_name():
    assert isa_level(None, "aarch64") == "aarch64"
    assert isa_level({"fp", "asimd"}, "arm64") == "arm64"
    assert isa_level(None, "x86_64") == "x86_64"  # flags unreadable: no level claimed


def test_cpuinfo_fields_take_the_first_cpu():
    text = (f"processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: {EPYC_AVX2}\n\n"
            "processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n")
    model, flags = cpuinfo_fields(text)
    assert model == "AMD EPYC 7B13" and "avx2" in flags and "avx512f" not in flags
    assert cpuinfo_fields("processor\t: 0\nBogoMIPS\t: 50.00\n") == (None, None)


def test_this_hosts_fingerprint_names_its_level_and_is_deterministic():
    host = hardware()
    assert host == hardware()
    assert host.endswith(f", {host_isa_level()})") and has_level(host)


def test_fingerprints_match_exactly_or_as_legacy_by_cpu_model_and_os():
    host = "AMD EPYC (Linux x86_64, x86-64-v3)"
    assert without_level(host) == "AMD EPYC (Linux x86_64)"
    assert not has_level("AMD EPYC (Linux x86_64)")
    assert runtime_match(host, host) == "exact"
    assert runtime_match("AMD EPYC (Linux x86_64)", host) == "legacy"
    assert runtime_match("AMD EPYC (Linux x86_64, x86-64-v4)", host) is None  # same model, other ISA level
    assert runtime_match("Intel Xeon (Linux x86_64)", host) is None
    assert runtime_match("AMD EPYC (Darwin x86_64)", host) is None
    assert runtime_match("Intel(R) Xeon(R) CPU @ 2.20GHz (Linux x86_64)",
                         "Intel(R) Xeon(R) CPU @ 2.20GHz (Linux x86_64, x86-64-v4)") == "legacy"


def golden(name: str, made_on: str) -> Golden:
    return Golden(Path(name), "0" * 64, "exact", "f" * 64, "m" * 64, 25, {"hardware": made_on}, {})


def test_the_host_uses_its_own_runtimes_golden_before_a_legacy_one():
    host = "AMD EPYC (Linux x86_64, x86-64-v3)"
    legacy, v3, v4 = (golden("legacy", "AMD EPYC (Linux x86_64)"),
                      golden("v3", host), golden("v4", "AMD EPYC (Linux x86_64, x86-64-v4)"))
    assert choose_for_host([legacy, v4, v3], host) is v3
    assert choose_for_host([v4, legacy], host) is legacy
    assert choose_for_host([v4, legacy], "AMD EPYC (Linux x86_64, x86-64-v4)") is v4
    assert choose_for_host([v4, golden("intel", "Intel Xeon (Linux x86_64)")], host) is None
    assert choose_for_host([golden("none", "")], host) is None


def test_exact_golden_names_carry_their_runtime():
    fixture = type("F", (), {"sha256": "44a3d799c03b" + "0" * 52})()
    assert golden_filename(fixture, "tiny-llama", "1163a351b5ae" + "0" * 52, "exact", "x86-64-v3") == \
        "44a3d799c03b-tiny-llama-1163a351b5ae-exact-x86-64-v3.json"
    assert golden_filename(fixture, "tiny-llama", "1163a351b5ae" + "0" * 52, "semantic") == \
        "44a3d799c03b-tiny-llama-1163a351b5ae-semantic.json"


def test_remake_command_repeats_how_the_golden_was_made():
    hf = Golden(Path("g.json"), "0", "exact", "f", "m", 25,
                {"backend": "hf", "dtype": "float32", "attention": "eager", "release": {"device": "cpu"}}, {})
    assert remake_command(hf, "fixtures/tiny-llama", "fixtures/f.json", "goldens") == (
        "parity-kit golden make --model fixtures/tiny-llama --fixture fixtures/f.json --kind exact --top-k 25 "
        "--attn-implementation eager --out goldens")
    lev = Golden(Path("g.json"), "0", "exact", "f", "m", 10,
                 {"backend": "levanter", "dtype": "float32", "attention": {"128": "reference"},
                  "release": {"checkpoint": "native", "device": "cpu"}}, {})
    assert remake_command(lev, "my models/lev", "f.json", "/tmp/g") == (
        "parity-kit golden make --backend levanter --checkpoint native --model 'my models/lev' --fixture f.json "
        "--kind exact --top-k 10 --out /tmp/g")


def test_a_fingerprint_keeps_the_variables_that_change_numbers_and_no_machine_paths():
    from kit.core.runtime import numeric_env

    environ = {"OMP_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "NVIDIA_TF32_OVERRIDE": "0",
               "TORCHINDUCTOR_CACHE_DIR": "/somewhere/cache", "CUDA_HOME": "/usr/local/cuda",
               "TF_CLI_CONFIG_FILE": "/home/user/.terraformrc", "NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=tesla",
               "HOME": "/home/user", "TF_CPP_MIN_LOG_LEVEL": "1"}
    assert numeric_env(environ) == {"NVIDIA_TF32_OVERRIDE": "0", "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "1",
                                    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
