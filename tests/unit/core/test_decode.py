"""The decode check's comparison, against continuations worked out by hand, and the decode golden's format."""

from __future__ import annotations

import json
import math

import pytest

from kit.core.verdict.decode import check_continuations_fit, check_decode_golden, compare_continuation
from kit.core.errors import BadInput
from kit.core.baselines.golden import load_golden
from kit.core.records.jsonio import canonical_bytes
from kit.core.model.modelconfig import model_limits
from kit.core.records.records import Continuation

L = math.log


def step(*pairs):
    """One continuation step: the most likely token and the (token, logprob) list, from probabilities."""
    return pairs[0][0], tuple((t, L(p)) for t, p in pairs)


GOLDEN = (step((5, 0.6), (7, 0.3), (9, 0.1)),
          step((7, 0.45), (5, 0.44), (9, 0.11)),
          step((9, 0.9), (5, 0.06), (7, 0.04)))


def backend(*steps):
    return Continuation("math-gsm-03", tuple(steps))


def test_agreeing_continuations_score_every_step():
    got = backend(step((5, 0.58), (7, 0.31), (9, 0.11)), step((7, 0.46), (5, 0.43), (9, 0.11)),
                  step((9, 0.89), (5, 0.07), (7, 0.04)))
    d = compare_continuation("math-gsm-03", 128, 40, GOLDEN, got, bound=0.075)
    assert d.passed and d.failures == []
    assert (d.steps, d.compared, d.diverged_at, d.accepted) == (3, 3, None, None)
    assert d.max_probability_error == pytest.approx(0.02, abs=1e-12)


def test_a_step_over_the_bound_fails_naming_the_step():
    got = backend(step((5, 0.6), (7, 0.3), (9, 0.1)), step((7, 0.55), (5, 0.34), (9, 0.11)),
                  step((9, 0.9), (5, 0.06), (7, 0.04)))
    d = compare_continuation("math-gsm-03", 128, 40, GOLDEN, got, bound=0.075)
    assert not d.passed and d.compared == 3 and d.diverged_at is None
    assert d.failures == ["math-gsm-03: decode step 2: max probability error 0.1 > bound 0.075 (bucket 128)"]


def test_divergence_inside_a_near_tie_is_accepted_and_ends_the_comparison():
    # Step 2: the golden prefers 7 (0.45) over 5 (0.44); the backend picks 5 with an error of 0.02.
    got = backend(step((5, 0.6), (7, 0.3), (9, 0.1)), step((5, 0.46), (7, 0.43), (9, 0.11)),
                  step((0, 0.99), (9, 0.005), (5, 0.003), (7, 0.002)))  # a different context: never scored
    d = compare_continuation("math-gsm-03", 128, 40, GOLDEN, got, bound=0.075)
    assert d.passed and d.failures == []
    assert (d.compared, d.diverged_at, d.golden_token, d.backend_token, d.accepted) == (2, 2, 7, 5, True)
    assert d.why == "inside a near-tie: golden token 7 leads backend token 5 by 0.01 <= 2 x max error 0.02"


def test_divergence_outside_a_near_tie_fails_naming_prompt_step_and_both_tokens():
    # Step 3: the golden's 9 leads 5 by 0.84; the backend picks 5, and 9 is not even among its top two.
    # (Where the backend returns both tokens, its greedy choice bounds the error from below by half the
    # golden's lead: then only the bound can fail the step, as for the first token.)
    got = backend(step((5, 0.6), (7, 0.3), (9, 0.1)), step((7, 0.45), (5, 0.44), (9, 0.11)),
                  step((5, 0.07), (7, 0.05)))
    d = compare_continuation("math-gsm-03", 128, 40, GOLDEN, got, bound=None)
    assert not d.passed and (d.compared, d.diverged_at, d.accepted) == (3, 3, False)
    assert d.failures == ["math-gsm-03: decode step 3: golden token 9 is missing from the backend's top-2",
                          "math-gsm-03: decode step 3: continuations diverged outside a near-tie: golden token 9 "
                          "leads backend token 5 by 0.84 > 2 x max error 0.01"]


def test_divergence_to_a_token_outside_the_golden_top_fails():
    got = backend(step((11, 0.5), (5, 0.3), (7, 0.15), (9, 0.05)), *GOLDEN[1:])
    d = compare_continuation("math-gsm-03", 128, 40, GOLDEN, got, bound=None)
    assert not d.passed and (d.diverged_at, d.golden_token, d.backend_token) == (1, 5, 11)
    assert d.failures == ["math-gsm-03: decode step 1: continuations diverged outside a near-tie: golden token 5, "
                          "backend token 11, which is not in the golden top-3"]


def test_a_tie_made_by_an_error_over_the_bound_is_not_accepted():
    # Step 2 diverges inside 2 x its error, but that error (0.31) is itself over the bound.
    got = backend(GOLDEN[0], step((5, 0.75), (7, 0.14), (9, 0.11)))
    d = compare_continuation("math-gsm-03", 128, 40, GOLDEN[:2], got, bound=0.075)
    assert not d.passed and (d.diverged_at, d.accepted) == (2, False)
    assert d.failures == [
        "math-gsm-03: decode step 2: max probability error 0.31 > bound 0.075 (bucket 128)",
        "math-gsm-03: decode step 2: continuations diverged at a step that fails its own tests: golden token 7 "
        "leads backend token 5 by 0.01, within 2 x a max error (0.31) that is itself too large"]


def test_a_short_continuation_fails():
    d = compare_continuation("math-gsm-03", 128, 40, GOLDEN, backend(*GOLDEN[:2]), bound=0.075)
    assert not d.passed and d.compared == 2
    assert d.failures == ["math-gsm-03: decode: the backend continued 2 steps, the case asks for 3"]


def _decode_golden(embedded):
    return embedded.goldens["decode-semantic"]


def test_decode_golden_is_format_2_and_its_first_step_is_the_first_token(embedded):
    g = load_golden(_decode_golden(embedded))
    assert (g.format, g.decode_steps, g.kind) == (2, 8, "semantic")
    assert sorted(g.continuations) == g.ids
    for cid in g.ids:
        first = g.continuations[cid][0][1]
        assert [t for t, _ in first] == [t for t, _ in g.prompts[cid]]  # generate's prefill and the scoring pass
        assert max(abs(a - b) for (_, a), (_, b) in zip(first, g.prompts[cid])) < 1e-4
        assert all(token == top[0][0] and len(top) == g.top_k for token, top in g.continuations[cid])
    assert g.provenance["dtype"] == "float32" and "--decode 8" in g.provenance["command"]


def test_format_1_golden_loads_without_continuations(embedded):
    g = load_golden(embedded.goldens["semantic"])
    assert (g.format, g.decode_steps, g.continuations) == (1, 0, None)


def test_a_format_1_reader_reads_a_decode_golden_as_a_first_token_golden(embedded):
    """What an older kit reads of a golden: kind, fixture, model, top_k and each case's id and top list,
    all unchanged in format 2 (the continuation rides beside them)."""
    v2 = json.loads(_decode_golden(embedded).read_text())
    assert {"kind", "fixture_sha256", "model_digest", "top_k", "provenance", "cases"} <= set(v2)
    for case in v2["cases"]:
        assert set(case) == {"id", "top_logprobs", "continuation"}
        assert all(set(e) == {"token_id", "logprob"} for e in case["top_logprobs"])


def _rewritten(embedded, tmp_path, edit):
    doc = json.loads(_decode_golden(embedded).read_text())
    edit(doc)
    path = tmp_path / "golden.json"
    path.write_bytes(canonical_bytes(doc))
    return path


def test_a_newer_format_is_refused(embedded, tmp_path):
    path = _rewritten(embedded, tmp_path, lambda d: d.__setitem__("format", 3))
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    assert str(exc.value) == f"golden {path} is format 3, newer than this parity-kit reads (2); upgrade parity-kit"


def test_a_continuation_of_the_wrong_length_is_refused(embedded, tmp_path):
    path = _rewritten(embedded, tmp_path, lambda d: d["cases"][1]["continuation"].pop())
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    cid = json.loads(path.read_text())["cases"][1]["id"]
    assert str(exc.value) == (f"golden {path}: case {cid}: its continuation holds 7 steps, but the golden's "
                              "decode_steps is 8")


def test_a_continuation_token_that_is_not_the_greedy_one_is_refused(embedded, tmp_path):
    def edit(d):
        s = d["cases"][0]["continuation"][4]
        s["token_id"] = s["top_logprobs"][1]["token_id"]
    path = _rewritten(embedded, tmp_path, edit)
    doc = json.loads(path.read_text())
    s = doc["cases"][0]["continuation"][4]
    with pytest.raises(BadInput) as exc:
        load_golden(path)
    assert str(exc.value) == (f"golden {path}: case {doc['cases'][0]['id']}: continuation step 5: token "
                              f"{s['token_id']} is not the step's most likely token {s['top_logprobs'][0]['token_id']}")


def test_decode_golden_checks(embedded):
    plain, decode = load_golden(embedded.goldens["semantic"]), load_golden(_decode_golden(embedded))
    check_decode_golden(decode, 8, "c")
    with pytest.raises(BadInput) as exc:
        check_decode_golden(decode, 9, "c", "d.toml:3: ")
    assert str(exc.value) == (f"d.toml:3: case c has decode = 9, but golden {decode.path} "
                              "continues each prompt only 8 steps")
    with pytest.raises(BadInput) as exc:
        check_decode_golden(plain, 4, "c")
    assert str(exc.value) == (f"case c has decode = 4, but golden {plain.path} holds no continuations "
                              "(make one with `parity-kit golden make --decode 4`)")


def test_a_continuation_past_the_context_is_refused(embedded):
    limits = model_limits(embedded.model)
    check_continuations_fit([("p", 1016)], 8, limits, "m")
    with pytest.raises(BadInput) as exc:
        check_continuations_fit([("p", 1016)], 9, limits, "m", "x: ")
    assert str(exc.value) == (f"x: prompt p has 1016 tokens; continued 9 steps it needs 1025 positions, more than "
                              f"the context of model m (1024, max_position_embeddings in {limits.source})")
