"""hf batching: same-bucket prompts padded together give the results each gives alone.

Tolerance: 1e-5 in probability. Padding is exact (masked keys, positions counted
from the first real token), so all that may differ is float32 rounding: a padded
batch goes through a masked attention kernel instead of the causal one and
through matmuls of another shape, whose blocking sums in another order. Over the
tiny model's 2 layers and at most 1024 tokens that moved probabilities by at most
1.4e-6 (12 prompts, batches of 4, either side; float32's epsilon is 1.2e-7, and
a softmax over 768 logits of magnitude ~10 multiplies it by about 10). A real
padding fault (an unmasked pad token, positions shifted by the padding, the wrong
row gathered) moves them by 1e-3 or more: two orders above the tolerance.
"""

from __future__ import annotations

import math

import pytest

from kit.backends.hf.runtime import HfBackend, plan_batches
from kit.core.records.fixture import Prompt, load_fixture

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def mixed_cases(embedded) -> list[Prompt]:
    """Three prompts of different lengths from each of two buckets, interleaved."""
    fixture = load_fixture(embedded.fixture)
    chosen = []
    for bucket in (256, 1024):
        cs = sorted((c for c in fixture.prompts if c.bucket == bucket), key=lambda c: c.n_tokens)
        chosen += [cs[0], cs[len(cs) // 2], cs[-1]]
    assert len({c.n_tokens for c in chosen}) == 6  # every batch really needs padding
    return [chosen[i] for i in (0, 3, 1, 4, 2, 5)]


@pytest.fixture(scope="module")
def alone(embedded, mixed_cases):
    return HfBackend(str(embedded.model), dtype="float32").observe(mixed_cases, top_n=20)


def max_probability_difference(a, b) -> float:
    pb = dict(b.top_logprobs)
    shared = [t for t, _ in a.top_logprobs[:10] if t in pb]
    assert len(shared) >= 9, "top tokens disagree"
    return max(abs(math.exp(lp) - math.exp(pb[t])) for t, lp in a.top_logprobs[:10] if t in pb)


def test_plan_batches_keeps_buckets_apart_and_order_recoverable(mixed_cases):
    batches = plan_batches(mixed_cases, 2)
    assert sorted(i for b in batches for i in b) == list(range(len(mixed_cases)))
    assert all(len(b) <= 2 for b in batches)
    assert all(len({mixed_cases[i].bucket for i in b}) == 1 for b in batches)
    assert len(batches) == 4  # 3 + 3 prompts in batches of 2


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batch_equals_each_prompt_alone(embedded, mixed_cases, alone, side, attn):
    backend = HfBackend(str(embedded.model), dtype="float32", attn_implementation=attn,
                        batch_size=3, padding_side=side)
    assert_batches_of_three_equal_alone(backend, mixed_cases, alone)
    assert (backend.details()["attention"], backend.details()["padding_side"]) == (attn, side)


def test_compiled_layers_take_a_padded_batch_too(embedded, mixed_cases, alone):
    # A padded batch hands the compiled layers a mask, which the unpadded prompts never do.
    backend = HfBackend(str(embedded.model), dtype="float32", batch_size=3, padding_side="left", compile=True)
    assert_batches_of_three_equal_alone(backend, mixed_cases, alone)
    assert backend.details()["compile"] is True
    assert all(layer._compiled_call_impl is not None for layer in backend.model.get_decoder().layers)


def assert_batches_of_three_equal_alone(backend, mixed_cases, alone) -> None:
    batched = backend.observe(mixed_cases, top_n=20)
    # Batching really happened: two batches of three, each padded to its longest prompt.
    longest = {b: max(c.n_tokens for c in mixed_cases if c.bucket == b) for b in (256, 1024)}
    assert [(b["bucket"], b["rows"], b["padded_to"]) for b in backend.details()["batches"]] == [
        (256, 3, longest[256]), (1024, 3, longest[1024])]
    assert [o.prompt_id for o in batched] == [c.id for c in mixed_cases]
    for a, b in zip(alone, batched):
        assert a.top_logprobs[0][0] == b.top_logprobs[0][0], a.prompt_id
        assert max_probability_difference(a, b) < TOLERANCE, a.prompt_id
        assert all(math.isfinite(lp) for _, lp in b.top_logprobs)


def test_left_padding_counts_positions_from_the_first_real_token(embedded, mixed_cases):
    backend = HfBackend(str(embedded.model), dtype="float32", batch_size=3, padding_side="left")
    rows = mixed_cases[:3:2]  # two prompts of one bucket, different lengths
    ids, mask, positions, last = backend.pad(rows)
    short = min(range(2), key=lambda r: rows[r].n_tokens)
    pad = ids.shape[1] - rows[short].n_tokens
    assert pad > 0
    assert mask[short, :pad].sum() == 0 and mask[short, pad:].all()
    assert positions[short, pad:].tolist() == list(range(rows[short].n_tokens))
    assert ids[short, pad:].tolist() == list(rows[short].prompt_token_ids)
    assert last.tolist() == [ids.shape[1] - 1] * 2


def test_right_padding_gathers_each_rows_last_real_position(embedded, mixed_cases):
    backend = HfBackend(str(embedded.model), dtype="float32", batch_size=3, padding_side="right")
    rows = mixed_cases[:3:2]
    ids, mask, positions, last = backend.pad(rows)
    assert last.tolist() == [c.n_tokens - 1 for c in rows]
    assert positions[0, : rows[0].n_tokens].tolist() == list(range(rows[0].n_tokens))
    assert [int(m.sum()) for m in mask] == [c.n_tokens for c in rows]


def test_a_padded_batch_projects_one_position_per_row(embedded, mixed_cases):
    backend = HfBackend(str(embedded.model), dtype="float32", batch_size=3)
    shapes = []
    backend.model.lm_head.register_forward_hook(lambda m, i, o: shapes.append(tuple(o.shape)))
    backend.observe(mixed_cases, top_n=5)
    assert shapes == [(3, backend.model.config.vocab_size)] * 2


def test_the_gathered_row_matters(embedded, mixed_cases, alone):
    """Guard against a vacuous comparison: the position before the last gives another answer."""
    case = mixed_cases[0]
    shorter = Prompt(case.id, case.bucket, case.prompt, case.prompt_token_ids[:-1])
    other = HfBackend(str(embedded.model), dtype="float32").observe([shorter], top_n=20)[0]
    pa, po = dict(alone[0].top_logprobs), dict(other.top_logprobs)
    moved = max(abs(math.exp(lp) - math.exp(po.get(t, -math.inf))) for t, lp in pa.items())
    assert moved > 100 * TOLERANCE
