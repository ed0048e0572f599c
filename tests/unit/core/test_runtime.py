"""The runtime fingerprint, the runtime keys of exact results (what decides their bits), and which exact
golden a case uses."""

from __future__ import annotations

from pathlib import Path

import pytest

import kit.core.host.runtime
from kit.backends.registry import choose_for_runtime, duplicate_runtime, golden_runtime, legacy_runtime, remake_command
from kit.core.baselines.golden import Golden, golden_filename
from kit.core.host.portable import PORTABLE_RUNTIME
from kit.core.host.runtime import (TORCH_AVX2_PIN, aten_capability, cpuinfo_fields, hardware, host_isa_level,
                                        isa_level, onednn_isa, runtime_slug, torch_cpu_runtime, xla_cpu_runtime)

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
ZEN4 = V4 | {"avx512_bf16", "avx512_vnni", "avx_vnni", "avx512_vp2intersect"}


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
    assert host.endswith(f", {host_isa_level()})")


@pytest.mark.parametrize("flags, env, capability", [
    (V4, {}, "avx512"), (ZEN4, {}, "avx512"), (V3, {}, "avx2"), (V2, {}, "default"),
    (V4 - {"avx512dq"}, {}, "avx2"),                      # ATen's AVX-512 needs VL, BW and DQ
    (V4, {"ATEN_CPU_CAPABILITY": "avx2"}, "avx2"),        # the pin lowers it
    (V4, {"ATEN_CPU_CAPABILITY": "default"}, "default"),
    (V3, {"ATEN_CPU_CAPABILITY": "avx512"}, "avx2"),      # and never raises it past the CPU
    (V3, {"ATEN_CPU_CAPABILITY": "sve"}, "avx2"),         # an unknown name changes nothing
])
def test_aten_capability_follows_its_dispatch_rule(flags, env, capability):
    assert aten_capability(set(flags), env) == capability


def test_onednn_isa_is_the_widest_it_finds_or_the_pinned_one():
    assert onednn_isa(ZEN4) == "avx512_core_bf16"
    assert onednn_isa(V4) == "avx512_core"
    assert onednn_isa(V3 | {"avx_vnni"}) == "avx2_vnni"
    assert onednn_isa(V3) == "avx2"
    assert onednn_isa(ZEN4, {"ONEDNN_MAX_CPU_ISA": "AVX2"}) == "avx2"


def test_a_float32_torch_runtime_names_its_kernels_threads_and_the_cpu_itself(monkeypatch):
    pinned = {**TORCH_AVX2_PIN}
    keys = {torch_cpu_runtime(pinned, flags=f, machine="x86_64") for f in (V3, V4, ZEN4)}
    # The pin picks one set of kernels on every AVX2 host, but the bits still follow the CPU: the key names it.
    assert len(keys) == 1 and keys.pop().startswith("torch-cpu x86_64 aten=avx2 onednn=avx2 mkl=AVX2 threads=1 cpu=")
    native = {torch_cpu_runtime({}, flags=f, machine="x86_64") for f in (V3, V4, ZEN4)}
    assert len(native) == 3  # AVX2, AVX-512 and AVX-512 with bf16 run other kernels
    assert all("mkl=AVX2" not in k for k in native)  # MKL's branch follows the CPU unless pinned
    assert torch_cpu_runtime(pinned, threads=2) != torch_cpu_runtime(pinned, threads=1)
    amd = {"vendor_id": "AuthenticAMD", "model name": "AMD EPYC 9R14", "cpu family": "25", "model": "17",
           "stepping": "1", "flags": "avx2 fma avx512f"}
    monkeypatch.setattr(kit.core.host.runtime, "_cpuinfo_map", lambda: amd)
    on_amd = torch_cpu_runtime(pinned)
    for changed in ({"vendor_id": "GenuineIntel"}, {"model name": "AMD EPYC 7R13"}, {"model": "1"},
                    {"stepping": "2"}, {"flags": "avx2 fma"}):
        monkeypatch.setattr(kit.core.host.runtime, "_cpuinfo_map", lambda c=changed: {**amd, **c})
        assert torch_cpu_runtime(pinned) != on_amd, changed
    monkeypatch.setattr(kit.core.host.runtime, "_cache_sizes", lambda: ["L2:2048K"])
    monkeypatch.setattr(kit.core.host.runtime, "_cpuinfo_map", lambda: amd)
    assert torch_cpu_runtime(pinned) != on_amd  # another cache size blocks the matmuls otherwise
    assert runtime_slug(on_amd).startswith("rt-") and runtime_slug(PORTABLE_RUNTIME) == "portable"


def test_the_xla_runtime_names_the_cpu_model_and_a_digest_of_every_feature():
    key = xla_cpu_runtime()
    assert key == xla_cpu_runtime() and key.startswith("xla-cpu ") and " features=" in key


def test_legacy_goldens_map_to_a_runtime_only_where_their_record_says_enough():
    v3 = {"backend": "hf", "hardware": "AMD EPYC (Linux x86_64, x86-64-v3)", "release": {"device": "cpu"}}
    assert legacy_runtime(v3) == "torch-cpu x86_64 aten=avx2 onednn=avx2 mkl=AuthenticAMD AMD EPYC"
    # An AVX-512 host's oneDNN may have used bf16 or VNNI code: nothing says which.
    assert legacy_runtime({**v3, "hardware": "AMD EPYC (Linux x86_64, x86-64-v4)"}) is None
    assert legacy_runtime({**v3, "hardware": "AMD EPYC (Linux x86_64)"}) is None
    # XLA compiled for features nobody wrote down.
    assert legacy_runtime({**v3, "backend": "levanter"}) is None
    assert golden_runtime({**v3, "runtime": "xla-cpu x"}) == "xla-cpu x"


def golden(name: str, runtime: str | None) -> Golden:
    prov = {"hardware": "somewhere", **({"runtime": runtime} if runtime else {})}
    return Golden(Path(name), "0" * 64, "exact", "f" * 64, "m" * 64, 25, prov, {})


def test_a_case_uses_the_golden_of_its_own_runtime_and_never_falls_back():
    a, b = golden("a", "torch-cpu x86_64 aten=avx2 onednn=avx2 mkl=AVX2"), golden("b", "xla-cpu other")
    assert choose_for_runtime([b, a], "torch-cpu x86_64 aten=avx2 onednn=avx2 mkl=AVX2") is a
    assert choose_for_runtime([a, b], "xla-cpu other") is b
    assert choose_for_runtime([a, b], "torch-cpu x86_64 aten=avx512 onednn=avx512_core mkl=x") is None
    assert choose_for_runtime([golden("none", None)], "") is None  # no key: nothing chooses it


def test_two_goldens_of_one_runtime_are_found():
    a, b, c = golden("a", "k1"), golden("b", "k2"), golden("c", "k1")
    assert duplicate_runtime([a, b, c]) == (a, c)
    assert duplicate_runtime([a, b]) is None


def test_exact_golden_names_carry_their_runtime():
    fixture = type("F", (), {"sha256": "44a3d799c03b" + "0" * 52})()
    assert golden_filename(fixture, "tiny-llama", "1163a351b5ae" + "0" * 52, "exact", "cpu-avx2-pinned") == \
        "44a3d799c03b-tiny-llama-1163a351b5ae-exact-cpu-avx2-pinned.json"
    assert golden_filename(fixture, "tiny-llama", "1163a351b5ae" + "0" * 52, "semantic") == \
        "44a3d799c03b-tiny-llama-1163a351b5ae-semantic.json"


def test_remake_command_repeats_how_the_golden_was_made():
    hf = Golden(Path("g.json"), "0", "exact", "f", "m", 25,
                {"backend": "hf", "dtype": "float32", "attention": "eager", "release": {"device": "cpu"}}, {})
    assert remake_command(hf, "fixtures/tiny-llama", "fixtures/f.json", "goldens") == (
        "parity-kit golden make --model fixtures/tiny-llama --fixture fixtures/f.json --kind exact --top-k 25 "
        "--attn-implementation eager --out goldens")
    # The case's own pin decides the runtime the new golden must hold on.
    assert remake_command(hf, "m", "f.json", "goldens", {"cpu_kernels": "avx2"}).endswith(
        "--attn-implementation eager --cpu-kernels avx2 --out goldens")
    lev = Golden(Path("g.json"), "0", "exact", "f", "m", 10,
                 {"backend": "levanter", "dtype": "float32", "attention": {"128": "reference"},
                  "release": {"checkpoint": "native", "device": "cpu"}}, {})
    assert remake_command(lev, "my models/lev", "f.json", "/tmp/g") == (
        "parity-kit golden make --backend levanter --model 'my models/lev' --fixture f.json "
        "--kind exact --top-k 10 --checkpoint native --out /tmp/g")


def test_a_fingerprint_keeps_the_variables_that_change_numbers_and_no_machine_paths():
    from kit.core.host.runtime import numeric_env

    environ = {"OMP_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "NVIDIA_TF32_OVERRIDE": "0",
               "TORCHINDUCTOR_CACHE_DIR": "/somewhere/cache", "CUDA_HOME": "/usr/local/cuda",
               "TF_CLI_CONFIG_FILE": "/home/user/.terraformrc", "NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=tesla",
               "HOME": "/home/user", "TF_CPP_MIN_LOG_LEVEL": "1", "KMP_DUPLICATE_LIB_OK": "True",
               "KMP_INIT_AT_FORK": "FALSE", "KMP_AFFINITY": "compact"}
    assert numeric_env(environ) == {"KMP_AFFINITY": "compact", "NVIDIA_TF32_OVERRIDE": "0", "OMP_NUM_THREADS": "1",
                                    "TF_CPP_MIN_LOG_LEVEL": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
