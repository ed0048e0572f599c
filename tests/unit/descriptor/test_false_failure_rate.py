"""``[defaults] false_failure_rate``: the gate's rate, split over the descriptor's drift cases (Bonferroni) into the
alpha each drift test runs at, whichever cases a run selects; refused in one line when it is no rate; stated in
one line from the plan (kit.descriptor.falsefailure)."""

from __future__ import annotations

import pytest

from kit.core.records import paths
from kit.core.noise.calibration import DRIFT_ALPHA
from kit.core.errors import BadInput
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from kit.gate.report import false_failure_lines, false_failure_part
from support import parity_kit, write_descriptor

# The decode cases' records are calibrated on the first token too, and drift-tested there (their steps have bounds).
DRIFT_CASES = ["hf-bf16", "hf-bf16-decode", "levanter", "vllm-pp1", "vllm-pp1-decode", "vllm-pp2"]


def alphas(desc, only=None) -> dict[str, float]:
    return {s.name: s.calibration["drift"]["alpha"] for s in desc.case_specs(only) if s.calibration}


def test_the_embedded_descriptor_keeps_the_alpha_its_records_were_reviewed_with():
    desc = load_descriptor(paths.EMBEDDED_DESCRIPTOR)
    b = desc.false_failure_budget()
    assert list(b.cases) == DRIFT_CASES and not b.stated
    assert b.rate == pytest.approx(0.006) and b.per_case == pytest.approx(DRIFT_ALPHA)
    assert alphas(desc) == {n: pytest.approx(DRIFT_ALPHA) for n in DRIFT_CASES}


def test_the_embedded_plan_states_its_rate_in_one_line():
    stated = resolve(load_descriptor(paths.EMBEDDED_DESCRIPTOR)).false_failure_statement()
    assert stated["statement"] == (
        "false-failure rate: at most 0.6 % for the gate (drift tests: 0.1 % for each of 6 cases, Bonferroni; the "
        "default); per-prompt bounds: measured, 0 failures in 25 leave-one-out variants")
    # 6 hf + 6 hf decode (first token) + 4 levanter + 3 + 3 vllm + 3 vllm decode (first token)
    assert stated["bounds_left_out"] == {"failed": 0, "variants": 25}


def test_a_stated_rate_sets_every_drift_cases_alpha_and_a_subset_keeps_it(tmp_path, embedded):
    desc = load_descriptor(write_descriptor(tmp_path, embedded,
                                            defaults={**embedded.doc["defaults"], "false_failure_rate": 0.02}))
    assert alphas(desc) == {n: pytest.approx(0.02 / 6) for n in DRIFT_CASES}
    # counted over the descriptor, not the selection: one case alone is judged as beside the others
    assert alphas(desc, ["hf-bf16"]) == {"hf-bf16": pytest.approx(0.02 / 6)}
    plan = resolve(desc, only=["hf-bf16"])
    assert plan.false_failure.per_case == pytest.approx(0.02 / 6) and plan.false_failure.stated
    assert plan.false_failure_statement()["statement"].startswith(
        "false-failure rate: at most 2 % for the gate (drift tests: 0.33 % for each of 6 cases, Bonferroni); "
        "per-prompt bounds: measured, 0 failures in 6 leave-one-out variants")


def test_a_case_without_a_drift_test_takes_no_share(tmp_path, embedded):
    cases = {**embedded.doc["cases"], "levanter": {**embedded.doc["cases"]["levanter"], "drift": False}}
    desc = load_descriptor(write_descriptor(tmp_path, embedded, cases=cases,
                                            defaults={**embedded.doc["defaults"], "false_failure_rate": 0.003}))
    assert list(desc.false_failure_budget().cases) == ["hf-bf16", "hf-bf16-decode", "vllm-pp1", "vllm-pp1-decode",
                                                       "vllm-pp2"]
    assert alphas(desc, ["hf-bf16"]) == {"hf-bf16": pytest.approx(0.0006)}


@pytest.mark.parametrize("value, said", [
    (0.0, "0.0"), (0.5, "0.5"), (-0.01, "-0.01"), (1.0, "1.0"),
])
def test_a_rate_outside_zero_to_a_half_is_refused_at_its_line(tmp_path, embedded, value, said):
    desc = write_descriptor(tmp_path, embedded, defaults={**embedded.doc["defaults"], "false_failure_rate": value})
    with pytest.raises(BadInput) as exc:
        load_descriptor(desc)
    line = next(n for n, text in enumerate(desc.read_text().splitlines(), 1) if text.startswith("false_failure_rate"))
    assert str(exc.value) == (f"{desc}:{line}: defaults.false_failure_rate: expected a number in (0, 0.5), the chance "
                              f"a clean release fails the gate (0.01 is 1 %), got {said}")


@pytest.mark.parametrize("value, what", [
    ("1%", "expected a valid number, got '1%'"), (True, "expected a valid number, got True"),
    (float("nan"), "expected a finite number, got nan"),
])
def test_a_rate_that_is_no_number_is_refused(tmp_path, embedded, value, what):
    desc = write_descriptor(tmp_path, embedded, defaults={**embedded.doc["defaults"], "false_failure_rate": value})
    with pytest.raises(BadInput) as exc:
        load_descriptor(desc)
    assert str(exc.value).endswith(f": defaults.false_failure_rate: {what}")
    assert str(exc.value).startswith(f"{desc}:") and "\n" not in str(exc.value)


def test_the_gate_refuses_a_bad_rate_with_exit_3_and_one_line(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, defaults={**embedded.doc["defaults"], "false_failure_rate": 0.7})
    out = tmp_path / "run"
    proc = parity_kit("gate", desc, "--out", out, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 3 and len(lines) == 1, proc.stderr
    assert "defaults.false_failure_rate: expected a number in (0, 0.5)" in lines[0] and str(desc) in lines[0]
    assert not out.exists()


def test_result_json_and_evidence_carry_the_manifests_statement():
    stated = {"rate": 0.004, "statement": "false-failure rate: at most 0.4 % for the gate"}
    assert false_failure_part({"false_failure_rate": stated}) == {"false_failure_rate": stated}
    assert false_failure_lines({"false_failure_rate": stated}) == ["False-failure rate: at most 0.4 % for the gate."]
    assert false_failure_part({}) == {} and false_failure_lines({}) == []  # a run of an earlier kit states none
