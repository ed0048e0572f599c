"""A calibration's samples name the runtime their kernel was given, read before any engine started in it, and a
record is made of samples that name one runtime, as this kit keys runtimes (kit.core.host.runtime)."""

from __future__ import annotations

import os

import pytest

from kit.calibrate.run import build_record
from kit.case import calibrate
from kit.core.noise.calibration import Sample
from kit.core.errors import BadInput
from kit.core.records.records import CaseResult, PromptScore
from kit.core.host.runtime import numerics_fingerprint
from kit.descriptor.load import load_descriptor
from support import write_descriptor

pytestmark = pytest.mark.unit

SMALL = {"backend": "hf", "golden": "semantic", "bound": 0.075, "dtype": "bfloat16", "buckets": [128]}


def small_spec(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"small": SMALL})
    return load_descriptor(desc).case_specs(["small"], resolve_calibration=False)[0]


def scored(spec) -> CaseResult:
    from kit.core.records.fixture import load_fixture

    prompts = [PromptScore(p.id, p.bucket, 8, True, None, 0.01, 0.01, 0.0, True, 1, 0.5, 1, 0.5, 0.1,
                           top_probability_shift=0.001)
               for p in load_fixture(spec.fixture_path).select(spec.prompt_ids, spec.buckets)]
    return CaseResult(case=spec.name, backend=spec.backend, status="passed", prompts=prompts, release={"x": 1})


def test_what_an_engine_sets_in_its_process_is_not_the_runtime_of_the_samples(tmp_path, embedded, monkeypatch):
    # An engine that, like vLLM's CPU worker and its settings, sets variables in the process it starts in, a
    # number of threads among them: a key read after it started would differ from sample to sample.
    spec = small_spec(tmp_path, embedded)
    given = numerics_fingerprint("cpu")
    launches = []

    def engine(case):
        launches.append(case.options)
        monkeypatch.setenv("VLLM_DIST_IDENT", f"vllm_dist_{len(launches):032x}")
        monkeypatch.setenv("OMP_NUM_THREADS", str(len(launches)))
        return scored(case)

    monkeypatch.setattr(calibrate, "run_case", engine)
    variants = [{"name": "as-set", "overrides": {}}, {"name": "sdpa", "overrides": {"attention": "sdpa"}},
                {"name": "as-set", "overrides": {}, "launch": 2}]
    entries = calibrate.variant_samples(spec, variants, tmp_path / "small.samples.jsonl")
    assert len(launches) == 3 and os.environ["OMP_NUM_THREADS"] == "3"
    assert [e["runtime"] for e in entries] == [given] * 3
    assert calibrate.finished(tmp_path / "small.samples.jsonl", "small") == entries
    assert build_record(spec, variants, entries, ["test"]).fingerprint["runtime"] == given


def entry(spec, variant: str, env: dict) -> dict:
    """A sample of every prompt of ``spec``, with the runtime an earlier kit wrote: ``env`` as its kernel held it."""
    ids = [p.id for p in scored(spec).prompts]
    sample = Sample(variant, 1, 1, {i: 0.01 for i in ids}, {i: 0.001 for i in ids})
    return {"sample": sample.to_dict(), "inputs": {}, "release": {},
            "runtime": {"accelerator": {"name": "cpu (x86-64-v4)"}, "packages": {"vllm": "0.32.0"}, "env": env}}


def test_samples_an_earlier_kit_wrote_with_each_launchs_identifier_make_one_record(tmp_path, embedded):
    spec = small_spec(tmp_path, embedded)
    entries = [entry(spec, name, {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_DIST_IDENT": f"vllm_dist_{n:032x}"})
               for n, name in enumerate(("a", "b"))]
    record = build_record(spec, [{"name": "a"}, {"name": "b"}], entries, ["test"])
    assert record.fingerprint["runtime"]["env"] == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_samples_of_two_settings_that_decide_the_numbers_make_no_record(tmp_path, embedded):
    spec = small_spec(tmp_path, embedded)
    entries = [entry(spec, name, {"VLLM_CPU_KVCACHE_SPACE": space}) for name, space in (("a", "1"), ("b", "4"))]
    with pytest.raises(BadInput) as refused:
        build_record(spec, [{"name": "a"}, {"name": "b"}], entries, ["test"])
    assert str(refused.value) == ("case small: its samples were measured on different runtimes (env "
                                  "{'VLLM_CPU_KVCACHE_SPACE': '4'} against {'VLLM_CPU_KVCACHE_SPACE': '1'}); calibrate "
                                  "again in a fresh directory")
